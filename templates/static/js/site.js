// Site behaviour: theme toggle, progress kept in this browser (pages done, self-grades and
// the placement result), keyboard shortcuts, the worked-question self-grade, the review
// page and search. Every page reads and works without it.
import { initCompare } from "./gpu-compare.js";
import { initSearch } from "./search.js";

const THEME_KEY = "curriculum.theme";
const PROGRESS_KEY = "curriculum.progress";
const root = document.documentElement;
const body = document.body;
const siteRoot = new URL(body.dataset.root || "./", location.href);

// -- theme ------------------------------------------------------------------------------

function currentTheme() {
  if (root.dataset.theme) return root.dataset.theme;
  return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

function setTheme(theme) {
  root.dataset.theme = theme;
  try {
    localStorage.setItem(THEME_KEY, theme);
  } catch {
    // Blocked storage: the choice lasts for this page only.
  }
  for (const button of document.querySelectorAll("[data-theme-toggle]")) {
    button.textContent = theme === "dark" ? "Light theme" : "Dark theme";
  }
}

function toggleTheme() {
  setTheme(currentTheme() === "dark" ? "light" : "dark");
}

for (const button of document.querySelectorAll("[data-theme-toggle]")) {
  button.textContent = currentTheme() === "dark" ? "Light theme" : "Dark theme";
  button.hidden = false;
  button.addEventListener("click", toggleTheme);
}

window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
  for (const button of document.querySelectorAll("[data-theme-toggle]")) {
    button.textContent = currentTheme() === "dark" ? "Light theme" : "Dark theme";
  }
});

// -- progress ---------------------------------------------------------------------------

function emptyProgress() {
  return { version: 1, done: {}, grades: {}, last: null, lastByCourse: {}, placement: null };
}

function isRecord(x) {
  return x !== null && typeof x === "object" && !Array.isArray(x);
}

const ID = /^[a-z0-9][a-z0-9-]*$/;
const isLink = (v) => typeof v === "string" && !/^[a-z]+:|^\/\//i.test(v);

// A placement result as placement.js records it: the path suggested, the capsule to start
// at, and right/total per course part.
function placementResult(v) {
  if (!isRecord(v) || !isRecord(v.path) || !isRecord(v.start) || !isRecord(v.scores)) return null;
  const { path, start } = v;
  if (!ID.test(path.id) || typeof path.title !== "string" || !isLink(path.href)) return null;
  if (typeof start.title !== "string" || !isLink(start.href)) return null;
  const scores = {};
  for (const [part, pair] of Object.entries(v.scores)) {
    if (ID.test(part) && Array.isArray(pair) && pair.length === 2 && pair.every(Number.isInteger)) {
      scores[part] = [pair[0], pair[1]];
    }
  }
  return {
    at: String(v.at || ""),
    path: { id: path.id, title: path.title, href: path.href },
    start: { title: start.title, href: start.href },
    scores,
  };
}

// Accepts only the shape this file writes, so an imported file cannot plant anything else.
function normalise(data) {
  const out = emptyProgress();
  if (!isRecord(data) || data.version !== 1) return null;
  for (const [key, at] of Object.entries(isRecord(data.done) ? data.done : {})) {
    if (/^(capsule|question|experiment|puzzle):[a-z0-9-]+$/.test(key)) out.done[key] = String(at);
  }
  for (const [key, grade] of Object.entries(isRecord(data.grades) ? data.grades : {})) {
    if (/^question:[a-z0-9-]+$/.test(key) && ["weak", "hire", "strong-hire"].includes(grade)) {
      out.grades[key] = grade;
    }
  }
  out.placement = placementResult(data.placement);
  const visit = (v) =>
    isRecord(v) && typeof v.path === "string" && typeof v.title === "string" && !/^[a-z]+:|^\/\//i.test(v.path)
      ? { path: v.path, title: v.title, at: String(v.at || "") }
      : null;
  out.last = visit(data.last);
  for (const [course, v] of Object.entries(isRecord(data.lastByCourse) ? data.lastByCourse : {})) {
    const ok = visit(v);
    if (ok && /^[a-z0-9-]+$/.test(course)) out.lastByCourse[course] = ok;
  }
  return out;
}

function loadProgress() {
  try {
    return normalise(JSON.parse(localStorage.getItem(PROGRESS_KEY))) || emptyProgress();
  } catch {
    return emptyProgress();
  }
}

function saveProgress(p) {
  try {
    localStorage.setItem(PROGRESS_KEY, JSON.stringify(p));
  } catch {
    // Blocked storage: progress lasts for this page only.
  }
}

const GRADE_LABELS = { weak: "Weak", hire: "Hire", "strong-hire": "Strong hire" };
let progress = loadProgress();
const pageKey = body.dataset.pageKey;

function sitePath() {
  const here = decodeURIComponent(location.pathname);
  const base = decodeURIComponent(siteRoot.pathname);
  return here.startsWith(base) ? here.slice(base.length) : here;
}

function recordVisit() {
  if (!pageKey) return;
  const visit = { path: sitePath(), title: body.dataset.pageTitle || document.title, at: new Date().toISOString() };
  progress.last = visit;
  if (body.dataset.course) progress.lastByCourse[body.dataset.course] = visit;
  saveProgress(progress);
}

function markDone(key, done) {
  if (done) progress.done[key] = new Date().toISOString();
  else delete progress.done[key];
  saveProgress(progress);
  showProgress();
}

// The course sidebar's items name their capsule only through the link
// (../<id>/index.html); give each the progress key the other lists carry.
for (const link of document.querySelectorAll(".sidebar li > a[href]")) {
  const id = link.getAttribute("href").match(/(?:^|\/)([^/]+)\/index\.html$/);
  if (id) link.parentElement.dataset.progress = `capsule:${id[1]}`;
}

function showProgress() {
  for (const el of document.querySelectorAll("[data-progress]")) {
    const done = Boolean(progress.done[el.dataset.progress]);
    el.classList.toggle("is-done", done);
    let mark = el.querySelector(":scope > .done-mark");
    if (done && !mark) {
      mark = document.createElement("span");
      mark.className = "done-mark";
      mark.innerHTML = '<span aria-hidden="true">✓</span><span class="visually-hidden">(done)</span>';
      el.append(mark);
    } else if (!done && mark) {
      mark.remove();
    }
  }
  for (const count of document.querySelectorAll("[data-progress-count]")) {
    const scope = count.closest("[data-progress-group]") || document.querySelector("main");
    const keys = new Set([...scope.querySelectorAll("[data-progress]")].map((el) => el.dataset.progress));
    const total = keys.size;
    const done = [...keys].filter((k) => progress.done[k]).length;
    count.hidden = total === 0;
    count.querySelector(".progress-text").textContent = `${done} of ${total} done`;
    count.querySelector(".progress-bar > span").style.width = total ? `${(100 * done) / total}%` : "0";
  }
  for (const button of document.querySelectorAll("[data-mark-done]")) {
    const done = Boolean(pageKey && progress.done[pageKey]);
    button.hidden = !pageKey;
    button.setAttribute("aria-pressed", done ? "true" : "false");
    button.textContent = done ? "Done ✓ (press to undo)" : "Mark as done";
  }
  for (const el of document.querySelectorAll("[data-resume]")) {
    const visit = el.dataset.resumeCourse ? progress.lastByCourse[el.dataset.resumeCourse] : progress.last;
    el.hidden = !visit;
    el.textContent = "";
    if (visit) {
      el.append("Resume where you left off: ");
      const a = document.createElement("a");
      a.href = new URL(visit.path, siteRoot).href;
      a.textContent = visit.title;
      a.dataset.resumeLink = "";
      el.append(a);
    }
  }
  const summary = document.querySelector("[data-progress-summary]");
  if (summary) {
    const n = Object.keys(progress.done).length;
    const g = Object.keys(progress.grades).length;
    summary.textContent = `${n} ${n === 1 ? "page" : "pages"} marked done · ${g} ${g === 1 ? "answer" : "answers"} self-graded.`;
  }
  showPlacement();
  showReview();
}

// Links stored in progress are relative to the site root.
function siteLink(text, href) {
  const a = document.createElement("a");
  a.href = new URL(href, siteRoot).href;
  a.textContent = text;
  return a;
}

function showPlacement() {
  const saved = progress.placement;
  for (const el of document.querySelectorAll("[data-placement-saved]")) {
    el.hidden = !saved;
    el.textContent = "";
    if (saved) {
      el.append("Your placement check suggests ", siteLink(saved.path.title, saved.path.href));
      el.append(", starting at ", siteLink(saved.start.title, saved.start.href), ".");
    }
  }
}

// The review page: each question's grade, and which "what to redo" block to show.
function showReview() {
  const items = document.querySelectorAll("[data-review]");
  if (!items.length) return;
  const counts = { weak: 0, hire: 0, "strong-hire": 0 };
  for (const item of items) {
    const grade = progress.grades[item.dataset.review];
    if (grade) counts[grade] += 1;
    item.dataset.grade = grade || "none";
    item.querySelector("[data-review-grade]").textContent = grade ? GRADE_LABELS[grade] : "not graded yet";
    for (const block of item.querySelectorAll("[data-redo]")) block.hidden = block.dataset.redo !== (grade || "none");
  }
  const summary = document.querySelector("[data-review-summary]");
  if (summary) {
    const graded = counts.weak + counts.hire + counts["strong-hire"];
    summary.textContent = `${graded} of ${items.length} graded: ${counts.weak} weak, ${counts.hire} hire, ${counts["strong-hire"]} strong hire.`;
  }
}

// placement.js records a finished check here, so it is kept and exported with the rest.
export function recordPlacement(result) {
  const ok = placementResult({ ...result, at: new Date().toISOString() });
  if (!ok) return false;
  progress.placement = ok;
  saveProgress(progress);
  showProgress();
  return true;
}

export function savedPlacement() {
  return progress.placement;
}

function toggleDone() {
  if (pageKey) markDone(pageKey, !progress.done[pageKey]);
}

for (const button of document.querySelectorAll("[data-mark-done]")) {
  button.addEventListener("click", toggleDone);
}

function exportProgress() {
  const blob = new Blob([JSON.stringify(progress, null, 2) + "\n"], { type: "application/json" });
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = "curriculum-progress.json";
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

async function importProgress(file) {
  const summary = document.querySelector("[data-progress-summary]");
  let incoming = null;
  try {
    incoming = normalise(JSON.parse(await file.text()));
  } catch {
    incoming = null;
  }
  if (!incoming) {
    summary.textContent = "That file is not a progress export from this site; nothing changed.";
    return;
  }
  progress = {
    version: 1,
    done: { ...progress.done, ...incoming.done },
    grades: { ...progress.grades, ...incoming.grades },
    last: incoming.last && (!progress.last || incoming.last.at > progress.last.at) ? incoming.last : progress.last,
    lastByCourse: { ...progress.lastByCourse, ...incoming.lastByCourse },
    placement:
      incoming.placement && (!progress.placement || incoming.placement.at > progress.placement.at)
        ? incoming.placement
        : progress.placement,
  };
  saveProgress(progress);
  showProgress();
}

const actions = document.querySelector("[data-progress-actions]");
if (actions) {
  actions.hidden = false;
  actions.querySelector("[data-progress-export]").addEventListener("click", exportProgress);
  const input = actions.querySelector("[data-progress-import]");
  input.addEventListener("change", () => {
    if (input.files.length) importProgress(input.files[0]).finally(() => (input.value = ""));
  });
  actions.querySelector("[data-progress-clear]").addEventListener("click", () => {
    if (window.confirm("Clear the progress kept in this browser?")) {
      progress = emptyProgress();
      saveProgress(progress);
      showProgress();
    }
  });
}

// -- worked questions: self-grade after the reveal --------------------------------------

const grader = document.querySelector("[data-self-grade]");
if (grader && pageKey) {
  const reveal = document.querySelector("[data-reveal]");
  const status = grader.querySelector("[data-self-grade-status]");
  const saved = progress.grades[pageKey];
  const show = () => (grader.hidden = false);
  if (saved) {
    grader.querySelector(`input[value="${saved}"]`).checked = true;
    status.textContent = `You graded this answer ${GRADE_LABELS[saved]}.`;
    show();
  }
  if (reveal) reveal.addEventListener("toggle", () => reveal.open && show());
  grader.addEventListener("change", (event) => {
    const grade = event.target.value;
    if (!GRADE_LABELS[grade]) return;
    progress.grades[pageKey] = grade;
    progress.done[pageKey] = new Date().toISOString();
    saveProgress(progress);
    status.textContent = `Saved: you graded this answer ${GRADE_LABELS[grade]}.`;
    showProgress();
  });
}

// -- keyboard shortcuts and their help --------------------------------------------------

const help = document.getElementById("help");
function openHelp() {
  if (help && !help.open) help.showModal();
}
for (const button of document.querySelectorAll("[data-help-open]")) {
  button.hidden = false;
  button.addEventListener("click", openHelp);
}

function follow(which) {
  const link = document.querySelector(`a[data-key="${which}"]`);
  if (link) link.click();
}

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
  const target = event.target;
  if (target.closest && target.closest("input, textarea, select, [contenteditable]")) return;
  if (help && help.open && event.key !== "?") return;
  const actionsByKey = {
    n: () => follow("next"),
    p: () => follow("prev"),
    d: toggleDone,
    t: toggleTheme,
    "?": openHelp,
    "/": () => document.getElementById("site-search-q")?.focus(),
  };
  const action = actionsByKey[event.key];
  if (action) {
    event.preventDefault();
    action();
  }
});

// -- wide blocks: a block that scrolls sideways must be reachable by keyboard ------------

function focusableScrollers() {
  for (const el of document.querySelectorAll(".math.block, .highlight, .table-scroll, .prose table")) {
    const scrolls = el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1;
    if (scrolls && !el.hasAttribute("tabindex")) {
      el.tabIndex = 0;
      el.setAttribute("role", "region");
      el.setAttribute("aria-label", el.classList.contains("highlight") ? "Code, scrolls sideways" : "Wide content, scrolls sideways");
      el.dataset.scrollFocus = "";
    } else if (!scrolls && "scrollFocus" in el.dataset) {
      el.removeAttribute("tabindex");
      el.removeAttribute("role");
      el.removeAttribute("aria-label");
      delete el.dataset.scrollFocus;
    }
  }
}
focusableScrollers();
window.addEventListener("resize", focusableScrollers);

recordVisit();
showProgress();
initSearch(siteRoot);
initCompare();
