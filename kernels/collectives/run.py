"""Measure NCCL collectives and one tensor-parallel decode layer on every GPU of this host.

    python3 kernels/collectives/run.py [--out FILE] [--world N] [--max-bytes B] [--reps R]

One process per GPU (torch.multiprocessing spawn), NCCL through torch.distributed, NVLink
multicast (NVLS) off: `NCCL_NVLS_ENABLE=0` is set before any rank starts, whatever the caller's
environment says, and recorded with the results. With one GPU it runs as a smoke test (the
collectives then move nothing between GPUs and their bus bandwidth is 0).

What it measures, in this order:

1. all-reduce, all-gather and reduce-scatter of BF16 buffers at every power of two from 1 KiB
   to 1 GiB. Each is first checked (rank r contributes r + 1; a sum must be n(n+1)/2, a gathered
   chunk i must be i + 1), then timed: warm-up, then a fixed number of samples, each a run of
   back-to-back calls between two CUDA events (many calls for small messages, so a sample is
   not event overhead). The count is fixed, not adaptive like `curriculum.bench.timing`,
   because every rank must issue the same collectives. A sample's time is the slowest rank's;
   the figure is the median sample, with the 20th and 80th percentiles.
2. one Llama-like decode layer (RMSNorm, QKV projections, decode attention over a KV cache
   with SDPA, output projection, RMSNorm, gated MLP) on one GPU, then split n ways (columns of
   the input projections, rows of the output ones, one all-reduce after each half), at a few
   batch sizes; the split output is checked against the one-GPU output, then both are timed,
   eager and, where capture succeeds, replayed from a CUDA graph.

Results go to one JSON file (default `kernels/collectives/results/<gpu>-x<n>.json`) with
provenance: GPU, count, driver, torch, CUDA and NCCL versions, NCCL environment, the
`nvidia-smi topo -m` matrix, date and git revision. `model.validate_text` checks it.
Without torch or a GPU it says why in one line and exits 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _load_model():
    """model.py beside this file, under a name no other module on sys.path can shadow."""
    name = "kernels_collectives_model"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "model.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


model = _load_model()

ROOT = HERE.parent.parent
SEED = 20261203
WARMUP = 5


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _timing(samples_us: list[float]) -> dict[str, Any]:
    return {
        "median_us": _percentile(samples_us, 0.5),
        "p20_us": _percentile(samples_us, 0.2),
        "p80_us": _percentile(samples_us, 0.8),
        "samples": len(samples_us),
    }


# --- inside each rank -----------------------------------------------------------------------


def _slowest(torch: Any, dist: Any, samples_ms: list[float], device: Any) -> list[float]:
    """Each sample's time on the slowest rank, in microseconds."""
    t = torch.tensor(samples_ms, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [v * 1000.0 for v in t.tolist()]


def _time(
    torch: Any, dist: Any, fn: Any, calls: int, reps: int, device: Any, inner: int = 1
) -> list[float]:
    """`reps` samples of `calls` back-to-back calls of fn, per call, slowest rank, µs; `inner`
    when each call of fn is itself that many operations (a graph replay)."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    out = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / (calls * inner))
    return _slowest(torch, dist, out, device)


def _capture(torch: Any, fn: Any, calls: int) -> Any | None:
    """`calls` back-to-back calls of fn captured as one CUDA graph (its replay), or None."""
    try:
        g = torch.cuda.CUDAGraph()
        # thread_local: NCCL's watchdog thread keeps querying events while this one captures.
        with torch.cuda.graph(g, capture_error_mode="thread_local"):
            for _ in range(calls):
                fn()
        return g.replay
    except Exception:  # noqa: BLE001  (any failure means: no graph timing for this size)
        return None


def _collective(torch: Any, dist: Any, op: str, nbytes: int, n: int, rank: int, device: Any):
    """(call, check) for one collective on fresh BF16 buffers."""
    n_in, n_out = model.buffer_elems(op, nbytes, n)
    inp = torch.full((n_in,), float(rank + 1), dtype=torch.bfloat16, device=device)
    out = inp if op == "all_reduce" else torch.empty(n_out, dtype=torch.bfloat16, device=device)
    if op == "all_reduce":

        def call() -> None:
            dist.all_reduce(inp)
    elif op == "all_gather":

        def call() -> None:
            dist.all_gather_into_tensor(out, inp)
    else:

        def call() -> None:
            dist.reduce_scatter_tensor(out, inp)

    def check() -> bool:
        inp.fill_(float(rank + 1))
        call()
        if op == "all_gather":
            want = torch.arange(1, n + 1, device=device, dtype=torch.bfloat16).repeat_interleave(
                n_in
            )
            ok = bool(torch.equal(out, want))
        else:
            ok = bool(torch.all(out == float(n * (n + 1) // 2)))
        inp.zero_()  # timed all-reduces sum in place: zeros stay finite
        return ok

    return call, check


def _all_ok(torch: Any, dist: Any, ok: bool, device: Any) -> bool:
    t = torch.tensor([0 if ok else 1], dtype=torch.int32, device=device)
    dist.all_reduce(t)
    return int(t.item()) == 0


def _collectives(
    torch: Any, dist: Any, opts: argparse.Namespace, n: int, rank: int, device: Any
) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows (eager: issued call by call from Python; graph: the same calls replayed from
    a CUDA graph, the GPU's time without the host's), and what was not recorded and why."""
    rows: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    for op in model.OPS:
        for size in model.size_ladder(opts.min_bytes, opts.max_bytes):
            call, check = _collective(torch, dist, op, size, n, rank, device)
            if not _all_ok(torch, dist, check(), device):
                raise RuntimeError(
                    f"{op} at {size} B gave a wrong result on some rank; nothing recorded"
                )
            calls = model.calls_per_sample(size)
            moved = model.message_bytes(op, size, n)
            for mode in ("eager", "graph"):
                if mode == "eager":
                    samples = _time(torch, dist, call, calls, opts.reps, device)
                else:
                    replay = None if opts.no_graph else _capture(torch, call, calls)
                    if not _all_ok(torch, dist, replay is not None, device):
                        why = "--no-graph" if opts.no_graph else "capture failed on some rank"
                        dropped.append({"op": op, "bytes": moved, "mode": mode, "why": why})
                        continue
                    samples = _time(torch, dist, replay, 1, opts.reps, device, inner=calls)
                    del replay
                if min(samples) <= 0:  # one GPU, in place: NCCL may enqueue no work at all
                    why = "a sample below the CUDA events' resolution"
                    dropped.append({"op": op, "bytes": moved, "mode": mode, "why": why})
                    continue
                t = _timing(samples)
                seconds = t["median_us"] * 1e-6
                rows.append(
                    {
                        "op": op,
                        "world": n,
                        "bytes": moved,
                        "mode": mode,
                        "calls_per_sample": calls,
                        "time": t,
                        "algbw_gbps": model.algbw_gbps(moved, seconds),
                        "busbw_gbps": model.busbw_gbps(op, n, moved, seconds),
                    }
                )
            del call, check
            torch.cuda.empty_cache()
    return rows, dropped


def _weights(torch: Any, cfg: model.LayerConfig, device: Any) -> dict[str, Any]:
    """The full layer, the same on every rank (one seed): matrices scaled by 1/sqrt(fan-in),
    the KV cache at the largest batch."""
    g = torch.Generator(device=device)
    g.manual_seed(SEED)
    w = {}
    for name, (a, b) in cfg.weight_shapes().items():
        w[name] = (torch.randn(a, b, generator=g, device=device, dtype=torch.float32) / a**0.5).to(
            torch.bfloat16
        )
    shape = (max(cfg.batches), cfg.kv_heads, cfg.context, cfg.head_dim)
    w["k_cache"] = torch.randn(shape, generator=g, device=device, dtype=torch.bfloat16)
    w["v_cache"] = torch.randn(shape, generator=g, device=device, dtype=torch.bfloat16)
    return w


def _shard(w: dict[str, Any], cfg: model.LayerConfig, n: int, rank: int) -> dict[str, Any]:
    """Rank `rank`'s slices, contiguous: columns of the input projections (whole heads, whole
    MLP channels), rows of the output ones, its KV heads of the cache."""
    out = {}
    for name, (a, b) in model.tp_shapes(cfg, n).items():
        full = w[name]
        if name in model.COLUMN:
            out[name] = full[:, rank * b : (rank + 1) * b].contiguous()
        else:
            out[name] = full[rank * a : (rank + 1) * a, :].contiguous()
    _, kvh = model.tp_heads(cfg, n)
    for c in ("k_cache", "v_cache"):
        out[c] = w[c][:, rank * kvh : (rank + 1) * kvh].contiguous()
    return out


def _layer_fn(torch: Any, dist: Any, cfg: model.LayerConfig, w: dict[str, Any], n: int, x: Any):
    """One decode step of the layer for the batch x (B, hidden): returns (step, output)."""
    import torch.nn.functional as F  # noqa: N812

    qh, kvh = model.tp_heads(cfg, n)
    b, d = x.shape[0], cfg.head_dim
    k_cache, v_cache = w["k_cache"][:b], w["v_cache"][:b]
    out = torch.empty_like(x)

    def rms(t: Any) -> Any:
        return t * torch.rsqrt(t.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(t.dtype)

    def step() -> Any:
        h = rms(x)
        q = (h @ w["wq"]).view(b, qh, 1, d)
        k = (h @ w["wk"]).view(b, kvh, 1, d)
        v = (h @ w["wv"]).view(b, kvh, 1, d)
        k_cache[:, :, -1:].copy_(k)  # the new token's key and value take the last slot
        v_cache[:, :, -1:].copy_(v)
        a = F.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=True)
        o = a.reshape(b, qh * d) @ w["wo"]
        if n > 1:
            dist.all_reduce(o)
        x1 = x + o
        h2 = rms(x1)
        m = (F.silu(h2 @ w["w_gate"]) * (h2 @ w["w_up"])) @ w["w_down"]
        if n > 1:
            dist.all_reduce(m)
        out.copy_(x1 + m)
        return out

    return step, out


def _graph(torch: Any, step: Any) -> Any | None:
    """The step captured as a CUDA graph, or None if capture fails here."""
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        # thread_local: NCCL's watchdog thread keeps querying events while this one captures.
        with torch.cuda.graph(g, capture_error_mode="thread_local"):
            step()
        return g.replay
    except Exception:  # noqa: BLE001  (any failure means: time it eagerly only)
        return None


def _layer(
    torch: Any, dist: Any, opts: argparse.Namespace, n: int, rank: int, device: Any
) -> dict[str, Any]:
    cfg = model.LayerConfig()
    doc: dict[str, Any] = {"config": model.config_dict(cfg), "rows": []}
    if (why := model.tp_check(cfg, n)) is not None:
        doc["skipped"] = why
        return doc
    full = _weights(torch, cfg, device)
    mine = _shard(full, cfg, n, rank)
    if rank != 0:
        del full
        torch.cuda.empty_cache()
    g = torch.Generator(device=device)
    g.manual_seed(SEED + 1)
    tol = 2e-2  # BF16 products summed in another order across ranks
    for batch in cfg.batches:
        x = torch.randn(batch, cfg.hidden, generator=g, device=device, dtype=torch.bfloat16)
        split_step, split_out = _layer_fn(torch, dist, cfg, mine, n, x)
        # One GPU: rank 0 alone, the others wait at the barrier inside _time_alone.
        ref = None
        one: dict[str, list[float]] = {}
        if rank == 0:
            one_step, one_out = _layer_fn(torch, dist, cfg, full, 1, x.clone())
            one_step()
            ref = one_out.float().clone()
            one["eager"] = _time_local(torch, one_step, opts.reps)
            replay = _graph(torch, one_step)
            if replay is not None:
                one["graph"] = _time_local(torch, replay, opts.reps)
        dist.barrier()
        split_step()
        torch.cuda.synchronize()
        err = 0.0
        if rank == 0:
            err = float((split_out.float() - ref).norm() / ref.norm())
        errs = [0.0] * n
        dist.all_gather_object(errs, err)
        if errs[0] > tol:
            raise RuntimeError(
                f"split layer at batch {batch} differs from one GPU: rel err {errs[0]:.2e}"
            )
        modes = {"eager": split_step}
        replay = _graph(torch, split_step)
        captured = [False] * n
        dist.all_gather_object(captured, replay is not None)
        if all(captured):
            modes["graph"] = replay
        have = [None] * n
        dist.all_gather_object(have, sorted(one))
        for mode, fn in modes.items():
            if mode not in have[0]:
                continue
            split = _timing(_time(torch, dist, fn, 10, opts.reps, device))
            alone = [None] * n
            dist.all_gather_object(alone, _timing(one[mode]) if rank == 0 else None)
            doc["rows"].append(
                {
                    "batch": batch,
                    "world": n,
                    "mode": mode,
                    "one_gpu": alone[0],
                    "split": split,
                    "speedup": alone[0]["median_us"] / split["median_us"],
                    "rel_err": errs[0],
                    "tolerance": tol,
                }
            )
        torch.cuda.synchronize()
    return doc


def _time_local(torch: Any, fn: Any, reps: int, calls: int = 10) -> list[float]:
    """Samples on this rank alone (the one-GPU reference), µs per call."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / calls * 1000.0)
    return out


def _worker(rank: int, n: int, opts: argparse.Namespace, port: int, tmp: str) -> None:
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=n,
        timeout=timedelta(seconds=opts.nccl_timeout),
        device_id=device,
    )
    try:
        rows, dropped = _collectives(torch, dist, opts, n, rank, device)
        layer = (
            {"config": {}, "skipped": "--skip-layer", "rows": []}
            if opts.skip_layer
            else _layer(torch, dist, opts, n, rank, device)
        )
        if rank == 0:
            Path(tmp).write_text(
                json.dumps({"collectives": rows, "dropped": dropped, "layer": layer}),
                encoding="utf-8",
            )
        dist.barrier()
    finally:
        dist.destroy_process_group()


# --- the parent -----------------------------------------------------------------------------


def _sh(*cmd: str) -> str:
    try:
        return subprocess.run(
            cmd, capture_output=True, text=True, timeout=30, check=False
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _provenance(torch: Any, n: int, seconds: float) -> dict[str, Any]:
    version = torch.cuda.nccl.version() if hasattr(torch.cuda, "nccl") else ""
    nccl = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
    rev = _sh("git", "-C", str(ROOT), "rev-parse", "HEAD") or "unknown"
    dirty = bool(_sh("git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"))
    driver = _sh("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader").splitlines()
    return {
        "gpu_name": torch.cuda.get_device_name(0),
        "gpu_count": torch.cuda.device_count(),
        "world": n,
        "driver": driver[0] if driver else "unknown",
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "unknown",
        "nccl": nccl or "unknown",
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_rev": rev,
        "git_dirty": dirty,
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
        "topology": _sh("nvidia-smi", "topo", "-m"),
        "seconds": round(seconds, 1),
    }


TIMING = (
    "Collectives eager (issued from Python call by call) and replayed from a CUDA graph of the "
    "same calls; CUDA events around a run of back-to-back calls (64 up to 2 KiB, halving as the size "
    "doubles, one from 128 KiB; 10 for the layer), per call; 5 warm-up runs, then a fixed "
    "number of samples on every rank; a sample is the slowest rank's; median with 20th and "
    "80th percentiles; L2 not flushed; BF16 buffers"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out",
        type=Path,
        help="results file (default kernels/collectives/results/<gpu>-x<n>.json)",
    )
    ap.add_argument("--world", type=int, help="ranks, one a GPU (default: every visible GPU)")
    ap.add_argument("--min-bytes", type=int, default=model.KIB)
    ap.add_argument("--max-bytes", type=int, default=model.GIB)
    ap.add_argument("--reps", type=int, default=20, help="timed samples per size (default 20)")
    ap.add_argument("--skip-layer", action="store_true", help="collectives only")
    ap.add_argument("--no-graph", action="store_true", help="time collectives eagerly only")
    ap.add_argument(
        "--nccl-timeout", type=int, default=120, help="seconds before a stuck collective fails"
    )
    opts = ap.parse_args(argv)
    try:
        model.size_ladder(opts.min_bytes, opts.max_bytes)
    except ValueError as exc:
        print(f"collectives: {exc}", file=sys.stderr)
        return 2
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast stays off, whatever was set
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError:
        print("collectives: PyTorch is not installed here; nothing measured", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("collectives: no CUDA GPU visible; nothing measured", file=sys.stderr)
        return 2
    n = opts.world or torch.cuda.device_count()
    if not 1 <= n <= torch.cuda.device_count():
        print(
            f"collectives: --world {n} but {torch.cuda.device_count()} GPUs visible",
            file=sys.stderr,
        )
        return 2
    kind = model.kind_slug(torch.cuda.get_device_name(0), n)
    out = opts.out or HERE / "results" / f"{kind}.json"
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        tmp = str(Path(d) / "rank0.json")
        mp.spawn(_worker, args=(n, opts, _free_port(), tmp), nprocs=n, join=True)
        measured = json.loads(Path(tmp).read_text(encoding="utf-8"))
    doc = {
        "format": model.FORMAT,
        "kind": kind,
        "provenance": _provenance(torch, n, time.monotonic() - t0),
        "timing": TIMING,
        "dtype": "bfloat16",
        **measured,
    }
    text = json.dumps(doc, indent=1) + "\n"
    model.validate_text(text)  # never write a file the build would refuse
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(f".{out.name}.tmp")
    part.write_text(text, encoding="utf-8")
    os.replace(part, out)
    ar = [r for r in doc["collectives"] if r["op"] == "all_reduce"]
    big = max(ar, key=lambda r: r["bytes"]) if ar else None
    line = f"collectives: {kind}, {len(doc['collectives'])} rows"
    if big:
        line += f"; all-reduce {big['bytes']} B busbw {big['busbw_gbps']:.1f} GB/s"
    for r in doc["layer"]["rows"]:
        line += (
            f"; layer b{r['batch']} {r['mode']} {r['one_gpu']['median_us']:.1f} -> "
            f"{r['split']['median_us']:.1f} us"
        )
    print(f"{line}; wrote {out} in {doc['provenance']['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
