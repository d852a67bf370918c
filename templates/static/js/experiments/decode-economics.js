// Decode economics: one decode step reads every weight once (shared by the
// batch) and each sequence's whole KV cache (shared by nothing), so its time is
// bounded below by those bytes over the memory bandwidth.
//   KV bytes per token = 2 (K and V) x layers x KV heads x head dim x bytes
//   step time >= (params x weight bytes + batch x context x KV bytes per token) / bandwidth
//   tokens per second = batch / step time

export function decodeBound(p) {
  const kvBytesPerToken = 2 * p.layers * p.kvHeads * p.headDim * p.kvBytes;
  const weightBytes = p.paramsB * 1e9 * p.weightBytes;
  const kvBytes = p.batch * p.kvTokens * kvBytesPerToken;
  const bytes = weightBytes + kvBytes;
  const seconds = bytes / (p.bandwidthTBps * 1e12);
  return { kvBytesPerToken, weightBytes, kvBytes, bytes, seconds, tokensPerSecond: p.batch / seconds };
}

function read(form, name) {
  const input = form.querySelector(`[data-input="${name}"]`);
  return input ? Number(input.value) : NaN;
}

function update(form) {
  const r = decodeBound({
    batch: read(form, "batch"),
    paramsB: read(form, "params"),
    weightBytes: read(form, "weight-bytes"),
    kvTokens: read(form, "kv-tokens"),
    kvBytes: read(form, "kv-bytes"),
    layers: read(form, "layers"),
    kvHeads: read(form, "kv-heads"),
    headDim: read(form, "head-dim"),
    bandwidthTBps: read(form, "bandwidth"),
  });
  const out = form.querySelector("[data-output]");
  if (!Number.isFinite(r.seconds) || r.seconds <= 0) {
    out.textContent = "Enter a positive number in every field.";
    return;
  }
  const gb = (x) => (x / 1e9).toFixed(2);
  out.textContent =
    `Weights ${gb(r.weightBytes)} GB + KV cache ${gb(r.kvBytes)} GB per step; ` +
    `step time ≥ ${(r.seconds * 1e3).toFixed(2)} ms; ≤ ${r.tokensPerSecond.toFixed(0)} tokens/s ` +
    `(${(r.tokensPerSecond / r.batch).toFixed(1)} per sequence).`;
}

const form = document.querySelector('[data-experiment="decode-economics"]');
if (form) {
  form.addEventListener("input", () => update(form));
  update(form);
}
