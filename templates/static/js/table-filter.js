// Filters a plain table in place: a text box matched against each row's text and selects
// matched against a row's data attributes. Without JavaScript the form stays hidden and the
// whole table shows.
for (const form of document.querySelectorAll("form[data-table-filter]")) {
  const table = document.getElementById(form.dataset.tableFilter);
  if (!table) continue;
  const rows = [...table.tBodies[0].rows];
  const text = form.querySelector("[data-filter-text]");
  const selects = [...form.querySelectorAll("select[data-filter-column]")];
  const status = form.querySelector("[data-filter-status]");
  const apply = () => {
    const words = (text ? text.value : "").toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const row of rows) {
      const hay = row.textContent.toLowerCase();
      const ok = words.every((w) => hay.includes(w)) &&
        selects.every((s) => !s.value || row.dataset[s.dataset.filterColumn] === s.value);
      row.hidden = !ok;
      if (ok) shown += 1;
    }
    if (status) status.textContent = `${shown} of ${rows.length} cases shown.`;
  };
  form.addEventListener("input", apply);
  form.addEventListener("submit", (event) => event.preventDefault());
  const query = new URLSearchParams(location.search).get("q");
  if (query && text) text.value = query;
  form.hidden = false;
  apply();
}
