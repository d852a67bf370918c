// The search page: Pagefind's index of this edition, loaded from the site's own folder.
// Each result shows its kind, course and access, read from the page's Pagefind metadata.

let pagefind = null;

async function load(siteRoot) {
  if (!pagefind) {
    pagefind = await import(new URL("static/pagefind/pagefind.js", siteRoot).href);
    await pagefind.options({ baseUrl: siteRoot.pathname });
    await pagefind.init();
  }
  return pagefind;
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
  const h = document.createElement("h2");
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
    const pf = await load(siteRoot);
    const found = await pf.search(query, { filters });
    const data = await Promise.all(found.results.slice(0, 20).map((r) => r.data()));
    if (mine !== serial) return;
    list.replaceChildren(...data.map((d) => resultItem(d, siteRoot)));
    const n = found.results.length;
    status.textContent = n ? `${n} ${n === 1 ? "page matches" : "pages match"} “${query}”.` : `No page matches “${query}”.`;
  }

  load(siteRoot)
    .then(async (pf) => {
      const filters = await pf.filters();
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
