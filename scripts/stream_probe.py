"""What a pure read stream reaches at the sizes of the decode kernels, and where their time goes.

Run on the GPU machine from the repository root (a scratch measurement, not a bench case):

    python3 scripts/stream_probe.py

Two questions the bench's figures cannot answer by themselves:

1. **The ceiling at this size.** The floors of 02_w4a16 (121 MB) and 04_split_kv (134 MB) divide
   their bytes by a ceiling measured over 2 GiB, where launch, ramp and drain weigh nothing. A
   plain read of the same bytes, in several launch shapes (blocks an SM, threads a block, 16-byte
   loads in flight a thread), says how much of the gap any stream of that size pays.
2. **The timeline.** Each warp (or CTA) of the best plain read, of 02 at batch 1 and of 04 at
   T = 32768 writes %globaltimer and its SM id when it starts and when it ends, into a global
   array added by source rewriting (the kernels are otherwise the installed files). The spread of
   the starts is the ramp (how long the launch takes to fill the chip), the spread of the ends
   the tail. The quickest of five stamped launches is kept whole (each unit's start, end, SM and
   warp slot), so the notes can ask which warps finish last. PROBE_DEALING names variants of
   gemv_w4a16_variants.py (separated by ';') whose CTA-an-SM batch-1 kernel is stamped the same
   way, per warp, up to the moment it finds no item left.

Timing as the bench does it: CUDA events around one launch, the L2 written over and read back
before every launch, median of SAMPLES after warm-up. The read ceiling is the suite's (the better
of cupy.sum and a one-pass float4 sum over 2 GiB); the copy ceiling is a device memcpy over 2 GiB
(bytes = read + write), one of the two copies the attention suite takes the better of, so it can
only come out at or below the suite's. Writes $OUT/stream_probe.json and prints a summary.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import attention_splitkv_variants as splitkv  # noqa: E402
import gemv_w4a16_variants as w4  # noqa: E402

OUT = Path(os.environ.get("OUT", "/tmp"))
SAMPLES = int(os.environ.get("SAMPLES", "40"))
MAX_STAMPS = 1 << 16

STAMP_HELPERS = r"""
__device__ unsigned long long stamps[MAX_STAMPS][2];
__device__ unsigned stamp_sm[MAX_STAMPS];
__device__ __forceinline__ unsigned probe_sm() {
    unsigned s, w;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    asm volatile("mov.u32 %0, %%warpid;" : "=r"(w));
    return s << 8 | w;  // SM id, then the warp's slot on the SM
}
__device__ __forceinline__ unsigned long long probe_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
""".replace("MAX_STAMPS", str(MAX_STAMPS))

STREAM = (
    STAMP_HELPERS
    + r"""
// Every 16-byte vector of src read once (XOR-folded so the loads stay); U loads in flight a thread.
template <int U>
__device__ __forceinline__ void stream(const uint4* __restrict__ src, long long n16, int* sink,
                                       int stamp) {
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (stamp && (threadIdx.x & 31) == 0 && warp < MAX_STAMPS) {
        stamps[warp][0] = probe_now();
        stamp_sm[warp] = probe_sm();
    }
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned acc = 0;
    for (; i + (U - 1) * stride < n16; i += U * stride) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldcs(src + i + u * stride);
#pragma unroll
        for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n16; i += stride) {
        const uint4 v = __ldcs(src + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7fffffffu) *sink = (int)acc;
    if (stamp && (threadIdx.x & 31) == 0 && warp < MAX_STAMPS) stamps[warp][1] = probe_now();
}

extern "C" __global__ void stream1(const uint4* s, long long n, int* k, int st) { stream<1>(s, n, k, st); }
extern "C" __global__ void stream4(const uint4* s, long long n, int* k, int st) { stream<4>(s, n, k, st); }
extern "C" __global__ void stream8(const uint4* s, long long n, int* k, int st) { stream<8>(s, n, k, st); }
""".replace("MAX_STAMPS", str(MAX_STAMPS))
)


def rewrite(source: str, old: str, new: str) -> str:
    if source.count(old) != 1:
        raise SystemExit(f"anchor found {source.count(old)} times: {old[:70]!r}")
    return source.replace(old, new)


def stamped_w4a16(src: str) -> str:
    """02 with each batch-1 warp stamping its start and its end (warps a block x block + warp)."""
    call = "    gemv_w4a16<1>(x, wq, scales, y, k, n);\n"
    first = src.index(call)
    head, tail = src[:first], src[first + len(call) :]
    stamped = (
        "    const int probe_w = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);\n"
        "    if ((threadIdx.x & 31) == 0) { stamps[probe_w][0] = probe_now(); stamp_sm[probe_w] = probe_sm(); }\n"
        + call
        + "    if ((threadIdx.x & 31) == 0) stamps[probe_w][1] = probe_now();\n"
    )
    src = head + stamped + tail
    anchor = "constexpr int WARPS = 2;"
    return rewrite(src, anchor, STAMP_HELPERS + anchor)


def stamped_dealing(name: str) -> str:
    """A CTA-an-SM variant of 02 (gemv_w4a16_variants.py), each warp stamping its start and the
    moment it has no item left (warp = B1_WARPS * block + warp)."""
    src = w4.source_of(w4.DEALING[name])
    counter = "    int& next_item = *reinterpret_cast<int*>(rings + B1_WARPS);\n"
    src = rewrite(
        src,
        counter,
        counter + "    const int probe_w = blockIdx.x * B1_WARPS + (threadIdx.x >> 5);\n"
        "    if ((threadIdx.x & 31) == 0) { stamps[probe_w][0] = probe_now(); "
        "stamp_sm[probe_w] = probe_sm(); }\n",
    )
    src = rewrite(
        src,
        "    wait_copies<0>();\n    __syncthreads();\n    for (int i = threadIdx.x;",
        "    wait_copies<0>();\n"
        "    if ((threadIdx.x & 31) == 0) stamps[probe_w][1] = probe_now();\n"
        "    __syncthreads();\n    for (int i = threadIdx.x;",
    )
    anchor = "constexpr int WARPS = 2;"
    return rewrite(src, anchor, STAMP_HELPERS + anchor)


def stamped_splitkv() -> str:
    """04 with thread 0 of each CTA stamping its start and its end (CTA = linear block index)."""
    src = splitkv.SOURCE_PATH.read_text()
    signature = (
        'extern "C" __global__ void __launch_bounds__(THREADS, 2)\n'
        "split_kv(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,\n"
        "         const unsigned short* __restrict__ v, float* __restrict__ part_m,\n"
        "         float* __restrict__ part_l, float* __restrict__ part_acc, unsigned short* __restrict__ out,\n"
        "         int T, int tokens_per_split, float scale_log2) {\n"
    )
    body = signature.replace(
        'extern "C" __global__ void __launch_bounds__(THREADS, 2)\nsplit_kv(',
        "__device__ __forceinline__ void split_kv_body(",
    )
    src = rewrite(src, signature, body)
    src += (
        'extern "C" __global__ void __launch_bounds__(THREADS, 2)\n'
        "split_kv(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,\n"
        "         const unsigned short* __restrict__ v, float* __restrict__ part_m,\n"
        "         float* __restrict__ part_l, float* __restrict__ part_acc, unsigned short* __restrict__ out,\n"
        "         int T, int tokens_per_split, float scale_log2) {\n"
        "    const int probe_c = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);\n"
        "    if (threadIdx.x == 0) { stamps[probe_c][0] = probe_now(); stamp_sm[probe_c] = probe_sm(); }\n"
        "    split_kv_body(q, k, v, part_m, part_l, part_acc, out, T, tokens_per_split, scale_log2);\n"
        "    if (threadIdx.x == 0) stamps[probe_c][1] = probe_now();\n"
        "}\n"
    )
    anchor = "constexpr int D = 128;"
    return rewrite(src, anchor, STAMP_HELPERS + anchor)


def timeline(cp: Any, module: Any, count: int, launch: Any, timer: Any) -> dict[str, Any]:
    """Launch once after a flush; the starts and ends of `count` stamped units, in µs.

    Each unit's SM stamp holds the SM id above the warp slot (probe_sm). The quickest of five
    launches is kept, with every unit's raw start, end, SM and slot, for the analysis in the notes.
    """
    stamps = cp.ndarray((MAX_STAMPS, 2), cp.uint64, module.get_global("stamps"))
    sms = cp.ndarray((MAX_STAMPS,), cp.uint32, module.get_global("stamp_sm"))
    runs = []
    for _ in range(5):
        stamps.fill(0)
        timer.flush()
        timer.start.record()
        launch()
        timer.end.record()
        timer.end.synchronize()
        event_us = cp.cuda.get_elapsed_time(timer.start, timer.end) * 1e3
        st = cp.asnumpy(stamps[:count]).astype(np.int64)
        raw_sm = cp.asnumpy(sms[:count])
        sm = raw_sm >> 8
        if (st == 0).any():
            raise SystemExit("a unit left no stamp")
        t0 = st[:, 0].min()
        starts, ends = (st[:, 0] - t0) / 1e3, (st[:, 1] - t0) / 1e3
        steps = np.diff(np.unique(st.ravel()))
        pct = (0, 10, 50, 90, 99, 100)
        runs.append(
            {
                "event_us": event_us,
                "span_us": float(ends.max()),
                "timer_step_ns": int(steps[steps > 0].min()) if (steps > 0).any() else -1,
                "start_pct_us": {p: float(np.percentile(starts, p)) for p in pct},
                "end_pct_us": {p: float(np.percentile(ends, p)) for p in pct},
                "duration_pct_us": {p: float(np.percentile(ends - starts, p)) for p in pct},
                # the last unit to start on each SM, then the first SM to have nothing left to run
                "last_start_per_sm_max_us": float(
                    max(starts[sm == s].max() for s in np.unique(sm))
                ),
                "first_sm_done_us": float(min(ends[sm == s].max() for s in np.unique(sm))),
                "sms_used": int(len(np.unique(sm))),
                "raw": {
                    "start_us": starts.round(3).tolist(),
                    "end_us": ends.round(3).tolist(),
                    "sm": sm.tolist(),
                    "slot": (raw_sm & 0xFF).tolist(),
                },
            }
        )
    return min(runs, key=lambda r: r["event_us"])  # the quickest of five, as a typical sample


def main() -> None:  # noqa: PLR0915
    import cupy as cp

    timer = w4.Timer(cp)
    dev = cp.cuda.Device()
    sm_count = dev.attributes["MultiProcessorCount"]
    results: dict[str, Any] = {"sms": sm_count, "samples": SAMPLES}

    read_gbps = w4.read_ceiling(cp, timer)
    cp.get_default_memory_pool().free_all_blocks()
    n = (2 << 30) // 4
    pair = {"src": cp.random.default_rng().random(n, dtype=cp.float32)}
    pair["dst"] = cp.empty_like(pair["src"])
    copy_us = timer.median_us(lambda: cp.copyto(pair["dst"], pair["src"]), 20)[0]
    copy_gbps = 2.0 * (2 << 30) / (copy_us * 1e-6) / 1e9
    pair.clear()
    cp.get_default_memory_pool().free_all_blocks()
    results["read_gbps"], results["copy_gbps_memcpy"] = read_gbps, copy_gbps
    print(f"read ceiling {read_gbps:.0f} GB/s, copy (memcpy) {copy_gbps:.0f} GB/s", flush=True)

    suite = w4.load_suite()
    head = suite.HEADLINE
    sizes = {
        "w4a16 headline": int(suite.bytes_w4a16(head)),
        "split-kv 32K": 2 * 8 * 32768 * 128 * 2 + 2 * 32 * 128 * 2,
        "fp8 headline": int(suite.bytes_fp8(head)),
        "bf16 headline": 2 * 8192 * 28672,
    }
    module = cp.RawModule(code=STREAM, options=("--std=c++17", "-arch=sm_90"), backend="nvrtc")
    sink = cp.zeros(1, dtype=cp.int32)
    shapes = [
        (per_sm, threads, u)
        for per_sm in (1, 2, 4, 8, 16)
        for threads in (256, 512, 1024)
        for u in (1, 4, 8)
        if per_sm * threads <= 2048
    ]
    plain: dict[str, Any] = {}
    for label, nbytes in sizes.items():
        buf = cp.random.default_rng().integers(0, 1 << 30, size=nbytes // 4, dtype=cp.int32)
        n16 = np.int64(nbytes // 16)

        def reader(
            u: int, per_sm: int, threads: int, stamp: int, buf: Any = buf, n16: Any = n16
        ) -> Any:
            fn = module.get_function(f"stream{u}")
            return lambda: fn((per_sm * sm_count,), (threads,), (buf, n16, sink, np.int32(stamp)))

        rows = []
        for per_sm, threads, u in shapes:
            us = timer.median_us(reader(u, per_sm, threads, 0), SAMPLES)[0]
            rows.append(
                {
                    "per_sm": per_sm,
                    "threads": threads,
                    "loads": u,
                    "us": us,
                    "pct_read_floor": 100 * nbytes / (read_gbps * 1e3) / us,
                }
            )
        rows.sort(key=lambda r: r["us"])
        plain[label] = {
            "bytes": nbytes,
            "floor_us": nbytes / (read_gbps * 1e3),
            "best": rows[:5],
            "worst": rows[-1],
        }
        best = rows[0]
        print(
            f"{label:16s} {nbytes / 1e6:7.1f} MB floor {nbytes / (read_gbps * 1e3):7.2f} us; "
            f"best plain read {best['us']:7.2f} us = {best['pct_read_floor']:.1f}% "
            f"({best['per_sm']} x {best['threads']} threads, {best['loads']} loads)",
            flush=True,
        )
        if label == "w4a16 headline":
            count = best["per_sm"] * sm_count * best["threads"] // 32
            launch = reader(best["loads"], best["per_sm"], best["threads"], 1)
            plain[label]["timeline"] = timeline(cp, module, count, launch, timer)
        del buf, reader
        cp.get_default_memory_pool().free_all_blocks()
    results["plain_read"] = plain

    # 02 at the headline, stamped
    rng = cp.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    inputs = suite._inputs_w4a16(head, rng)
    y = cp.empty((1, head["n"]), dtype=cp.uint16)
    ref = suite._reference(suite._weights_w4a16)(inputs, head)["y"]
    args02 = w4.kernel_args(inputs, y, head)
    # the installed file, and PROBE_W4_ALSO (a path to another 02 file, e.g. an earlier one) if set
    files = {"w4a16": w4.Variant(whole=True)}
    if os.environ.get("PROBE_W4_ALSO"):
        files["w4a16 also"] = w4.Variant(path=os.environ["PROBE_W4_ALSO"], whole=True)
    for key, variant in files.items():
        mod02 = cp.RawModule(
            code=stamped_w4a16(w4.source_of(variant)),
            options=("--std=c++17", "-arch=sm_90"),
            backend="nvrtc",
        )
        fn02 = mod02.get_function("w4a16_b1")
        blocks02, threads02, _ = w4.launch_of(variant, head, sm_count)
        y.fill(0xFFFF)
        fn02((blocks02,), (threads02,), args02)
        got = suite.bf16_bits_to_float64(y, cp)
        rel = float(cp.linalg.norm(got - ref) / cp.linalg.norm(ref))

        def run02(fn: Any = fn02, blocks: int = blocks02, threads: int = threads02) -> None:
            fn((blocks,), (threads,), args02)

        us02 = timer.median_us(run02, SAMPLES)[0]
        results[key] = {
            "registers": fn02.num_regs,
            "threads": threads02,
            "rel_err": rel,
            "us": us02,
            "pct_read_floor": 100 * plain["w4a16 headline"]["floor_us"] / us02,
            "timeline": timeline(cp, mod02, blocks02 * threads02 // 32, run02, timer),
        }
        print(f"{key} stamped: {fn02.num_regs} registers, {threads02} threads a block, "
              f"rel_err {rel:.2e}, {us02:.2f} us", flush=True)
    for name in os.environ.get("PROBE_DEALING", "").split(";"):
        if not name:
            continue
        variant = w4.DEALING[name]
        mod = cp.RawModule(
            code=stamped_dealing(name), options=("--std=c++17", "-arch=sm_90"), backend="nvrtc"
        )
        fn = mod.get_function("w4a16_b1")
        blocks, threads, smem = w4.launch_of(variant, head, sm_count)
        fn.max_dynamic_shared_size_bytes = smem
        y.fill(0xFFFF)
        fn((blocks,), (threads,), args02, shared_mem=smem)
        got = suite.bf16_bits_to_float64(y, cp)
        rel = float(cp.linalg.norm(got - ref) / cp.linalg.norm(ref))

        def run_variant(
            fn: Any = fn, blocks: int = blocks, threads: int = threads, smem: int = smem
        ) -> None:
            fn((blocks,), (threads,), args02, shared_mem=smem)

        us = timer.median_us(run_variant, SAMPLES)[0]
        results[f"w4a16 {name}"] = {
            "registers": fn.num_regs,
            "rel_err": rel,
            "us": us,
            "timeline": timeline(cp, mod, blocks * threads // 32, run_variant, timer),
        }
        print(f"{name} stamped: rel_err {rel:.2e}, {us:.2f} us", flush=True)
    del inputs, y, ref
    cp.get_default_memory_pool().free_all_blocks()

    # 04 at T = 32768, stamped
    t = splitkv.HEADLINE
    hq, hkv, d = splitkv.HQ, splitkv.HKV, splitkv.D
    splits, per = splitkv.plan_splits(t, hkv, sm_count, 2)

    def bits(shape: tuple[int, ...]) -> Any:  # bf16 patterns of normal draws (truncated)
        draws = cp.random.default_rng().standard_normal(shape, dtype=cp.float32)
        return (draws.view(cp.uint32) >> 16).astype(cp.uint16)

    q, k, v = bits((1, hq, d)), bits((1, hkv, t, d)), bits((1, hkv, t, d))
    states = hq * splits
    pm, pl = cp.empty(states, cp.float32), cp.empty(states, cp.float32)
    pa = cp.empty(states * d, cp.float32)
    out = cp.empty((1, hq, d), cp.uint16)
    mod04 = cp.RawModule(
        code=stamped_splitkv(), options=("--std=c++17", "-arch=sm_90"), backend="nvrtc"
    )
    fn04 = mod04.get_function("split_kv")
    args04 = (
        q,
        k,
        v,
        pm,
        pl,
        pa,
        out,
        np.int32(t),
        np.int32(per),
        np.float32(splitkv.LOG2E / math.sqrt(d)),
    )
    grid04 = (splits, hkv, 1)
    us04 = timer.median_us(lambda: fn04(grid04, (256,), args04), SAMPLES)[0]
    results["split_kv"] = {
        "registers": fn04.num_regs,
        "splits": splits,
        "tokens_per_split": per,
        "us": us04,
        "pct_read_floor": 100 * plain["split-kv 32K"]["floor_us"] / us04,
        "pct_copy_floor": 100 * plain["split-kv 32K"]["bytes"] / (copy_gbps * 1e3) / us04,
        "timeline": timeline(cp, mod04, splits * hkv, lambda: fn04(grid04, (256,), args04), timer),
    }
    print(f"04 stamped: {fn04.num_regs} registers, {splits} x {per}, {us04:.2f} us", flush=True)
    results["read_gbps_after"] = w4.read_ceiling(cp, timer)

    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "stream_probe.json").write_text(json.dumps(results, indent=1))
    for name in [n for n in ("w4a16", "w4a16 also", "split_kv") if n in results]:
        tl = results[name]["timeline"]
        print(
            f"{name}: event {tl['event_us']:.2f} us, stamped span {tl['span_us']:.2f} us, "
            f"starts {tl['start_pct_us']}, ends {tl['end_pct_us']}, "
            f"first SM idle at {tl['first_sm_done_us']:.2f} us, timer step {tl['timer_step_ns']} ns"
        )
    tl = plain["w4a16 headline"]["timeline"]
    print(
        f"plain read at 121 MB: event {tl['event_us']:.2f} us, span {tl['span_us']:.2f} us, "
        f"starts {tl['start_pct_us']}, ends {tl['end_pct_us']}"
    )
    print(f"read ceiling after {results['read_gbps_after']:.0f} GB/s", flush=True)


if __name__ == "__main__":
    main()
