// The search page: Pagefind's index of this edition, loaded from the site's own folder.
// Each result shows its kind, course and access, read from the page's Pagefind metadata;
// results are grouped by kind. A query that finds nothing gets page titles close to it by
// edit distance, from the titles file the build writes beside the index.

let bundles = null;

// An edition's index is one Pagefind bundle or several: a large edition's pages are indexed
// in bundles of a bounded size, and the pages that every edition shows alike in one bundle
// the editions share. The first bundle's entry file names the others. Each is loaded as its
// own Pagefind module (one per folder), not merged into the first: see `searchBundles`.
async function load(siteRoot) {
  if (!bundles) {
    const first = new URL("static/pagefind/", siteRoot);
    const entry = await fetch(new URL("pagefind-entry.json", first))
      .then((reply) => reply.json()).catch(() => ({}));
    const folders = [first, ...(entry.curriculum_bundles || []).map((extra) => new URL(extra, first))];
    bundles = await Promise.all(folders.map(async (folder) => {
      const pf = await import(new URL("pagefind.js", folder).href);
      await pf.options({ baseUrl: siteRoot.pathname });
      await pf.init();
      return pf;
    }));
  }
  return bundles;
}

// Pagefind leaves out of a query each word that its bundle does not hold, so a bundle
// searched alone would answer "a b" with its pages that hold "a" when "b" is only in another
// bundle. A bundle answers here only if it holds every word of the query that some bundle
// holds: the same pages that one index of the whole edition would give. (A quoted phrase is
// searched as it is.) Results from all bundles are merged by Pagefind's score.
export async function searchBundles(list, query, filters = {}) {
  const words = /^\s*".+"\s*$/.test(query) ? [] : query.split(/\s+/).filter(Boolean);
  let answering = list;
  if (list.length > 1 && words.length > 1) {
    const holds = await Promise.all(list.map((pf) => Promise.all(
      words.map(async (word) => (await pf.search(word)).results.length > 0))));
    const somewhere = words.map((_, i) => holds.some((held) => held[i]));
    answering = list.filter((_, b) => somewhere.every((some, i) => !some || holds[b][i]));
  }
  const found = await Promise.all(answering.map((pf) => pf.search(query, { filters })));
  return found.flatMap((f) => f.results).sort((a, b) => b.score - a.score);
}

// Each filter's values over all bundles, with their page counts added up.
async function allFilters(list) {
  const merged = {};
  for (const filters of await Promise.all(list.map((pf) => pf.filters()))) {
    for (const [name, values] of Object.entries(filters)) {
      merged[name] = merged[name] || {};
      for (const [value, count] of Object.entries(values)) {
        merged[name][value] = (merged[name][value] || 0) + count;
      }
    }
  }
  return merged;
}

function fillFilters(form, available) {
  for (const select of form.querySelectorAll("[data-search-filter]")) {
    const values = Object.keys(available[select.dataset.searchFilter] || {}).sort();
    for (const value of values) {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = value;
      select.append(option);
    }
  }
}

function resultItem(data, siteRoot) {
  const li = document.createElement("li");
  li.className = "search-result";
  const a = document.createElement("a");
  a.href = new URL(data.url, siteRoot).href;
  a.textContent = data.meta.title || data.url;
  const h = document.createElement("h3");
  h.append(a);
  const meta = document.createElement("p");
  meta.className = "meta";
  meta.textContent = [data.meta.kind, data.meta.course, data.meta.access].filter(Boolean).join(" · ");
  const excerpt = document.createElement("p");
  excerpt.className = "excerpt";
  // Pagefind escapes the page text and adds only <mark> around the matched words.
  excerpt.innerHTML = data.excerpt;
  li.append(h, meta, excerpt);
  return li;
}

// Kinds in the order their groups appear; any other kind comes after them, by name.
const GROUPS = [
  ["Capsule", "Capsules"],
  ["Worked question", "Worked questions"],
  ["Puzzle", "Drills and puzzles"],
  ["Experiment", "Experiments"],
];

export function groupByKind(data) {
  const groups = new Map();
  for (const d of data) {
    const kind = d.meta.kind || "Other";
    if (!groups.has(kind)) groups.set(kind, []);
    groups.get(kind).push(d);
  }
  const rank = (k) => {
    const i = GROUPS.findIndex(([kind]) => kind === k);
    return i < 0 ? GROUPS.length : i;
  };
  return [...groups.entries()]
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b))
    .map(([kind, items]) => ({ kind, heading: (GROUPS.find(([k]) => k === kind) || [kind, `${kind} pages`])[1], items }));
}

function groupItem(group, siteRoot) {
  const li = document.createElement("li");
  li.className = "search-group";
  li.dataset.kind = group.kind;
  const h = document.createElement("h2");
  h.textContent = `${group.heading} (${group.items.length})`;
  const ol = document.createElement("ol");
  ol.append(...group.items.map((d) => resultItem(d, siteRoot)));
  li.append(h, ol);
  return li;
}

// -- suggestions --------------------------------------------------------------------------

// Levenshtein distance, with an early exit once every entry of a row exceeds `limit`.
export function editDistance(a, b, limit = Infinity) {
  if (a === b) return 0;
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      const v = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      row.push(v);
      if (v < best) best = v;
    }
    if (best > limit) return limit + 1;
    prev = row;
  }
  return prev[b.length];
}

const words = (s) => s.toLowerCase().normalize("NFKD").replace(/[\u0300-\u036f]/g, "").match(/[a-z0-9]+/g) || [];

// How far a query is from a title: the closest run of as many title words as the query has,
// or the whole title, whichever is nearer.
export function titleDistance(query, title) {
  const q = words(query);
  const t = words(title);
  if (!q.length || !t.length) return Infinity;
  const qs = q.join(" ");
  let best = editDistance(qs, t.join(" "));
  for (let i = 0; i + q.length <= t.length; i++) {
    best = Math.min(best, editDistance(qs, t.slice(i, i + q.length).join(" "), best));
  }
  return best;
}

// Up to `n` titles within a distance that grows with the query: one edit for short words, a
// quarter of the letters for longer queries.
export function suggest(query, titles, n = 5) {
  const length = words(query).join(" ").length;
  if (!length) return [];
  const limit = Math.max(1, Math.floor(length / 4));
  return titles
    .map((t) => ({ ...t, distance: titleDistance(query, t.title) }))
    .filter((t) => t.distance <= limit)
    .sort((a, b) => a.distance - b.distance || a.title.localeCompare(b.title))
    .slice(0, n);
}

let titlesFile = null;

function loadTitles(siteRoot) {
  if (!titlesFile) {
    titlesFile = fetch(new URL("static/search-titles.json", siteRoot).href)
      .then((r) => (r.ok ? r.json() : []))
      .then((rows) => (Array.isArray(rows) ? rows.filter((r) => r && typeof r.title === "string" && typeof r.url === "string") : []))
      .catch(() => []);
  }
  return titlesFile;
}

function suggestionItem(found, siteRoot) {
  const li = document.createElement("li");
  li.className = "search-suggestion";
  const a = document.createElement("a");
  a.href = new URL(found.url, siteRoot).href;
  a.textContent = found.title;
  li.append(a, ` (${found.kind})`);
  return li;
}

export function initSearch(siteRoot) {
  const form = document.querySelector("[data-search-form]");
  if (!form) return;
  const input = form.querySelector("[data-search-input]");
  const status = document.querySelector("[data-search-status]");
  const list = document.querySelector("[data-search-results]");
  const params = new URLSearchParams(location.search);
  input.value = params.get("q") || "";
  const header = document.getElementById("site-search-q");
  if (header) header.value = input.value;
  let serial = 0;

  async function run() {
    const query = input.value.trim();
    const filters = {};
    for (const select of form.querySelectorAll("[data-search-filter]")) {
      if (select.value) filters[select.dataset.searchFilter] = select.value;
    }
    const url = new URL(location.href);
    url.searchParams.set("q", query);
    history.replaceState(null, "", url);
    const mine = ++serial;
    if (!query) {
      list.replaceChildren();
      status.textContent = "Type a few words to search.";
      return;
    }
    status.textContent = "Searching…";
    const results = await searchBundles(await load(siteRoot), query, filters);
    const data = await Promise.all(results.slice(0, 30).map((r) => r.data()));
    if (mine !== serial) return;
    const n = results.length;
    if (n) {
      list.replaceChildren(...groupByKind(data).map((g) => groupItem(g, siteRoot)));
      status.textContent = `${n} ${n === 1 ? "page matches" : "pages match"} “${query}”.`;
      return;
    }
    const close = suggest(query, await loadTitles(siteRoot));
    if (mine !== serial) return;
    if (!close.length) {
      list.replaceChildren();
      status.textContent = `No page matches “${query}”.`;
      return;
    }
    const li = document.createElement("li");
    li.className = "search-group search-suggestions";
    const h = document.createElement("h2");
    h.textContent = "Titles close to your words";
    const ol = document.createElement("ol");
    ol.append(...close.map((t) => suggestionItem(t, siteRoot)));
    li.append(h, ol);
    list.replaceChildren(li);
    status.textContent = `No page matches “${query}”. Did you mean one of these?`;
  }

  load(siteRoot)
    .then(async (list) => {
      const filters = await allFilters(list);
      const chosen = Object.fromEntries(
        [...form.querySelectorAll("[data-search-filter]")].map((s) => [s.name, params.get(s.name) || ""]),
      );
      fillFilters(form, filters);
      for (const select of form.querySelectorAll("[data-search-filter]")) select.value = chosen[select.name];
      status.textContent = "Type a few words to search.";
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        run();
      });
      let timer = 0;
      input.addEventListener("input", () => {
        clearTimeout(timer);
        timer = setTimeout(run, 150);
      });
      form.addEventListener("change", run);
      if (input.value) run();
    })
    .catch(() => {
      status.textContent = "The search index could not be loaded. Serve the site over HTTP (curriculum serve) to search it.";
    });
}
