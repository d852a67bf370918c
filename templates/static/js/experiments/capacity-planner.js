// Capacity planner: from a model, a GPU and a latency target to the number of sequences one GPU
// decodes at once and the tokens per second it produces. Every quantity is a pure function of
// the inputs below; the page's result line and table both come from `plan`.
//
//   KV bytes per token    = 2 (K and V) x layers x KV heads x head dim x KV bytes
//   cache room            = GPU memory x (1 - reserve) - parameters x weight bytes
//   sequences by memory   = cache room / (KV bytes per token x (prompt + output)), rounded down
//   step bound, batch B   = max(bytes / effective bandwidth, B x FLOPs per token / peak)
//     bytes               = weight bytes + B x KV bytes per token x (prompt + output / 2)
//     FLOPs per token     = 2 x parameters + 4 x layers x (prompt + output / 2) x hidden
//   step with overheads   = layers x overhead per layer + the bound with every sequence's cache
//                           read r times slower, both taken from the traced decoder (below)
//   concurrency at target = the largest B whose step fits the target, and fits in memory
//
// The overheads come from the measured decode step of the site's traced decoder (8 layers,
// plain PyTorch ops, replayed from a CUDA graph): its step at batch 1, less its own bandwidth
// bound, spread over its layers; and how much faster its step grows from batch 1 to 64 than its
// bound does. TRACED states that decoder's shape; a test checks it against the trace file.
import { finite, readInputs, show } from "./inputs.js";

export const TRACED = { layers: 8, weightBytes: 852561920, kvBytesPerSequence: 2 * 8 * 4 * 128 * 2 * 512, big: 64 };

export function kvBytesPerToken(p) {
  return 2 * p.layers * p.kvHeads * p.headDim * p.kvBytes;
}

export function effectiveBandwidth(p) {
  return p.bandwidthTBps * 1e12 * (p.efficiencyPct / 100); // bytes a second
}

export function memory(p) {
  const weightBytes = p.paramsB * 1e9 * p.weightBytes;
  const usable = p.memoryGB * 1e9 * (1 - p.reservePct / 100);
  const cacheBytes = usable - weightBytes;
  const sequenceBytes = kvBytesPerToken(p) * (p.prompt + p.output);
  const maxSequences = cacheBytes > 0 ? Math.floor(cacheBytes / sequenceBytes + 1e-9) : 0;
  return { weightBytes, usable, cacheBytes, sequenceBytes, maxSequences };
}

// The traced decoder against its own bandwidth bound: seconds of overhead per layer, and the
// factor by which its per-sequence cost exceeds the bound (never below 0 and 1).
export function calibration(p) {
  const bw = effectiveBandwidth(p);
  const bound = (b) => (TRACED.weightBytes + b * TRACED.kvBytesPerSequence) / bw;
  const one = p.tracedOneUs * 1e-6;
  const big = p.tracedBigUs * 1e-6;
  const overheadPerLayer = Math.max(0, one - bound(1)) / TRACED.layers;
  const perSequenceFactor = Math.max(1, (big - one) / (bound(TRACED.big) - bound(1)));
  return { overheadPerLayer, perSequenceFactor };
}

function averageContext(p) {
  return p.prompt + p.output / 2; // a sequence's cache grows from prompt to prompt + output
}

export function flopsPerToken(p) {
  return 2 * p.paramsB * 1e9 + 4 * p.layers * averageContext(p) * p.hidden;
}

// One decode step at batch b: the bound alone (overheads false) or with the traced overheads.
export function step(p, b, overheads) {
  const c = overheads ? calibration(p) : { overheadPerLayer: 0, perSequenceFactor: 1 };
  const weightBytes = p.paramsB * 1e9 * p.weightBytes;
  const cacheBytes = b * kvBytesPerToken(p) * averageContext(p);
  const memorySeconds = (weightBytes + c.perSequenceFactor * cacheBytes) / effectiveBandwidth(p);
  const computeSeconds = (b * flopsPerToken(p)) / (p.peakTflops * 1e12);
  const fixedSeconds = p.layers * c.overheadPerLayer;
  const seconds = fixedSeconds + Math.max(memorySeconds, computeSeconds);
  return { cacheBytes, memorySeconds, computeSeconds, fixedSeconds, seconds,
    tokensPerSecond: b / seconds };
}

// The largest batch whose step meets the target (0 if not even one sequence does).
export function batchAtTarget(p, overheads) {
  const c = overheads ? calibration(p) : { overheadPerLayer: 0, perSequenceFactor: 1 };
  const budget = p.targetMs * 1e-3 - p.layers * c.overheadPerLayer;
  if (budget <= 0) return 0;
  const weightBytes = p.paramsB * 1e9 * p.weightBytes;
  const perSequence = c.perSequenceFactor * kvBytesPerToken(p) * averageContext(p);
  const byBandwidth = (budget * effectiveBandwidth(p) - weightBytes) / perSequence;
  const byCompute = (budget * p.peakTflops * 1e12) / flopsPerToken(p);
  return Math.max(0, Math.floor(Math.min(byBandwidth, byCompute) + 1e-9));
}

function at(p, overheads, mem) {
  const latency = batchAtTarget(p, overheads);
  const batch = Math.min(latency, mem.maxSequences);
  const s = batch > 0 ? step(p, batch, overheads) : null;
  return { latency, batch, binds: latency <= mem.maxSequences ? "latency" : "memory",
    stepSeconds: s ? s.seconds : 0, tokensPerSecond: s ? s.tokensPerSecond : 0 };
}

export function plan(p) {
  const mem = memory(p);
  return { kvBytesPerToken: kvBytesPerToken(p), ...mem, calibration: calibration(p),
    bound: at(p, false, mem), measured: at(p, true, mem) };
}

export const TABLE_BATCHES = [1, 8, 32, 64, 128, 256];

export const INPUTS = ["params", "weight-bytes", "layers", "hidden", "kv-heads", "head-dim", "kv-bytes",
  "memory", "reserve", "prompt", "output", "target", "bandwidth", "efficiency", "peak", "traced-1",
  "traced-64"];

export function params(v) {
  return { paramsB: v.params, weightBytes: v["weight-bytes"], layers: v.layers, hidden: v.hidden,
    kvHeads: v["kv-heads"], headDim: v["head-dim"], kvBytes: v["kv-bytes"], memoryGB: v.memory,
    reservePct: v.reserve, prompt: v.prompt, output: v.output, targetMs: v.target,
    bandwidthTBps: v.bandwidth, efficiencyPct: v.efficiency, peakTflops: v.peak,
    tracedOneUs: v["traced-1"], tracedBigUs: v["traced-64"] };
}

const gb = (x) => (x / 1e9).toFixed(2);
const ms = (s) => (s * 1e3).toFixed(2);

function concurrencyLine(name, r) {
  if (r.batch === 0) return `${name}: no batch meets the target.`;
  return `${name}: ${r.batch} sequences (${r.binds} binds; the target allows ${r.latency}), ` +
    `step ${ms(r.stepSeconds)} ms, ${r.tokensPerSecond.toFixed(0)} tokens/s per GPU.`;
}

export function resultLines(p, r) {
  const head = `KV cache ${(r.kvBytesPerToken / 1024).toFixed(1)} KiB a token, ` +
    `${(r.sequenceBytes / 1e6).toFixed(1)} MB a sequence at ${p.prompt + p.output} tokens.`;
  if (r.cacheBytes <= 0) {
    return [head, `Weights ${gb(r.weightBytes)} GB leave no room for the cache in ${gb(r.usable)} GB.`];
  }
  return [head,
    `Weights ${gb(r.weightBytes)} GB leave ${gb(r.cacheBytes)} GB for the cache: ` +
      `${r.maxSequences} sequences by memory.`,
    concurrencyLine("Bandwidth bound", r.bound),
    concurrencyLine("With the traced decoder's overheads", r.measured)];
}

function table(p, r) {
  const t = document.createElement("table");
  t.className = "precomputed";
  t.dataset.table = "capacity-planner";
  t.createCaption().textContent = "Decode step by batch, the other inputs as entered";
  const head = t.createTHead().insertRow();
  for (const c of ["Batch", "Cache read (GB)", "Step, bound (ms)", "Step, with overheads (ms)",
    "Tokens/s, bound", "Tokens/s, with overheads", "Fits in memory"]) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = c;
    head.append(th);
  }
  const body = t.createTBody();
  const picked = [r.bound.batch, r.measured.batch].filter((b) => b > 0);
  const batches = [...new Set([...TABLE_BATCHES, ...picked])].sort((a, b) => a - b);
  for (const b of batches) {
    const bound = step(p, b, false);
    const over = step(p, b, true);
    const row = body.insertRow();
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = String(b);
    row.append(th);
    for (const cell of [gb(bound.cacheBytes), ms(bound.seconds), ms(over.seconds),
      bound.tokensPerSecond.toFixed(0), over.tokensPerSecond.toFixed(0), b <= r.maxSequences ? "yes" : "no"]) {
      row.insertCell().textContent = cell;
    }
  }
  return t;
}

export function update(form) {
  const out = form.querySelector("[data-output]");
  const box = form.querySelector("[data-figure]");
  const { values, problems } = readInputs(form, INPUTS);
  if (problems.length) {
    show(out, problems);
    if (box) box.replaceChildren();
    return;
  }
  const p = params(values);
  const r = plan(p);
  const ok = finite(r.kvBytesPerToken, r.cacheBytes, r.maxSequences, r.bound.stepSeconds,
    r.bound.tokensPerSecond, r.measured.stepSeconds, r.measured.tokensPerSecond,
    r.calibration.overheadPerLayer, r.calibration.perSequenceFactor);
  show(out, [], ok ? resultLines(p, r).join("\n") : null);
  if (box) box.replaceChildren(...(ok && r.cacheBytes > 0 ? [table(p, r)] : []));
}

const form =
  typeof document === "undefined" ? null : document.querySelector('[data-experiment="capacity-planner"]');
if (form) {
  form.addEventListener("input", () => update(form));
  update(form);
}
