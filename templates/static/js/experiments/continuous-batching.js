// Continuous batching: a decode-only scheduler simulation. Requests arrive at random (Poisson),
// each wants a random number of output tokens; every decode step generates one token for each
// sequence in the batch and costs bytes over bandwidth:
//   step seconds = (weight bytes + batch x cache bytes per sequence) / bandwidth
// Static batching starts a batch only when the previous one has finished and runs it until its
// longest sequence is done; continuous batching refills free slots at every step.
import { finite, readInputs, show } from "./inputs.js";

// A small deterministic generator (mulberry32), so the same inputs give the same result.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function makeRequests(p) {
  const next = rng(p.seed);
  const out = [];
  let t = 0;
  for (let i = 0; i < p.requests; i++) {
    t += -Math.log(1 - next()) / p.rate; // exponential gaps: Poisson arrivals
    const tokens = 1 + Math.floor(next() * (2 * p.meanTokens - 1)); // uniform, mean meanTokens
    out.push({ arrival: t, tokens });
  }
  return out;
}

export function stepSeconds(p, batch) {
  return (p.weightGB * 1e9 + batch * p.cacheMB * 1e6) / (p.bandwidthTBps * 1e12);
}

function percentile(sorted, q) {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

// The 95th percentile of the gap between a sequence's tokens: each step contributes its
// duration once per sequence it served.
function weightedP95(steps) {
  const sorted = [...steps].sort((a, b) => a.dt - b.dt);
  const total = sorted.reduce((n, s) => n + s.n, 0);
  let seen = 0;
  for (const s of sorted) {
    seen += s.n;
    if (seen >= 0.95 * total) return s.dt;
  }
  return NaN;
}

function summarise(done, steps, clock, tokens) {
  const lat = done.map((r) => r.finish - r.arrival).sort((a, b) => a - b);
  return {
    tokensPerSecond: tokens / clock,
    p50Request: percentile(lat, 0.5),
    p95Request: percentile(lat, 0.95),
    p95Gap: weightedP95(steps),
  };
}

// continuous = true: admit waiting requests into free slots before every step.
export function simulate(p, continuous) {
  const reqs = makeRequests(p);
  let clock = 0;
  let i = 0;
  let tokens = 0;
  const active = [];
  const done = [];
  const steps = [];
  while (done.length < reqs.length) {
    const mayAdmit = continuous || active.length === 0;
    if (mayAdmit) {
      while (i < reqs.length && reqs[i].arrival <= clock && active.length < p.maxBatch) {
        active.push({ ...reqs[i], left: reqs[i].tokens });
        i++;
      }
    }
    if (active.length === 0) {
      clock = reqs[i].arrival; // idle until the next arrival
      continue;
    }
    const dt = stepSeconds(p, active.length);
    clock += dt;
    tokens += active.length;
    steps.push({ dt, n: active.length });
    for (const r of active) r.left -= 1;
    for (let k = active.length - 1; k >= 0; k--) {
      if (active[k].left === 0) {
        active[k].finish = clock;
        done.push(active[k]);
        active.splice(k, 1);
      }
    }
  }
  return summarise(done, steps, clock, tokens);
}

export const INPUTS = ["rate", "max-batch", "mean-tokens", "weight-gb", "cache-mb", "bandwidth", "requests", "seed"];

function read(form) {
  const { values, problems } = readInputs(form, INPUTS);
  if (!problems.length && values.requests * values["mean-tokens"] > 2e6) {
    problems.push("requests × mean tokens must stay under 2,000,000 (the simulation runs in your browser)");
  }
  return { problems, p: {
    rate: values.rate, maxBatch: Math.floor(values["max-batch"]), meanTokens: values["mean-tokens"],
    weightGB: values["weight-gb"], cacheMB: values["cache-mb"], bandwidthTBps: values.bandwidth,
    requests: Math.floor(values.requests), seed: Math.floor(values.seed),
  } };
}

function line(name, r) {
  const ms = (s) => (s * 1e3).toFixed(1);
  return `${name}: ${r.tokensPerSecond.toFixed(0)} tokens/s; request time p50 ${r.p50Request.toFixed(2)} s, ` +
    `p95 ${r.p95Request.toFixed(2)} s; gap between a sequence's tokens p95 ${ms(r.p95Gap)} ms.`;
}

export function update(form) {
  const out = form.querySelector("[data-output]");
  const { problems, p } = read(form);
  if (problems.length) {
    show(out, problems);
    return;
  }
  const stat = simulate(p, false);
  const cont = simulate(p, true);
  const ok = [stat, cont].every((r) => finite(r.tokensPerSecond, r.p50Request, r.p95Request, r.p95Gap));
  show(out, [], ok ? `${line("Static batching", stat)}\n${line("Continuous batching", cont)}` : null);
}

const form =
  typeof document === "undefined" ? null : document.querySelector('[data-experiment="continuous-batching"]');
if (form) {
  form.addEventListener("input", () => update(form));
  update(form);
}
