// Decode economics: one decode step reads every weight once (shared by the
// batch) and each sequence's whole KV cache (shared by nothing), so its time is
// bounded below by those bytes over the memory bandwidth.
//   KV bytes per token = 2 (K and V) x layers x KV heads x head dim x bytes
//   step time >= (params x weight bytes + batch x context x KV bytes per token) / bandwidth
//   tokens per second = batch / step time
// This module is the only copy of the model: the page's result line and its table both come
// from `decodeBound`.
import { finite, readInputs, show } from "./inputs.js";

export function decodeBound(p) {
  const kvBytesPerToken = 2 * p.layers * p.kvHeads * p.headDim * p.kvBytes;
  const weightBytes = p.paramsB * 1e9 * p.weightBytes;
  const kvBytes = p.batch * p.kvTokens * kvBytesPerToken;
  const bytes = weightBytes + kvBytes;
  const seconds = bytes / (p.bandwidthTBps * 1e12);
  const tokensPerSecond = p.batch / seconds;
  return { kvBytesPerToken, weightBytes, kvBytes, bytes, seconds, tokensPerSecond,
           perSequence: tokensPerSecond / p.batch };
}

// The batch sizes the table shows, the reader's own batch among them.
export const TABLE_BATCHES = [1, 4, 16, 64, 256];

export const INPUTS = ["batch", "params", "weight-bytes", "kv-tokens", "kv-bytes", "layers",
  "kv-heads", "head-dim", "bandwidth"];

function params(v) {
  return { batch: v.batch, paramsB: v.params, weightBytes: v["weight-bytes"], kvTokens: v["kv-tokens"],
    kvBytes: v["kv-bytes"], layers: v.layers, kvHeads: v["kv-heads"], headDim: v["head-dim"],
    bandwidthTBps: v.bandwidth };
}

const gb = (x) => (x / 1e9).toFixed(2);

export function resultLine(r) {
  return `Weights ${gb(r.weightBytes)} GB + KV cache ${gb(r.kvBytes)} GB per step; ` +
    `step time ≥ ${(r.seconds * 1e3).toFixed(2)} ms; ≤ ${r.tokensPerSecond.toFixed(0)} tokens/s ` +
    `(${r.perSequence.toFixed(1)} per sequence).`;
}

function table(p) {
  const t = document.createElement("table");
  t.className = "precomputed";
  t.dataset.table = "decode-economics";
  const caption = t.createCaption();
  caption.textContent = "Bound at each batch size, the other inputs as entered";
  const head = t.createTHead().insertRow();
  for (const c of ["Batch", "Weights (GB)", "KV cache (GB)", "Step time ≥ (ms)", "Tokens/s ≤", "Per sequence"]) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = c;
    head.append(th);
  }
  const body = t.createTBody();
  const batches = [...new Set([...TABLE_BATCHES, p.batch])].sort((a, b) => a - b);
  for (const batch of batches) {
    const r = decodeBound({ ...p, batch });
    const row = body.insertRow();
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = String(batch);
    row.append(th);
    for (const cell of [gb(r.weightBytes), gb(r.kvBytes), (r.seconds * 1e3).toFixed(2),
      r.tokensPerSecond.toFixed(0), r.perSequence.toFixed(1)]) {
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
  const r = decodeBound(p);
  if (!finite(r.seconds, r.tokensPerSecond, r.perSequence) || r.seconds <= 0) {
    show(out, [], null);
    if (box) box.replaceChildren();
    return;
  }
  show(out, [], resultLine(r));
  if (box) box.replaceChildren(table(p));
}

const form =
  typeof document === "undefined" ? null : document.querySelector('[data-experiment="decode-economics"]');
if (form) {
  form.addEventListener("input", () => update(form));
  update(form);
}
