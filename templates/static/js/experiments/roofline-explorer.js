// Roofline explorer: a kernel of F FLOPs that must move Q bytes, on a card with compute roof pi
// and memory roof beta.
//   intensity I = F / Q                      (FLOP per byte)
//   ridge I* = pi / beta                     (left of it the kernel is memory-bound)
//   attainable rate = min(pi, I * beta)
//   time >= max(F / pi, Q / beta)
// This module is the only copy of the model: the result line, the plot and the table of
// example kernels all come from `rooflinePoint`.
import { finite, readInputs, show } from "./inputs.js";

const SVG = "http://www.w3.org/2000/svg";

export function rooflinePoint(p) {
  const intensity = p.gflop / p.gbytes;
  const ridge = p.peakTflops / p.tbps;
  const attainable = Math.min(p.peakTflops, intensity * p.tbps);
  const seconds = Math.max((p.gflop * 1e9) / (p.peakTflops * 1e12), (p.gbytes * 1e9) / (p.tbps * 1e12));
  return { intensity, ridge, attainable, seconds, bound: intensity < ridge ? "memory" : "compute" };
}

export const INPUTS = ["gflop", "gbytes", "peak", "bandwidth"];

// Work models of a few kernels (minimum bytes, FLOPs counted by hand): estimates, not
// measurements. [name, FLOPs, bytes]
export const EXAMPLES = [
  ["Vector add, 2²⁸ fp32", 2 ** 28, 12 * 2 ** 28],
  ["Softmax fp32, 32768 × 4096 (≈5 FLOP per element)", 5 * 32768 * 4096, 8 * 32768 * 4096],
  ["SGEMM fp32, 1024³", 2 * 1024 ** 3, 3 * 1024 ** 2 * 4],
  ["SGEMM fp32, 4096³", 2 * 4096 ** 3, 3 * 4096 ** 2 * 4],
];

export function resultLine(r) {
  return `Intensity ${r.intensity.toFixed(2)} FLOP/byte against a ridge of ${r.ridge.toFixed(2)}: ${r.bound}-bound. ` +
    `Attainable ${r.attainable.toFixed(2)} TFLOP/s; time ≥ ${(r.seconds * 1e6).toFixed(1)} µs.`;
}

function el(name, attrs, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

// A log-log plot: intensity 0.01..10^4 FLOP/B across, rate across four decades below the roof.
function draw(box, p, r) {
  // The axes span a fixed number of decades around finite, positive roofs; anything else
  // would give loops without end below.
  if (!finite(p.peakTflops, p.tbps, r.ridge, r.intensity, r.attainable) || p.peakTflops <= 0) return null;
  const w = 560, h = 310, left = 56, right = 30, top = 30, bottom = 44;
  const xMin = -2, xMax = 4;
  const yMax = Math.ceil(Math.log10(p.peakTflops * 2)), yMin = yMax - 5;
  const x = (i) => left + ((Math.log10(i) - xMin) / (xMax - xMin)) * (w - left - right);
  const y = (f) => top + ((yMax - Math.log10(f)) / (yMax - yMin)) * (h - top - bottom);
  const label = `Roofline: memory roof ${p.tbps.toFixed(2)} TB/s, compute roof ${p.peakTflops.toFixed(2)} TFLOP/s, ` +
    `ridge at ${r.ridge.toFixed(2)} FLOP/byte; the kernel sits at ${r.intensity.toFixed(2)} FLOP/byte, ` +
    `${r.attainable.toFixed(2)} TFLOP/s attainable (${r.bound}-bound).`;
  const svg = el("svg", { viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": label, class: "roofline-plot" });
  for (let d = xMin; d <= xMax; d++) {
    svg.append(el("line", { x1: x(10 ** d), x2: x(10 ** d), y1: top, y2: h - bottom, class: "grid" }));
    svg.append(el("text", { x: x(10 ** d), y: h - bottom + 16, "text-anchor": "middle" }, `${10 ** d}`));
  }
  for (let d = yMin; d <= yMax; d++) {
    svg.append(el("line", { x1: left, x2: w - right, y1: y(10 ** d), y2: y(10 ** d), class: "grid" }));
    svg.append(el("text", { x: left - 6, y: y(10 ** d) + 4, "text-anchor": "end" }, `${10 ** d}`));
  }
  svg.append(el("text", { x: (left + w - right) / 2, y: h - 6, "text-anchor": "middle" }, "FLOP per byte"));
  svg.append(el("text", { x: 8, y: 14, "text-anchor": "start" }, "TFLOP/s"));
  const lo = 10 ** xMin, hi = 10 ** xMax;
  const roof = [[lo, Math.max(lo * p.tbps, 10 ** yMin)], [r.ridge, p.peakTflops], [hi, p.peakTflops]];
  svg.append(el("polyline", { points: roof.map(([i, f]) => `${x(i)},${y(f)}`).join(" "), class: "roof" }));
  const cx = Math.min(Math.max(x(r.intensity), left), w - right);
  const cy = Math.min(Math.max(y(r.attainable), top), h - bottom);
  svg.append(el("circle", { cx, cy, r: 6, class: "point" }));
  return svg;
}

function table(p) {
  const t = document.createElement("table");
  t.className = "precomputed";
  t.dataset.table = "roofline-explorer";
  t.createCaption().textContent =
    `Kernels placed on this roofline (ridge point ${(p.peakTflops / p.tbps).toFixed(2)} FLOP/byte)`;
  const head = t.createTHead().insertRow();
  for (const c of ["Kernel", "GFLOP", "GB moved", "FLOP/byte", "Bound", "Attainable TFLOP/s", "Time ≥ (µs)"]) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = c;
    head.append(th);
  }
  const body = t.createTBody();
  for (const [name, flops, bytes] of [["Your kernel", p.gflop * 1e9, p.gbytes * 1e9], ...EXAMPLES]) {
    const r = rooflinePoint({ ...p, gflop: flops / 1e9, gbytes: bytes / 1e9 });
    const row = body.insertRow();
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = name;
    row.append(th);
    for (const cell of [(flops / 1e9).toFixed(3), (bytes / 1e9).toFixed(3), r.intensity.toFixed(2), r.bound,
      r.attainable.toFixed(2), (r.seconds * 1e6).toFixed(1)]) {
      row.insertCell().textContent = cell;
    }
  }
  return t;
}

export function update(form) {
  const out = form.querySelector("[data-output]");
  const box = form.querySelector("[data-figure]");
  const { values, problems } = readInputs(form, INPUTS);
  const clear = () => box && box.replaceChildren();
  if (problems.length) {
    show(out, problems);
    clear();
    return;
  }
  const p = { gflop: values.gflop, gbytes: values.gbytes, peakTflops: values.peak, tbps: values.bandwidth };
  const r = rooflinePoint(p);
  if (!finite(r.intensity, r.ridge, r.attainable, r.seconds)) {
    show(out, [], null);
    clear();
    return;
  }
  show(out, [], resultLine(r));
  if (box) {
    const svg = draw(box, p, r);
    box.replaceChildren(...(svg ? [svg] : []), table(p));
  }
}

const form =
  typeof document === "undefined" ? null : document.querySelector('[data-experiment="roofline-explorer"]');
if (form) {
  form.addEventListener("input", () => update(form));
  update(form);
}
