// Reading an experiment's inputs: every value is checked against the limits its own control
// declares (min, max, step, from the experiment's front matter), and each refusal is named, so
// a model never runs on an empty, out-of-range or off-grid value. `show` writes a result line
// only when it holds no NaN, Infinity, undefined or null.

const BAD_TEXT = /NaN|Infinity|undefined|null/;

function label(input) {
  const own = input.labels && input.labels[0];
  const text = own ? own.textContent.replace(/\s*\([^)]*\)\s*$/, "").trim() : "";
  return text || input.name || input.dataset.input;
}

// One value against its limits: null when it is acceptable, else why not.
export function problem(name, text, lo, hi, step) {
  const raw = String(text ?? "").trim();
  if (raw === "") return `${name} is empty`;
  const v = Number(raw);
  if (!Number.isFinite(v)) return `${name} is not a number`;
  if (v < lo || v > hi) return `${name} must lie between ${lo} and ${hi}`;
  if (Number.isFinite(step) && step > 0) {
    const n = (v - lo) / step;
    if (Math.abs(n - Math.round(n)) > 1e-6 + 1e-12 * Math.abs(n)) {
      return `${name} must be a multiple of ${step} (from ${lo})`;
    }
  }
  return null;
}

// Every named input of the form: { values, problems }. A control the page lacks is a problem too.
export function readInputs(form, names) {
  const values = {};
  const problems = [];
  const missing = names.filter((name) => !form.querySelector(`[data-input="${name}"]`));
  if (missing.length) problems.push(`this page lacks the model's input${missing.length > 1 ? "s" : ""} ${missing.join(", ")}`);
  for (const name of names) {
    const input = form.querySelector(`[data-input="${name}"]`);
    if (!input) continue;
    const lo = input.min === "" ? -Infinity : Number(input.min);
    const hi = input.max === "" ? Infinity : Number(input.max);
    const step = input.step === "" || input.step === "any" ? NaN : Number(input.step);
    // A number field holds "" for text it cannot parse (such as "abc" or "1e"), so the
    // browser's own flag tells those apart from an empty box.
    const unreadable = input.validity && input.validity.badInput;
    const why = unreadable ? `${label(input)} is not a number` : problem(label(input), input.value, lo, hi, step);
    input.setAttribute("aria-invalid", why ? "true" : "false");
    if (why) problems.push(why);
    else values[name] = Number(input.value);
  }
  return { values, problems };
}

export function finite(...xs) {
  return xs.every((x) => typeof x === "number" && Number.isFinite(x));
}

// The result line, or the reason there is none.
export function show(out, problems, text) {
  if (problems.length) {
    out.dataset.state = "refused";
    out.textContent = `Not computed: ${problems.join("; ")}.`;
    return;
  }
  if (typeof text !== "string" || BAD_TEXT.test(text)) {
    out.dataset.state = "refused";
    out.textContent = "Not computed: these inputs give no finite result.";
    return;
  }
  out.dataset.state = "ok";
  out.textContent = text;
}
