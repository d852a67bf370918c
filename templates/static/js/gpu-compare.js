// Your GPU beside ours. A reader runs `curriculum bench --only PATTERN` on their own GPU and
// drops the results file it writes (kernels/results/<gpu>.json) onto a page, or picks it with
// the file field; every measured figure on the page then shows their number beside this site's,
// and every chart gets a table of their cases. The file is read in this browser only, nothing is
// uploaded, and a compact copy stays in local storage until the reader clears it.
// Figures carry what they are matched by: data-case, data-field, data-shape (empty: the headline
// shape), and, where the repository holds results for several GPUs, data-others with the same
// figure on each of them, which the selector shows instead.

const KEY = "curriculum.compare";
const CASE_ID = /^[a-z0-9_-]+\/[A-Za-z0-9_-]+$/;
const SLUG = /^[a-z0-9][a-z0-9-]{0,63}$/;
const MAX_CASES = 20000;

const isRecord = (x) => x !== null && typeof x === "object" && !Array.isArray(x);
const positive = (x) => typeof x === "number" && Number.isFinite(x) && x > 0;
const nonNegative = (x) => typeof x === "number" && Number.isFinite(x) && x >= 0;
const num = (x) => (typeof x === "number" && Number.isFinite(x) ? x : null);

// -- values and their text, as the build writes them (measure.case_value, format_value) ----

export function caseValues(c) {
  const ms = c.stat.median_ms;
  const base = (c.baselines || []).find((b) => isRecord(b) && b.name === c.library) || null;
  const baseMs = base && isRecord(base.stat) ? num(base.stat.median_ms) : null;
  const ns = positive(c.items) ? (ms * 1e6) / c.items : null;
  const mhz = isRecord(c.clocks_before) ? num(c.clocks_before.sm_mhz) : null;
  const values = {
    ms, us: ms * 1000, gbps: num(c.gbps), tbps: num(c.gbps) === null ? null : c.gbps / 1000,
    tflops: num(c.tflops), pct_roofline: num(c.pct_roofline), pct_library: num(c.pct_library),
    rel_err: num(c.rel_err), library_ms: baseMs, library_us: baseMs === null ? null : baseMs * 1000,
    library_gbps: base ? num(base.gbps) : null, library_tflops: base ? num(base.tflops) : null,
    ns_per_item: ns, cycles_per_item: ns !== null && mhz ? (ns * mhz) / 1000 : null,
  };
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== null && Number.isFinite(v)));
}

const grouped = (v, digits) =>
  v.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
const g3 = (v) => String(Number(v.toPrecision(3)));

export function formatValue(field, v) {
  if (field === "ms" || field === "library_ms") return v < 100 ? `${v.toFixed(3)} ms` : `${grouped(v, 0)} ms`;
  if (field === "us" || field === "library_us") return `${grouped(v, 1)} µs`;
  if (field === "gbps" || field === "library_gbps") return `${grouped(v, 0)} GB/s`;
  if (field === "tbps") return `${v.toFixed(2)} TB/s`;
  if (field === "tflops" || field === "library_tflops") return `${grouped(v, 1)} TFLOP/s`;
  if (field.startsWith("pct_")) return v < 10 ? `${v.toFixed(1)}%` : `${v.toFixed(0)}%`;
  if (field === "rel_err") return v.toExponential(1).replace(/e([+-])(\d)$/, "e$10$2");
  if (field === "ns_per_item") return v >= 1000 ? `${g3(v / 1000)} µs` : `${g3(v)} ns`;
  if (field === "cycles_per_item") return v >= 1000 ? `${grouped(v, 0)} cycles` : `${g3(v)} cycles`;
  return String(v);
}

// -- reading a results file -----------------------------------------------------------------

class Refused extends Error {}

function refuse(why) {
  throw new Refused(why);
}

// A results file (schema 1 or 2) as the compact record kept in storage, or a Refused error
// that says what is wrong with it.
export function compact(data) {
  if (!isRecord(data)) refuse("it is not a results file: a results file is one JSON object");
  if (!("schema_version" in data) || !Array.isArray(data.cases)) {
    refuse("it is not a results file of `curriculum bench` (it has no schema_version and cases)");
  }
  if (data.schema_version !== 1 && data.schema_version !== 2) {
    refuse(`its schema_version is ${JSON.stringify(data.schema_version)}; this site reads 1 and 2`);
  }
  if (typeof data.gpu_slug !== "string" || !SLUG.test(data.gpu_slug)) refuse("its gpu_slug is missing or malformed");
  if (!isRecord(data.runs) || !Object.keys(data.runs).length) refuse("it records no runs");
  if (data.cases.length > MAX_CASES) refuse(`it holds more than ${MAX_CASES} cases`);
  const latest = data.runs[Object.keys(data.runs).sort().at(-1)];
  const provenance = isRecord(latest) && isRecord(latest.provenance) ? latest.provenance : null;
  if (!provenance || typeof provenance.gpu_name !== "string" || !provenance.gpu_name.trim()) {
    refuse("its latest run names no GPU (provenance.gpu_name)");
  }
  const cases = data.cases.map((c, i) => {
    const where = `case ${i + 1}`;
    if (!isRecord(c) || typeof c.id !== "string" || !CASE_ID.test(c.id)) refuse(`${where} has no valid id`);
    if (typeof c.shape_label !== "string") refuse(`${c.id} has no shape_label`);
    if (!isRecord(c.stat) || !positive(c.stat.median_ms)) refuse(`${c.id} has no positive median time`);
    for (const k of ["gbps", "tflops"]) if (k in c && !nonNegative(c[k])) refuse(`${c.id} has a bad ${k}`);
    let baselines = c.baselines;
    let library = c.library;
    if (data.schema_version === 1 && isRecord(c.baseline)) {
      baselines = [c.baseline];
      library = c.baseline.name;
    }
    return {
      id: c.id, shape: c.shape_label, headline: c.headline === true,
      benchmark: typeof c.benchmark === "string" ? c.benchmark : "",
      library: typeof library === "string" ? library : "",
      values: caseValues({ ...c, baselines: Array.isArray(baselines) ? baselines : [], library }),
    };
  });
  const ceilings = {};
  for (const [name, ceil] of Object.entries(isRecord(latest.ceilings) ? latest.ceilings : {})) {
    if (!isRecord(ceil) || !isRecord(ceil.stat) || !positive(ceil.stat.median_ms)) continue;
    const v = { ms: ceil.stat.median_ms };
    if (positive(ceil.gbps)) Object.assign(v, { gbps: ceil.gbps, tbps: ceil.gbps / 1000 });
    if (positive(ceil.tflops)) v.tflops = ceil.tflops;
    ceilings[name] = v;
  }
  return { version: 1, gpu: data.gpu_slug, name: provenance.gpu_name.trim().slice(0, 80),
           date: String(provenance.date || "").slice(0, 10), cases, ceilings };
}

// The value of one figure in a compact record, or null when it has none.
export function lookup(record, caseId, field, shape) {
  if (caseId.startsWith("ceiling/")) {
    const ceil = record.ceilings[caseId.slice("ceiling/".length)];
    return ceil && field in ceil ? ceil[field] : null;
  }
  const c = record.cases.find((x) => x.id === caseId && (shape ? x.shape === shape : x.headline));
  return c && field in c.values ? c.values[field] : null;
}

function validRecord(r) {
  return isRecord(r) && r.version === 1 && typeof r.name === "string" && Array.isArray(r.cases) && isRecord(r.ceilings);
}

function loadStored() {
  try {
    const r = JSON.parse(localStorage.getItem(KEY) || "null");
    return validRecord(r) ? r : null;
  } catch {
    return null;
  }
}

// -- the page ---------------------------------------------------------------------------

const state = { file: null, show: "" }; // show: "" (nothing), "file", or a repository GPU's slug

function clearMarks() {
  for (const node of document.querySelectorAll("[data-compare-mark]")) node.remove();
}

function markFigure(fig, label, text, missing) {
  const span = document.createElement("span");
  span.className = "fig-compare" + (missing ? " fig-compare-missing" : "");
  span.dataset.compareMark = "";
  span.textContent = ` (${label}: ${text})`;
  fig.after(span);
}

function chartTable(chart, record) {
  const kind = chart.dataset.kind || "";
  const field = chart.dataset.field || (kind === "roofline" ? "tflops" : "pct_library");
  const topic = chart.dataset.topic;
  const rows = record.cases.filter((c) => c.id.startsWith(`${topic}/`) &&
    (!chart.dataset.benchmark || c.benchmark === chart.dataset.benchmark) && field in c.values);
  const box = document.createElement("div");
  box.className = "table-scroll fig-compare-table";
  box.dataset.compareMark = "";
  if (!rows.length) {
    const p = document.createElement("p");
    p.className = "meta";
    p.textContent = `${record.name}: your file has no ${topic} cases with ${field} for this chart.`;
    box.append(p);
    return box;
  }
  const table = document.createElement("table");
  table.createCaption().textContent = `Beside the chart: ${record.name}, from your results file (${field})`;
  const head = table.createTHead().insertRow();
  for (const c of ["Case", "Shape", record.name]) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = c;
    head.append(th);
  }
  const body = table.createTBody();
  for (const c of rows.slice(0, 200)) {
    const row = body.insertRow();
    row.insertCell().textContent = c.id;
    row.insertCell().textContent = c.shape;
    row.insertCell().textContent = formatValue(field, c.values[field]);
  }
  box.append(table);
  return box;
}

function render(panel) {
  clearMarks();
  const status = panel.querySelector("[data-compare-status]");
  const select = panel.querySelector("[data-compare-show]");
  const clear = panel.querySelector("[data-compare-clear]");
  clear.hidden = !state.file;
  const fileOption = select.querySelector('option[value="file"]');
  fileOption.hidden = !state.file;
  fileOption.disabled = !state.file;
  fileOption.textContent = state.file ? `Your file: ${state.file.name}` : "Your file";
  if (state.show === "file" && !state.file) state.show = "";
  select.value = state.show;
  select.closest("[data-compare-choice]").hidden = select.options.length <= 2 && !state.file;
  if (state.show === "file") {
    const r = state.file;
    let shown = 0;
    for (const fig of document.querySelectorAll(".fig[data-case]")) {
      const v = lookup(r, fig.dataset.case, fig.dataset.field, fig.dataset.shape || "");
      markFigure(fig, r.name, v === null ? "not in your file" : formatValue(fig.dataset.field, v), v === null);
      if (v !== null) shown += 1;
    }
    for (const chart of document.querySelectorAll("figure.chart[data-topic]")) chart.after(chartTable(chart, r));
    // The measurements page: each case's median time and share of the ceiling, beside ours.
    for (const row of document.querySelectorAll("table.measurements tr[data-case]")) {
      const cells = row.querySelectorAll("td.n");
      [["us", cells[0]], ["pct_roofline", cells[1]]].forEach(([field, cell]) => {
        if (!cell) return;
        const v = lookup(r, row.dataset.case, field, row.dataset.shape || "");
        const span = document.createElement("span");
        span.className = "fig-compare" + (v === null ? " fig-compare-missing" : "");
        span.dataset.compareMark = "";
        span.textContent = v === null ? ` (${r.name}: —)` : ` (${r.name}: ${formatValue(field, v)})`;
        cell.append(span);
      });
    }
    const figs = document.querySelectorAll(".fig[data-case]").length;
    status.textContent = `Showing ${r.name}${r.date ? ` (measured ${r.date})` : ""} beside this site's figures: ` +
      `${shown} of ${figs} on this page are in your file.`;
  } else if (state.show) {
    let name = state.show;
    for (const fig of document.querySelectorAll(".fig[data-others]")) {
      let others = {};
      try {
        others = JSON.parse(fig.dataset.others);
      } catch {
        continue;
      }
      const entry = others[state.show];
      if (!Array.isArray(entry)) continue;
      name = String(entry[0]);
      markFigure(fig, name, String(entry[1]), false);
    }
    status.textContent = `Showing ${name} beside this site's figures.`;
  } else if (!status.dataset.keep) {
    status.textContent = "";
  }
  delete status.dataset.keep;
}

function say(panel, text) {
  const status = panel.querySelector("[data-compare-status]");
  status.dataset.keep = "1";
  status.textContent = text;
}

async function readFile(panel, file) {
  let record;
  try {
    if (file.size > 64 * 1024 * 1024) refuse("it is larger than 64 MB");
    let data;
    try {
      data = JSON.parse(await file.text());
    } catch {
      refuse("it is not JSON");
    }
    record = compact(data);
  } catch (err) {
    state.show = state.file ? state.show : "";
    render(panel);
    say(panel, `${file.name} was not read: ${err instanceof Refused ? err.message : "it could not be read"}. ` +
      "Drop the file `curriculum bench` writes, kernels/results/<gpu>.json.");
    return;
  }
  state.file = record;
  state.show = "file";
  let kept = true;
  try {
    localStorage.setItem(KEY, JSON.stringify(record));
  } catch {
    kept = false; // storage blocked or full: the comparison lasts for this page only
  }
  render(panel);
  if (!kept) say(panel, `${panel.querySelector("[data-compare-status]").textContent} (Not kept: this browser's storage refused it.)`);
}

function otherGpus() {
  const found = new Map();
  for (const fig of document.querySelectorAll(".fig[data-others]")) {
    try {
      for (const [slug, entry] of Object.entries(JSON.parse(fig.dataset.others))) {
        if (Array.isArray(entry) && SLUG.test(slug)) found.set(slug, String(entry[0]));
      }
    } catch {
      // a malformed attribute: that figure offers no other GPU
    }
  }
  return [...found.entries()].sort();
}

function code(text) {
  const c = document.createElement("code");
  c.textContent = text;
  return c;
}

function panelHtml(panel) {
  panel.classList.add("gpu-compare");
  panel.setAttribute("aria-label", "Your GPU beside ours");
  const details = document.createElement("details");
  details.dataset.compareDetails = "";
  const summary = document.createElement("summary");
  summary.textContent = "Your GPU beside ours";
  const p = document.createElement("p");
  p.append("Run ", code("curriculum bench --only PATTERN"), " on your GPU, then drop the results file it writes (",
    code("kernels/results/<gpu>.json"), ") anywhere on this page, or choose it here. It is read in this browser " +
    "only, nothing is uploaded, and it stays in this browser until you clear it.");
  const fileLabel = document.createElement("label");
  fileLabel.htmlFor = "gpu-compare-file";
  fileLabel.textContent = "Results file ";
  const input = document.createElement("input");
  input.type = "file";
  input.id = "gpu-compare-file";
  input.accept = ".json,application/json";
  input.dataset.compareFile = "";
  const fileLine = document.createElement("p");
  fileLine.append(fileLabel, input);
  const choice = document.createElement("p");
  choice.dataset.compareChoice = "";
  const selectLabel = document.createElement("label");
  selectLabel.htmlFor = "gpu-compare-show";
  selectLabel.textContent = "Show beside each figure ";
  const select = document.createElement("select");
  select.id = "gpu-compare-show";
  select.dataset.compareShow = "";
  select.append(new Option("No other GPU", ""));
  for (const [slug, name] of otherGpus()) select.append(new Option(name, slug));
  select.append(new Option("Your file", "file"));
  choice.append(selectLabel, select);
  const clear = document.createElement("button");
  clear.type = "button";
  clear.className = "tool-button";
  clear.dataset.compareClear = "";
  clear.textContent = "Clear your file";
  details.append(summary, p, fileLine, choice, clear);
  const status = document.createElement("p");
  status.className = "meta";
  status.dataset.compareStatus = "";
  status.setAttribute("aria-live", "polite");
  panel.replaceChildren(details, status);
  // Several GPUs in the repository: the selector is worth showing at once.
  if (select.options.length > 2) details.open = true;
  return { input, select, clear, details };
}

export function initCompare() {
  const hook = document.querySelector("[data-gpu-compare]");
  const hasFigures = document.querySelector(".fig[data-case], figure.chart[data-topic], table.measurements tr[data-case]");
  if (!hook && !hasFigures) return;
  let panel = hook;
  if (!panel) {
    panel = document.createElement("section");
    const main = document.querySelector("main");
    const head = main && (main.querySelector(".page-head") || main.querySelector("h1 + .summary") ||
      main.querySelector("h1"));
    if (head) head.after(panel);
    else if (main) main.append(panel);
    else return;
  }
  const { input, select, clear, details } = panelHtml(panel);
  state.file = loadStored();
  state.show = state.file ? "file" : "";
  if (state.file) details.open = true;
  input.addEventListener("change", () => {
    if (input.files.length) readFile(panel, input.files[0]).finally(() => (input.value = ""));
  });
  select.addEventListener("change", () => {
    state.show = select.value;
    render(panel);
  });
  clear.addEventListener("click", () => {
    try {
      localStorage.removeItem(KEY);
    } catch {
      // nothing was kept
    }
    state.file = null;
    state.show = "";
    render(panel);
    say(panel, "Your results file was cleared from this browser.");
  });
  const hasFiles = (e) => e.dataTransfer && [...e.dataTransfer.types].includes("Files");
  window.addEventListener("dragover", (e) => {
    if (hasFiles(e)) e.preventDefault();
  });
  window.addEventListener("drop", (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    const file = e.dataTransfer.files[0];
    if (file) {
      details.open = true;
      readFile(panel, file);
    }
  });
  window.addEventListener("storage", (e) => {
    if (e.key !== KEY) return;
    state.file = loadStored();
    if (!state.file && state.show === "file") state.show = "";
    render(panel);
  });
  render(panel);
}
