"""`curriculum trace`: a decode step on a timeline, eager and as a CUDA graph.

A small decoder built from plain PyTorch ops (random weights, nothing
downloaded) runs one decode step per call. On a CUDA GPU this command:

- times one step, eager and replayed as a captured `torch.cuda.CUDAGraph`, at
  each batch of `BATCHES` (CUDA events around each step, after warm-up, the
  median of many through `bench.timing.time_call`; the L2 is not flushed:
  the weights are many times the L2, and decode steps run back to back);
- profiles one eager step and one graph replay at each batch with
  `torch.profiler` (CUDA activities) and counts what reached the GPU
  (kernels, copies, fills) and how many host calls enqueued it;
- keeps the per-kernel records (name, stream, start, duration, and the start
  of the host call that launched it) of the steps the charts draw, and of
  short segments that each show one classic idle-gap pattern: a `.item()`
  sync inside the step, a copy from pageable host memory, CPU work between
  steps, with and without a `.item()` that makes the host wait for each step;
  the fourth, many tiny kernels, is the eager step itself.

Everything goes to one JSON file (`decode_step.json`) with provenance (GPU,
driver, torch and CUDA versions, date, git revision). Times in the records
are microseconds from the start of the segment, rounded to nanoseconds.

Without PyTorch or a CUDA GPU the command says why in one line and exits 2.
The parsing of a profiler trace and the summaries of a segment are plain
functions of the data, tested without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BATCHES = (1, 8, 32, 64)
TRACE_FILE = "decode_step.json"
FORMAT = 1
SEED = 20261203
MARK = "step"  # record_function label of one decode step
GPU_CATS = {"kernel": "k", "gpu_memcpy": "m", "gpu_memset": "s"}
HOST_CATS = ("cuda_runtime", "cuda_driver")


@dataclass(frozen=True)
class Config:
    """The decoder's shape: a small Llama-like model, one token per sequence a step."""

    layers: int = 8
    hidden: int = 2048
    q_heads: int = 16
    kv_heads: int = 4
    head_dim: int = 128
    mlp: int = 5632
    vocab: int = 32000
    context: int = 512  # KV-cache length each sequence attends over
    dtype: str = "bfloat16"

    def weight_bytes(self) -> int:
        h, d = self.hidden, self.head_dim
        qkv = h * (self.q_heads + 2 * self.kv_heads) * d
        per_layer = qkv + h * h + 3 * h * self.mlp + 2 * h
        return 2 * (self.layers * per_layer + self.vocab * h + h)


# --- parsing a profiler trace (no GPU needed) ----------------------------------------------


def _host_kept(name: str) -> bool:
    """Host calls worth drawing: whatever enqueues GPU work, and whatever waits for it."""
    return any(w in name for w in ("Launch", "Memcpy", "Memset", "Synchronize"))


def parse_chrome_trace(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """GPU activities, host CUDA calls and step marks of a Chrome trace from torch.profiler.

    Returns {"gpu": [(name, kind, stream, start, dur, launch_start)], "host": [(name, start,
    dur)], "marks": [(name, start, dur)]}, in microseconds on the trace's clock, sorted by
    start. `launch_start` is the start of the host call with the same correlation id (None
    when the trace has none), so `start - launch_start` is the launch-to-start delay.
    """
    gpu: list[tuple[str, str, int, float, float, int | None]] = []
    host: list[tuple[str, float, float]] = []
    host_by_corr: dict[int, float] = {}
    marks: list[tuple[str, float, float]] = []
    for e in events:
        if e.get("ph") != "X":
            continue
        cat, name = e.get("cat", ""), str(e.get("name", ""))
        args = e.get("args") or {}
        ts, dur = float(e.get("ts", 0.0)), float(e.get("dur", 0.0))
        if cat in GPU_CATS:
            gpu.append((name, GPU_CATS[cat], int(args.get("stream", 0)), ts, dur,
                        args.get("correlation")))
        elif cat in HOST_CATS:
            corr = args.get("correlation")
            if corr is not None:
                host_by_corr[int(corr)] = ts
            if _host_kept(name):
                host.append((name, ts, dur))
        elif cat == "user_annotation" and name.startswith(MARK):
            marks.append((name, ts, dur))
    records = [(n, k, s, ts, d, host_by_corr.get(int(c)) if c is not None else None)
               for n, k, s, ts, d, c in gpu]
    return {
        "gpu": sorted(records, key=lambda r: (r[3], r[2])),
        "host": sorted(host, key=lambda r: r[1]),
        "marks": sorted(marks, key=lambda r: r[1]),
    }


def compact(parsed: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """Records relative to the segment's start (the first mark, else the first event), names
    as indices into `names` (extended in place), times rounded to nanoseconds."""
    starts = [m[1] for m in parsed["marks"]] or [r[3] for r in parsed["gpu"]] + [
        h[1] for h in parsed["host"]]
    t0 = min(starts) if starts else 0.0

    def idx(name: str) -> int:
        short = short_name(name)
        if short not in names:
            names.append(short)
        return names.index(short)

    def t(x: float) -> float:
        return round(x - t0, 3)

    return {
        "gpu": [[idx(n), k, s, t(ts), round(d, 3), None if ls is None else t(ls)]
                for n, k, s, ts, d, ls in parsed["gpu"]],
        "host": [[idx(n), t(ts), round(d, 3)] for n, ts, d in parsed["host"]],
        "marks": [[n, t(ts), round(d, 3)] for n, ts, d in parsed["marks"]],
    }


def short_name(name: str, limit: int = 80) -> str:
    """A kernel name without its return type and argument list, at most `limit` characters."""
    s = name.strip()
    if s.startswith("void "):
        s = s[5:]
    depth = 0
    for i, ch in enumerate(s):  # cut at the argument list, outside template brackets
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0 and i > 0 and s[i - 1] != " ":
            s = s[:i]
            break
    return s if len(s) <= limit else s[: limit - 1] + "…"


# --- summaries of a segment (used by the charts and the tables) ----------------------------


@dataclass(frozen=True)
class Summary:
    """What a segment's GPU rows say, in microseconds."""

    ops: int  # GPU activities: kernels, copies, fills
    kernels: int
    span_us: float  # first start to last end
    busy_us: float  # union of the activities' intervals
    idle_us: float  # span - busy
    gaps: int  # idle intervals longer than `gap_us`
    largest_gap_us: float
    median_kernel_us: float
    median_launch_delay_us: float | None  # start - host launch call, median over activities

    @property
    def busy_pct(self) -> float:
        return 100.0 * self.busy_us / self.span_us if self.span_us > 0 else 0.0


def idle_intervals(gpu: Sequence[Sequence[Any]], t_from: float | None = None,
                   t_to: float | None = None) -> list[tuple[float, float]]:
    """(start, end) of each interval with no GPU activity on any stream, between the first
    start and the last end (or `t_from`/`t_to`)."""
    spans = sorted((float(r[3]), float(r[3]) + float(r[4])) for r in gpu)
    if not spans:
        return []
    lo = spans[0][0] if t_from is None else t_from
    hi = max(e for _, e in spans) if t_to is None else t_to
    gaps: list[tuple[float, float]] = []
    cursor = lo
    for s, e in spans:
        if s > cursor:
            gaps.append((cursor, min(s, hi)))
        cursor = max(cursor, e)
        if cursor >= hi:
            break
    if cursor < hi:
        gaps.append((cursor, hi))
    return [(a, b) for a, b in gaps if b > a]


def _median(values: Sequence[float]) -> float:
    from curriculum.bench.timing import median

    return median(values)


def summarize(gpu: Sequence[Sequence[Any]], gap_us: float = 1.0) -> Summary:
    if not gpu:
        return Summary(0, 0, 0.0, 0.0, 0.0, 0, 0.0, 0.0, None)
    start = min(float(r[3]) for r in gpu)
    end = max(float(r[3]) + float(r[4]) for r in gpu)
    gaps = idle_intervals(gpu)
    idle = sum(b - a for a, b in gaps)
    span = end - start
    delays = [float(r[3]) - float(r[5]) for r in gpu if r[5] is not None]
    return Summary(
        ops=len(gpu),
        kernels=sum(1 for r in gpu if r[1] == "k"),
        span_us=round(span, 3),
        busy_us=round(span - idle, 3),
        idle_us=round(idle, 3),
        gaps=sum(1 for a, b in gaps if b - a > gap_us),
        largest_gap_us=round(max((b - a for a, b in gaps), default=0.0), 3),
        median_kernel_us=round(_median([float(r[4]) for r in gpu if r[1] == "k"] or [0.0]), 3),
        median_launch_delay_us=round(_median(delays), 3) if delays else None,
    )


def enqueue_calls(host: Sequence[Sequence[Any]], names: Sequence[str]) -> int:
    """Host calls that put work on the GPU (kernel or graph launches, copies, fills)."""
    return sum(1 for r in host if any(w in names[r[0]] for w in ("Launch", "Memcpy", "Memset")))


# --- the GPU part ----------------------------------------------------------------------------


class _EventTimer:
    """`bench.timing.Timer` with torch's CUDA events; nothing is flushed (see the module doc)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.a = torch.cuda.Event(enable_timing=True)
        self.b = torch.cuda.Event(enable_timing=True)

    def flush_l2(self) -> None:
        return None

    def elapsed_ms(self, fn: Callable[[], None], flush: bool = True) -> float:
        self.a.record()
        fn()
        self.b.record()
        self.b.synchronize()
        return float(self.a.elapsed_time(self.b))


class Decoder:
    """Random-weight decoder; `step(batch)` runs one decode step for every sequence of the
    batch and writes the next token ids back into the batch's input buffer."""

    def __init__(self, torch: Any, cfg: Config) -> None:
        self.torch, self.cfg = torch, cfg
        dev, bf = "cuda", torch.bfloat16
        gen = torch.Generator(device=dev)
        gen.manual_seed(SEED)

        def w(rows: int, cols: int) -> Any:
            return (torch.randn(rows, cols, generator=gen, device=dev) / rows**0.5).to(bf)

        h, d = cfg.hidden, cfg.head_dim
        self.emb = w(cfg.vocab, h) * (h**0.5)
        self.layers = []
        for _ in range(cfg.layers):
            self.layers.append({
                "n1": torch.ones(h, device=dev, dtype=bf),
                "wqkv": w(h, (cfg.q_heads + 2 * cfg.kv_heads) * d),
                "wo": w(cfg.q_heads * d, h),
                "n2": torch.ones(h, device=dev, dtype=bf),
                "wgu": w(h, 2 * cfg.mlp),
                "wd": w(cfg.mlp, h),
            })
        self.nf = torch.ones(h, device=dev, dtype=bf)
        pos = cfg.context - 1
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2, device=dev, dtype=torch.float32) / d))
        self.cos = torch.cos(pos * inv).to(bf)
        self.sin = torch.sin(pos * inv).to(bf)
        self.pos = pos
        self.state: dict[int, tuple[Any, list[tuple[Any, Any]]]] = {}

    def batch(self, b: int) -> tuple[Any, list[tuple[Any, Any]]]:
        """Token ids [b] and a filled KV cache [b, kv_heads, context, head_dim] per layer."""
        if b not in self.state:
            torch, cfg = self.torch, self.cfg
            gen = torch.Generator(device="cuda")
            gen.manual_seed(SEED + b)
            ids = torch.randint(0, cfg.vocab, (b,), generator=gen, device="cuda")
            shape = (b, cfg.kv_heads, cfg.context, cfg.head_dim)
            caches = [(torch.randn(shape, generator=gen, device="cuda").to(torch.bfloat16),
                       torch.randn(shape, generator=gen, device="cuda").to(torch.bfloat16))
                      for _ in range(cfg.layers)]
            self.state[b] = (ids, caches)
        return self.state[b]

    def rmsnorm(self, x: Any, w: Any) -> Any:
        xf = x.float()
        return (xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w

    def rope(self, x: Any) -> Any:
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return self.torch.cat((x1 * self.cos - x2 * self.sin, x2 * self.cos + x1 * self.sin), -1)

    def step(self, b: int, check: Callable[[Any], None] | None = None) -> None:
        torch, cfg = self.torch, self.cfg
        F = torch.nn.functional
        ids, caches = self.batch(b)
        qd, kd = cfg.q_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        group = cfg.q_heads // cfg.kv_heads
        x = self.emb[ids]
        for layer, (kc, vc) in zip(self.layers, caches, strict=True):
            h = self.rmsnorm(x, layer["n1"])
            q, k, v = (h @ layer["wqkv"]).split([qd, kd, kd], dim=-1)
            q = self.rope(q.view(b, cfg.q_heads, cfg.head_dim))
            k = self.rope(k.view(b, cfg.kv_heads, cfg.head_dim))
            kc[:, :, self.pos] = k
            vc[:, :, self.pos] = v.view(b, cfg.kv_heads, cfg.head_dim)
            # GQA without copying the cache: each KV head's query group as a query length.
            a = F.scaled_dot_product_attention(q.view(b, cfg.kv_heads, group, cfg.head_dim), kc, vc)
            x = x + a.reshape(b, qd) @ layer["wo"]
            gate, up = (self.rmsnorm(x, layer["n2"]) @ layer["wgu"]).chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ layer["wd"]
            if check is not None:
                check(x)
        logits = self.rmsnorm(x, self.nf) @ self.emb.t()
        ids.copy_(logits.argmax(dim=-1))

    def graph(self, b: int) -> Any:
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.step(b)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self.step(b)
        torch.cuda.synchronize()
        return g


def profile_run(torch: Any, body: Callable[[], None]) -> dict[str, Any]:
    """Run `body` under torch.profiler (CPU and CUDA) and parse its Chrome trace."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        body()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        data = json.loads(path.read_text(encoding="utf-8"))
    events = data["traceEvents"] if isinstance(data, dict) else data
    return parse_chrome_trace(events)


def _marked(torch: Any, label: str, fn: Callable[[], None]) -> None:
    with torch.profiler.record_function(f"{MARK}:{label}"):
        fn()


def _host_work(us: float) -> int:
    """Pure-Python work for about `us` microseconds (a stand-in for sampling, detokenizing,
    scheduling the next batch)."""
    end = time.perf_counter() + us * 1e-6
    n = 0
    while time.perf_counter() < end:
        n += len(str(n))
    return n


def _git_rev(root: Path) -> str:
    env = os.environ.get("CURRICULUM_GIT_REV")
    if env:
        return env
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _driver() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True)
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def _stat(stat: Any) -> dict[str, Any]:
    return {"median_us": round(stat.median_ms * 1e3, 2), "p20_us": round(stat.p20_ms * 1e3, 2),
            "p80_us": round(stat.p80_ms * 1e3, 2), "samples": stat.samples}


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run(out: Path, root: Path, log: Callable[[str], None] = _say) -> dict[str, Any]:
    import torch

    from curriculum.bench.timing import TimingPolicy, time_call

    cfg = Config()
    torch.backends.cuda.matmul.allow_tf32 = False
    model = Decoder(torch, cfg)
    timer = _EventTimer(torch)
    policy = TimingPolicy(warmup_ms=100.0, warmup_launches=5, min_samples=50, batch=10,
                          rel_tol=0.005, max_samples=400, time_cap_s=6.0)
    names: list[str] = []
    segments: dict[str, Any] = {}
    steps: dict[str, Any] = {}
    started = time.perf_counter()

    def keep(key: str, title: str, parsed: dict[str, Any], **extra: Any) -> None:
        seg = compact(parsed, names)
        segments[key] = {"title": title, **extra, **seg}
        s = summarize(seg["gpu"])
        log(f"  segment {key}: {s.ops} GPU ops, span {s.span_us:.1f} us, busy {s.busy_pct:.0f}%, "
            f"{enqueue_calls(seg['host'], names)} enqueue calls")

    # Every timing first: once torch.profiler has run in a process, eager launches stay slower.
    graphs = {b: model.graph(b) for b in BATCHES}
    modes: dict[str, Callable[[int], Callable[[], None]]] = {
        "eager": lambda b: lambda: model.step(b), "graph": lambda b: graphs[b].replay}
    for b in BATCHES:
        steps[str(b)] = {}
        for mode, make in modes.items():
            stat = time_call(make(b), timer, policy, flush_l2=False)
            steps[str(b)][mode] = _stat(stat)
            log(f"batch {b:3d} {mode:5s}: median {stat.median_ms * 1e3:9.1f} us "
                f"({stat.samples} samples)")
    for b in BATCHES:
        for mode, make in modes.items():
            fn = make(b)
            fn()
            torch.cuda.synchronize()
            parsed = profile_run(torch, lambda fn=fn, mode=mode: _marked(torch, mode, fn))
            seg = compact(parsed, names)
            s = summarize(seg["gpu"])
            steps[str(b)][mode].update({
                "gpu_ops": s.ops, "kernels": s.kernels,
                "enqueue_calls": enqueue_calls(seg["host"], names),
                "profiled_span_us": s.span_us, "profiled_busy_us": s.busy_us})
            log(f"batch {b:3d} {mode:5s}: {s.ops} GPU ops, "
                f"{steps[str(b)][mode]['enqueue_calls']} enqueue calls")
            if b in (1, 64):
                keep(f"{mode}_b{b}", f"one {mode} decode step, batch {b}", parsed,
                     batch=b, mode=mode)
    again = time_call(modes["eager"](1), timer, policy, flush_l2=False)
    log(f"batch   1 eager after profiling: median {again.median_ms * 1e3:9.1f} us")
    # The idle-gap patterns, each a short segment of its own.
    patterns = {
        "sync_b64": ("a .item() check after every layer, eager, batch 64",
                     lambda: _marked(torch, "sync", lambda: model.step(
                         64, check=lambda x: bool(torch.isfinite(x).all().item())))),
    }
    pageable = torch.empty(64 << 20, dtype=torch.uint8)  # 64 MiB of pageable host memory
    pinned = torch.empty(64 << 20, dtype=torch.uint8).pin_memory()
    target = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    g1 = graphs[1]

    def copies() -> None:
        _marked(torch, "pageable", lambda: (target.copy_(pageable, non_blocking=True),
                                            g1.replay()))
        _marked(torch, "pinned", lambda: (target.copy_(pinned, non_blocking=True), g1.replay()))

    def host_between() -> None:
        for i in range(3):
            _marked(torch, f"graph{i}", g1.replay)
            _host_work(1000.0)

    patterns["copy_b1"] = ("a 64 MiB host-to-device copy before a graph step, pageable then "
                           "pinned, batch 1", copies)
    def sync_between() -> None:
        ids = model.batch(1)[0]
        for i in range(3):
            _marked(torch, f"graph{i}", g1.replay)
            int(ids[0].item())  # the sampled token read on the host: waits for the step
            _host_work(1000.0)

    patterns["host_b1"] = ("graph steps with about 1 ms of Python work between them, batch 1",
                           host_between)
    patterns["sync_b1"] = ("graph steps, each followed by .item() of the sampled token and "
                           "about 1 ms of Python work, batch 1", sync_between)
    for key, (title, body) in patterns.items():
        try:
            body()
            torch.cuda.synchronize()
            keep(key, title, profile_run(torch, body))
        except Exception as exc:  # one pattern failing keeps the others
            log(f"  segment {key} failed: {exc!r}")
            segments[key] = {"title": title, "error": repr(exc)}
    props = torch.cuda.get_device_properties(0)
    data = {
        "format": FORMAT,
        "provenance": {
            "gpu_name": torch.cuda.get_device_name(0),
            "sm_count": props.multi_processor_count,
            "driver": _driver(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "git_rev": _git_rev(root),
            "seconds": round(time.perf_counter() - started, 1),
        },
        "config": {**asdict(Config()), "weight_bytes": cfg.weight_bytes(),
                   "batches": list(BATCHES)},
        "timing": ("CUDA events around one step (eager: the Python calls; graph: one replay); "
                   "warm-up, then the median of repetitions until it settles (bench.timing); "
                   "L2 not flushed"),
        "steps": steps,
        "names": names,
        "segments": segments,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / TRACE_FILE).write_text(json.dumps(data, separators=(",", ":")) + "\n", encoding="utf-8")
    log(f"wrote {out / TRACE_FILE} in {time.perf_counter() - started:.1f} s")
    return data


def main(argv: list[str] | None = None, root: Path | None = None) -> int:
    p = argparse.ArgumentParser(prog="curriculum trace", description=__doc__.split("\n\n")[0])
    configure(p)
    args = p.parse_args(argv)
    return cmd(args, root or Path("."))


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=None,
                   help="folder for decode_step.json (default: kernels/traces/)")


def cmd(args: argparse.Namespace, root: Path) -> int:
    reason = gpu_missing()
    if reason:
        sys.stderr.write(f"trace needs PyTorch and a CUDA GPU: {reason}\n")
        return 2
    run(args.out or root / "kernels" / "traces", root)
    return 0


def gpu_missing() -> str | None:
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False"
    return None


if __name__ == "__main__":
    sys.exit(main())
