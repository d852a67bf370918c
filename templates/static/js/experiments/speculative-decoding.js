// Speculative decoding: tokens per second from the acceptance rate, the number of drafts, the
// draft model's cost a token and the target step's cost, with the target's attention taken from
// kernels measured on this site's H200: the decode at k = 1 new token, the verify kernel at
// k = 2, 4 and 8.
//
// A step with d drafts runs the draft model d times, then the target once on d + 1 new tokens
// (the last accepted token and the d drafts). Each draft is accepted with probability alpha,
// independently, until the first rejection; the target's own token comes with every step, so
//   expected tokens a step = 1 + alpha + ... + alpha^d = (1 - alpha^(d + 1)) / (1 - alpha)
//   step ms = d x draft ms + target ms + layers x attention us (k = d + 1) / 1000
// The attention time at k new tokens is read off the measured points (k = 1, 2, 4, 8), straight
// lines between them. Without drafts a step is one token at k = 1.
import { finite, readInputs, show } from "./inputs.js";

export const MEASURED_K = [1, 2, 4, 8];
export const MAX_DRAFTS = 7; // d + 1 new tokens must stay within the measured k = 8

export function expectedTokens(alpha, drafts) {
  if (alpha >= 1) return drafts + 1;
  return (1 - alpha ** (drafts + 1)) / (1 - alpha);
}

// Attention of one layer at k new tokens, in µs: the measured points joined by straight lines.
export function attentionUs(p, k) {
  const ks = MEASURED_K;
  if (k <= ks[0]) return p.verifyUs[0];
  for (let i = 1; i < ks.length; i++) {
    if (k <= ks[i]) {
      const f = (k - ks[i - 1]) / (ks[i] - ks[i - 1]);
      return p.verifyUs[i - 1] + f * (p.verifyUs[i] - p.verifyUs[i - 1]);
    }
  }
  return p.verifyUs[ks.length - 1];
}

// One step with `drafts` drafts (0: plain decoding), its parts in ms and what it yields.
export function step(p, drafts) {
  const draftMs = drafts * p.draftMs;
  const attentionMs = (p.layers * attentionUs(p, drafts + 1)) / 1000;
  const ms = draftMs + p.targetMs + attentionMs;
  const tokens = drafts === 0 ? 1 : expectedTokens(p.alpha, drafts);
  return { drafts, draftMs, attentionMs, ms, tokens, tokensPerSecond: (tokens * 1000) / ms };
}

export function speculate(p) {
  const plain = step(p, 0);
  const chosen = step(p, p.drafts);
  let best = step(p, 1);
  for (let d = 2; d <= MAX_DRAFTS; d++) {
    const s = step(p, d);
    if (s.tokensPerSecond > best.tokensPerSecond) best = s;
  }
  return { plain, chosen, best, speedup: chosen.tokensPerSecond / plain.tokensPerSecond };
}

export const INPUTS = ["alpha", "drafts", "draft-ms", "target-ms", "layers", "verify-1", "verify-2",
  "verify-4", "verify-8"];

export function params(v) {
  return { alpha: v.alpha, drafts: Math.round(v.drafts), draftMs: v["draft-ms"], targetMs: v["target-ms"],
    layers: Math.round(v.layers), verifyUs: [v["verify-1"], v["verify-2"], v["verify-4"], v["verify-8"]] };
}

const f1 = (x) => x.toFixed(1);
const f2 = (x) => x.toFixed(2);

export function resultLines(p, r) {
  const c = r.chosen;
  return [
    `${c.drafts} drafts a step: ${f2(c.tokens)} tokens expected (at most ${c.drafts + 1}); ` +
      `step ${f2(c.ms)} ms (drafts ${f2(c.draftMs)}, target ${f2(p.targetMs)}, attention ${f2(c.attentionMs)}).`,
    `${c.tokensPerSecond.toFixed(0)} tokens/s against ${r.plain.tokensPerSecond.toFixed(0)} without drafts: ` +
      `${f2(r.speedup)}x.`,
    `Best for these inputs: ${r.best.drafts} drafts, ${r.best.tokensPerSecond.toFixed(0)} tokens/s.`,
  ];
}

function table(p) {
  const t = document.createElement("table");
  t.className = "precomputed";
  t.dataset.table = "speculative-decoding";
  t.createCaption().textContent = "Each number of drafts, the other inputs as entered";
  const head = t.createTHead().insertRow();
  for (const c of ["Drafts", "New tokens k", "Tokens a step", "Attention a layer (µs)", "Step (ms)",
    "Tokens/s"]) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = c;
    head.append(th);
  }
  const body = t.createTBody();
  for (let d = 0; d <= MAX_DRAFTS; d++) {
    const s = step(p, d);
    const row = body.insertRow();
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = String(d);
    row.append(th);
    for (const cell of [String(d + 1), f2(s.tokens), f1(attentionUs(p, d + 1)), f2(s.ms),
      s.tokensPerSecond.toFixed(0)]) {
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
  const r = speculate(p);
  const ok = finite(r.plain.tokensPerSecond, r.chosen.tokensPerSecond, r.best.tokensPerSecond, r.speedup,
    r.chosen.ms, r.chosen.tokens);
  show(out, [], ok ? resultLines(p, r).join("\n") : null);
  if (box) box.replaceChildren(...(ok ? [table(p)] : []));
}

const form =
  typeof document === "undefined" ? null : document.querySelector('[data-experiment="speculative-decoding"]');
if (form) {
  form.addEventListener("input", () => update(form));
  update(form);
}
