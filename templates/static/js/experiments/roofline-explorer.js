// Roofline explorer: a kernel of F FLOPs that must move Q bytes, on a card with compute roof pi
// and memory roof beta.
//   intensity I = F / Q                      (FLOP per byte)
//   ridge I* = pi / beta                     (left of it the kernel is memory-bound)
//   attainable rate = min(pi, I * beta)
//   time >= max(F / pi, Q / beta)
// The build computes the same numbers in Python for the page's no-JavaScript table.

const SVG = "http://www.w3.org/2000/svg";

export function rooflinePoint(p) {
  const intensity = p.gflop / p.gbytes;
  const ridge = p.peakTflops / p.tbps;
  const attainable = Math.min(p.peakTflops, intensity * p.tbps);
  const seconds = Math.max((p.gflop * 1e9) / (p.peakTflops * 1e12), (p.gbytes * 1e9) / (p.tbps * 1e12));
  return { intensity, ridge, attainable, seconds, bound: intensity < ridge ? "memory" : "compute" };
}

function read(form, name) {
  const input = form.querySelector(`[data-input="${name}"]`);
  return input ? Number(input.value) : NaN;
}

function el(name, attrs, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

// A log-log plot: intensity 0.01..10^4 FLOP/B across, rate across four decades below the roof.
function draw(box, p, r) {
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
  box.replaceChildren(svg);
}

function update(form) {
  const p = {
    gflop: read(form, "gflop"),
    gbytes: read(form, "gbytes"),
    peakTflops: read(form, "peak"),
    tbps: read(form, "bandwidth"),
  };
  const out = form.querySelector("[data-output]");
  const box = form.querySelector("[data-figure]");
  if (!Object.values(p).every((v) => Number.isFinite(v) && v > 0)) {
    out.textContent = "Enter a positive number in every field.";
    if (box) box.replaceChildren();
    return;
  }
  const r = rooflinePoint(p);
  out.textContent =
    `Intensity ${r.intensity.toFixed(2)} FLOP/byte against a ridge of ${r.ridge.toFixed(2)}: ${r.bound}-bound. ` +
    `Attainable ${r.attainable.toFixed(2)} TFLOP/s; time ≥ ${(r.seconds * 1e6).toFixed(1)} µs.`;
  if (box) draw(box, p, r);
}

const form = document.querySelector('[data-experiment="roofline-explorer"]');
if (form) {
  form.addEventListener("input", () => update(form));
  update(form);
}
