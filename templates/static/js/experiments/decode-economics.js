// Decode economics: the time of one decode step is bounded below by the bytes
// it must read (all weights once, plus every sequence's KV cache) over the
// memory bandwidth. Tokens per second = batch / step time.
const form = document.querySelector('[data-experiment="decode-economics"]');

function value(name, fallback) {
  const input = form.querySelector(`[data-input="${name}"]`);
  const v = input ? Number(input.value) : NaN;
  return Number.isFinite(v) ? v : fallback;
}

export function decodeBound(p) {
  const weightBytes = p.paramsB * 1e9 * p.weightBytes;
  const kvBytes = p.batch * p.kvTokens * p.kvBytesPerToken;
  const bytes = weightBytes + kvBytes;
  const seconds = bytes / (p.bandwidthTBps * 1e12);
  return { bytes, seconds, tokensPerSecond: p.batch / seconds };
}

function update() {
  const r = decodeBound({
    batch: value("batch", 1),
    paramsB: value("params", 8),
    weightBytes: value("weight-bytes", 2),
    kvTokens: value("kv-tokens", 4096),
    kvBytesPerToken: value("kv-bytes-per-token", 131072),
    bandwidthTBps: value("bandwidth", 4),
  });
  const out = form.querySelector("[data-output]");
  out.textContent = `Bytes per step: ${(r.bytes / 1e9).toFixed(2)} GB · step time ≥ ${(r.seconds * 1e3).toFixed(3)} ms · ≤ ${r.tokensPerSecond.toFixed(0)} tokens/s`;
}

if (form) {
  form.addEventListener("input", update);
  update();
}
