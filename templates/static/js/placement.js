// The placement check: score the answers in this browser, per course part, pick the first
// suggestion rule whose minimums the scores meet, and name a capsule to start at: the
// earliest, in course order, among the missed items whose capsule is a step of the suggested
// path, else among all missed items, else the path's first step when nothing was missed.
// The result is kept with the reader's progress by site.js.
import { recordPlacement, savedPlacement } from "./site.js";

const form = document.querySelector("[data-placement]");
const resultBox = document.querySelector("[data-placement-result]");
const siteRoot = new URL(document.body.dataset.root || "./", location.href);

// A link as the page writes it, made relative to the site root for storing.
function fromRoot(href) {
  const url = new URL(href, location.href);
  const base = siteRoot.pathname;
  return url.pathname.startsWith(base) ? url.pathname.slice(base.length) + url.hash : href;
}

function rules() {
  return [...document.querySelectorAll("[data-placement-rules] > li")].map((li) => ({
    path: li.dataset.path,
    title: li.dataset.title,
    href: li.dataset.href,
    reason: li.dataset.reason,
    minTotal: Number(li.dataset.minTotal),
    min: JSON.parse(li.dataset.min),
    firstTitle: li.dataset.firstTitle,
    firstHref: li.dataset.firstHref,
    capsules: new Set(li.dataset.capsules.split(" ").filter(Boolean)),
  }));
}

export function score(items) {
  const scores = {};
  let right = 0;
  for (const item of items) {
    const pair = (scores[item.part] ||= [0, 0]);
    pair[1] += 1;
    if (item.correct) {
      pair[0] += 1;
      right += 1;
    }
  }
  return { scores, right, total: items.length };
}

export function choose(ruleList, result) {
  const share = (part) => (result.scores[part] ? result.scores[part][0] / result.scores[part][1] : 0);
  return ruleList.find(
    (r) =>
      result.right / result.total >= r.minTotal &&
      Object.entries(r.min).every(([part, least]) => share(part) >= least),
  );
}

function check(event) {
  event.preventDefault();
  const items = [...form.querySelectorAll("[data-item]")].map((fs) => {
    const picked = fs.querySelector("input:checked");
    const correct = Boolean(picked) && picked.value === fs.dataset.answer;
    fs.classList.toggle("is-right", correct);
    fs.classList.toggle("is-wrong", !correct);
    fs.querySelector("[data-verdict]").textContent = correct
      ? "Right."
      : picked
        ? "Not quite: see why below."
        : "Not answered: see why below.";
    fs.querySelector(".placement-explain").hidden = false;
    return {
      part: fs.dataset.part,
      capsule: fs.dataset.capsule,
      correct,
      order: Number(fs.dataset.capsuleOrder),
      title: fs.dataset.capsuleTitle,
      href: fs.dataset.capsuleHref,
    };
  });
  const result = score(items);
  const rule = choose(rules(), result);
  const missed = items.filter((i) => !i.correct).sort((a, b) => a.order - b.order);
  const first = missed.find((i) => rule.capsules.has(i.capsule)) || missed[0];
  const start = first
    ? { title: first.title, href: first.href }
    : { title: rule.firstTitle, href: rule.firstHref };
  recordPlacement({
    path: { id: rule.path, title: rule.title, href: fromRoot(rule.href) },
    start: { title: start.title, href: fromRoot(start.href) },
    scores: result.scores,
  });
  show(savedPlacement(), rule.reason, `${result.right} of ${result.total} right.`);
  resultBox.scrollIntoView({ block: "start" });
}

function show(saved, reason, line) {
  if (!saved) return;
  resultBox.hidden = false;
  resultBox.querySelector("[data-placement-score]").textContent = line;
  for (const row of resultBox.querySelectorAll("[data-part-row]")) {
    const pair = saved.scores[row.dataset.partRow];
    row.querySelector("[data-part-score]").textContent = pair ? `${pair[0]} of ${pair[1]}` : "–";
  }
  const path = resultBox.querySelector("[data-placement-path]");
  path.href = new URL(saved.path.href, siteRoot).href;
  path.textContent = saved.path.title;
  resultBox.querySelector("[data-placement-reason]").textContent = reason;
  const start = resultBox.querySelector("[data-placement-start]");
  start.href = new URL(saved.start.href, siteRoot).href;
  start.textContent = saved.start.title;
}

if (form && resultBox) {
  // The reasons stay closed until the answers are checked.
  for (const why of form.querySelectorAll(".placement-explain")) why.hidden = true;
  const button = form.querySelector("[data-placement-check]");
  button.hidden = false;
  form.addEventListener("submit", check);
  const saved = savedPlacement();
  if (saved) {
    const rule = rules().find((r) => r.path === saved.path.id);
    const right = Object.values(saved.scores).reduce((n, p) => n + p[0], 0);
    const total = Object.values(saved.scores).reduce((n, p) => n + p[1], 0);
    show(saved, rule ? rule.reason : "", `Your last check: ${right} of ${total} right.`);
  }
}
