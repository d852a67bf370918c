"""02_w4a16 variants side by side in one run: a scratch A/B, not a bench case.

Run on the GPU machine from the repository root:

    python3 scripts/gemv_w4a16_variants.py            # check, then time every variant
    python3 scripts/gemv_w4a16_variants.py emit DIR   # write each variant's .cu (no GPU)
    python3 scripts/gemv_w4a16_variants.py profile NAME   # three headline launches, for ncu

Each variant is kernels/gemv/02_w4a16.cu with constants and a few lines rewritten:
- `pieces`: 16-byte pieces a lane copies of each of its rows a stage (2 in the file; 4 makes a
  warp-stage 4 KB, two of the suite's tile blocks, with four independent mma chains);
- `stages`: ring depth;
- `ksplit`: warps sharing one 16-row tile, each over its own part of K, their sums added through
  shared memory at the end; the block grows to 64 * ksplit threads for the same N / 32 blocks,
  so this needs a launch the suite does not make (`interleave`: the parts take alternate
  stages instead of contiguous halves).

Each variant is checked first at every shape against the float64 reference (y poisoned with
NaN, the suite's own inputs and decoder, fresh random draws), then timed with CUDA events: the
L2 flushed before every launch by a write and a read of 3x its size (clean lines, as the bench
does), median of SAMPLES launches after warm-up, in two rounds of opposite order. The floor is
the same-run read ceiling measured as the suite measures it (the better of cupy.sum and a
one-pass float4 sum over 2 GiB). Writes $OUT/w4a16_variants.json (or /tmp/...).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SOURCE = (ROOT / "kernels/gemv/02_w4a16.cu").read_text()
SAMPLES = int(os.environ.get("SAMPLES", "60"))
SHAPES = (
    {"batch": 1, "k": 8192, "n": 28672},
    {"batch": 1, "k": 4096, "n": 14336},
    {"batch": 4, "k": 8192, "n": 28672},
    {"batch": 16, "k": 8192, "n": 28672},
)

VARIANTS: dict[str, dict[str, int]] = {
    "base": {},  # the file as it is, not rewritten
    "same via rewrite": {"pieces": 2, "stages": 3},
    "4 pieces, 2 deep": {"pieces": 4, "stages": 2},
    "4 pieces, 3 deep": {"pieces": 4, "stages": 3},
    "K split 2, 3 deep": {"ksplit": 2, "stages": 3},
    "K split 2, 2 deep": {"ksplit": 2, "stages": 2},
    "K split 2 interleaved, 3 deep": {"ksplit": 2, "stages": 3, "interleave": 1},
    "K split 2, 1 tile a block, 2 deep": {"ksplit": 2, "warps": 1, "stages": 2, "blocks": 14},
}
# checked, not timed: K = 768 leaves a 4-piece stage half full; K = 1536 splits into 3 stages a part
CHECK_ONLY = tuple({"batch": b, "k": 768, "n": 1024} for b in (1, 4, 16)) + (
    {"batch": 1, "k": 1536, "n": 2048},
    {"batch": 16, "k": 1536, "n": 2048},
)

REDUCE = """    wait_copies<0>();
    if constexpr (KSPLIT > 1) {
        // the parts of K meet: the ring is free now, so parts 1.. leave their sums in it
        __syncthreads();
        float* red = reinterpret_cast<float*>(&ring[0][0][0][0][0]);
        if (kpart > 0) {
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) red[((wid - WARPS) * NT * 4 + nt * 4 + e) * 32 + lane] = acc[nt][e];
        }
        __syncthreads();
        if (kpart > 0) return;
#pragma unroll
        for (int kp = 1; kp < KSPLIT; ++kp)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    acc[nt][e] += red[(((kp - 1) * WARPS + warp) * NT * 4 + nt * 4 + e) * 32 + lane];
    }
"""

ISSUE_OLD = """        if (c < kv) {
            const uint4* block = wtile + static_cast<size_t>(c / STEP) * stage_stride;
#pragma unroll
            for (int p = 0; p < PIECES; ++p) {
                copy_async_16(&ring[warp][slot][p][0][lane], block + 32 * (2 * p));
                copy_async_16(&ring[warp][slot][p][1][lane], block + 32 * (2 * p + 1));
            }
            if constexpr (X_IN_RING) copy_async_16_l1(&xring[warp][slot][x_slot], x_copy + 4 * c);
        }"""

ISSUE_NEW = """        if (c < c_end) {
            const uint4* block = wtile + static_cast<size_t>(c / 8) * stage_stride;
#pragma unroll
            for (int p = 0; p < PIECES; ++p) {
                if (p < 2 || c + 8 < c_end) {  // pieces 2, 3 lie in the next tile block
                    const uint4* tb = block + (p / 2) * stage_stride + 32 * (2 * (p % 2));
                    copy_async_16(&ring[wid][slot][p][0][lane], tb);
                    copy_async_16(&ring[wid][slot][p][1][lane], tb + 32);
                }
            }
            if constexpr (X_IN_RING) {
#pragma unroll
                for (int v = 0; v < X_VECTORS / 32; ++v)
                    if (v == 0 || c + 8 * v < c_end)
                        copy_async_16_l1(&xring[wid][slot][x_slot + 32 * v], x_copy + 4 * c + 32 * v);
            }
        }"""


def _sub(src: str, old: str, new: str, count: int = 1) -> str:
    found = src.count(old)
    if found != count:
        raise ValueError(f"rewrite anchor found {found} times, want {count}: {old[:60]!r}")
    return src.replace(old, new)


def variant(
    pieces: int = 2,
    stages: int = 3,
    ksplit: int = 1,
    interleave: int = 0,
    warps: int = 2,
    blocks: int = 7,
) -> str:
    """The file with the constants set and the K split (a no-op at ksplit 1) written in."""
    src = SOURCE
    src = re.sub(r"constexpr int WARPS = \d+;", f"constexpr int WARPS = {warps};", src)
    src = re.sub(
        r"constexpr int BLOCKS_PER_SM = \d+;", f"constexpr int BLOCKS_PER_SM = {blocks};", src
    )
    src = re.sub(r"constexpr int PIECES = \d+;", f"constexpr int PIECES = {pieces};", src)
    src = re.sub(r"constexpr int STAGES = \d+;", f"constexpr int STAGES = {stages};", src)
    src = _sub(
        src,
        "constexpr int ROWS_PER_BLOCK",
        f"constexpr int KSPLIT = {ksplit};\n"
        f"constexpr bool KINTER = {'true' if interleave else 'false'};\n"
        "constexpr int ROWS_PER_BLOCK",
    )
    src = _sub(src, "static_assert(X_VECTORS == 32,", "static_assert(X_VECTORS % 32 == 0,")
    src = _sub(src, "BLOCKS_PER_SM * (WARPS * STAGES", "BLOCKS_PER_SM * (KSPLIT * WARPS * STAGES")
    src = _sub(src, "__launch_bounds__(WARPS * 32,", "__launch_bounds__(KSPLIT * WARPS * 32,", 3)
    src = _sub(src, "uint4 ring[WARPS]", "uint4 ring[KSPLIT * WARPS]")
    src = _sub(src, "uint4 xring[WARPS]", "uint4 xring[KSPLIT * WARPS]")
    src = _sub(
        src,
        "    const int warp = threadIdx.x >> 5;\n",
        "    const int wid = threadIdx.x >> 5;  // owner of a ring\n"
        "    const int warp = wid % WARPS;      // 16-row tile of the block\n"
        "    const int kpart = wid / WARPS;     // part of K\n",
    )
    src = _sub(
        src,
        "    constexpr int STEP = 4 * PIECES;\n",
        "    constexpr int STEP = 4 * PIECES;\n"
        "    constexpr int CSTEP = KINTER ? KSPLIT * STEP : STEP;\n"
        "    const int c_begin = KINTER ? kpart * STEP : kpart * (kv / KSPLIT);\n"
        "    const int c_end = KINTER ? kv : c_begin + kv / KSPLIT;\n",
    )
    src = _sub(src, ISSUE_OLD, ISSUE_NEW)
    src = _sub(src, "issue(s * STEP, s);", "issue(c_begin + s * CSTEP, s);")
    src = _sub(
        src,
        "for (int c = 0; c < kv; c += STEP) {",
        "for (int c = c_begin; c < c_end; c += CSTEP) {",
    )
    src = _sub(src, "issue(c + (STAGES - 1) * STEP,", "issue(c + (STAGES - 1) * CSTEP,")
    src = _sub(
        src,
        "            // piece c + 4p + t lies in group",
        "            if (p >= 2 && c + 8 >= c_end) break;  // K a multiple of 256, not 512\n"
        "            // piece c + 4p + t lies in group",
    )
    src = _sub(src, "ring[warp]", "ring[wid]", 3)  # ring and xring reads
    src = _sub(src, "    wait_copies<0>();\n", REDUCE)
    return src


def threads_of(options: dict[str, int]) -> int:
    return 32 * options.get("warps", 2) * options.get("ksplit", 1)


def blocks_of(options: dict[str, int], n: int) -> int:
    return n // (16 * options.get("warps", 2))


def k_multiple(options: dict[str, int]) -> int:
    return 256 * options.get("ksplit", 1)


def load_suite() -> Any:
    sys.path.insert(0, str(ROOT / "src"))
    spec = importlib.util.spec_from_file_location("gemv_suite", ROOT / "kernels/gemv/suite.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sources() -> dict[str, str]:
    return {name: (SOURCE if not opts else variant(**opts)) for name, opts in VARIANTS.items()}


def emit(folder: str) -> None:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for name, src in sources().items():
        (out / (re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") + ".cu")).write_text(src)


READ_KERNEL = r"""
extern "C" __global__ void __launch_bounds__(256)
read_sum(const float4* __restrict__ src, float* __restrict__ out) {
    __shared__ float sums[8];
    const long long base = (long long)blockIdx.x * 1024 + threadIdx.x;
    float4 v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = src[base + j * 256];
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) s += (v[j].x + v[j].y) + (v[j].z + v[j].w);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) sums[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < 8 ? sums[threadIdx.x] : 0.0f;
#pragma unroll
        for (int o = 4; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
        if (threadIdx.x == 0) atomicAdd(out, s);
    }
}

extern "C" __global__ void flush_read(const int4* __restrict__ buf, long long n4, int* sink) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
    int acc = 0;
    for (; i < n4; i += step) {
        const int4 v = buf[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7fffffff) *sink = acc;
}
"""


class Timer:
    """Events around one launch; before it, the L2 is written over and read back (clean)."""

    def __init__(self, cp: Any) -> None:
        self.cp = cp
        dev = cp.cuda.Device()
        l2 = dev.attributes["L2CacheSize"]
        sms = dev.attributes["MultiProcessorCount"]
        size = max(3 * l2, 64 << 20) // 16 * 16
        self.buf = cp.empty(size // 4, dtype=cp.int32)
        self.n4 = np.int64(size // 16)
        self.sink = cp.zeros(1, dtype=cp.int32)
        self.module = cp.RawModule(code=READ_KERNEL, options=("--std=c++17",), backend="nvrtc")
        self.flush_kernel = self.module.get_function("flush_read")
        self.grid = (sms * 8,)
        self.value = 0
        self.start, self.end = cp.cuda.Event(), cp.cuda.Event()

    def flush(self) -> None:
        self.value = (self.value + 1) & 0x7FFFFFFF
        self.buf.fill(self.value)
        self.flush_kernel(self.grid, (256,), (self.buf, self.n4, self.sink))

    def median_us(
        self, fn: Callable[[], None], samples: int = SAMPLES
    ) -> tuple[float, float, float]:
        for _ in range(5):
            self.flush()
            fn()
        times = []
        for _ in range(samples):
            self.flush()
            self.start.record()
            fn()
            self.end.record()
            self.end.synchronize()
            times.append(self.cp.cuda.get_elapsed_time(self.start, self.end) * 1e3)
        times.sort()
        return statistics.median(times), times[len(times) // 5], times[(4 * len(times)) // 5]


def read_ceiling(cp: Any, timer: Timer) -> float:
    """GB/s: the better of cupy.sum and the float4 one-pass sum over 2 GiB (the suite's way)."""
    n = (2 << 30) // 4
    src = cp.random.default_rng().random(n, dtype=cp.float32)
    out = cp.zeros(1, dtype=cp.float32)
    kernel = timer.module.get_function("read_sum")

    def one_pass() -> None:
        out.fill(0)
        kernel((n // 4 // 1024,), (256,), (src, out))

    best = min(timer.median_us(lambda: cp.sum(src), 30)[0], timer.median_us(one_pass, 30)[0])
    want = float(cp.sum(src, dtype=cp.float64))
    if abs(float(out[0]) - want) > 1e-3 * want:
        raise SystemExit("read ceiling kernel summed wrong")
    return (2 << 30) / (best * 1e-6) / 1e9


def main() -> None:
    import cupy as cp

    suite = load_suite()
    timer = Timer(cp)
    rng = cp.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    modules: dict[str, Any] = {}
    for name, src in sources().items():
        module = cp.RawModule(code=src, options=("--std=c++17", "-arch=sm_90"), backend="nvrtc")
        regs = {b: module.get_function(f"w4a16_b{b}").num_regs for b in (1, 4, 16)}
        spills = {b: module.get_function(f"w4a16_b{b}").local_size_bytes for b in (1, 4, 16)}
        print(f"{name}: registers {regs}, local bytes {spills}", flush=True)
        modules[name] = module

    ceiling_before = read_ceiling(cp, timer)
    cp.get_default_memory_pool().free_all_blocks()
    print(f"read ceiling {ceiling_before:.0f} GB/s", flush=True)

    results: dict[str, Any] = {"ceiling_gbps": [ceiling_before], "cases": {}}
    runners: dict[tuple[str, str], Callable[[], None]] = {}
    failed: set[str] = set()
    for shape in CHECK_ONLY + SHAPES:
        timed = shape in SHAPES
        key = f"b{shape['batch']} k{shape['k']} n{shape['n']}"
        inputs = suite._inputs_w4a16(shape, rng)
        ref = suite._reference(suite._weights_w4a16)(inputs, shape)["y"]  # float64, exact decode
        nbytes = suite.bytes_w4a16(shape)
        for name, module in modules.items():
            opts = VARIANTS[name]
            if shape["k"] % k_multiple(opts):
                continue
            kernel = module.get_function(f"w4a16_b{shape['batch']}")
            y = cp.full((shape["batch"], shape["n"]), 0xFFFF, dtype=cp.uint16)  # NaN in bf16
            args = (
                inputs["x"],
                inputs["wq"],
                inputs["scales"],
                y,
                np.int32(shape["k"]),
                np.int32(shape["n"]),
            )
            grid, block = (blocks_of(opts, shape["n"]),), (threads_of(opts),)

            def run(
                kernel: Any = kernel, args: tuple = args, grid: tuple = grid, block: tuple = block
            ) -> None:
                kernel(grid, block, args)

            run()
            cp.cuda.Device().synchronize()
            got = suite.bf16_bits_to_float64(y, cp)
            rel = float(cp.linalg.norm(got - ref) / cp.linalg.norm(ref))
            ok = bool(cp.isfinite(got).all()) and rel < suite.TOLERANCE
            print(f"check {key} {name}: rel_err {rel:.2e} {'ok' if ok else 'FAILED'}", flush=True)
            results["cases"].setdefault(key, {})[name] = {
                "rel_err": rel,
                "ok": ok,
                "us": [],
                "bytes": nbytes,
            }
            if not ok:
                failed.add(name)
            elif timed:
                runners[(key, name)] = run
        # keep every shape's inputs alive for the timing rounds
        if timed:
            results["cases"][key]["_inputs"] = inputs
        else:
            del inputs, ref
            cp.get_default_memory_pool().free_all_blocks()

    # a variant wrong at any shape is timed at none
    runners = {key: run for key, run in runners.items() if key[1] not in failed}
    for rnd in range(2):
        order = list(runners.items())
        if rnd:
            order.reverse()
        for (key, name), run in order:
            med, p20, p80 = timer.median_us(run)
            case = results["cases"][key][name]
            case["us"].append([med, p20, p80])
            pct = 100 * case["bytes"] / (med * 1e-6) / 1e9 / ceiling_before
            print(
                f"round {rnd} {key:18s} {name:32s} {med:7.2f} us  [{p20:.2f}, {p80:.2f}]  "
                f"{pct:5.1f}% of read",
                flush=True,
            )

    ceiling_after = read_ceiling(cp, timer)
    cp.get_default_memory_pool().free_all_blocks()
    results["ceiling_gbps"].append(ceiling_after)
    ceiling = max(results["ceiling_gbps"])
    print(f"read ceiling after {ceiling_after:.0f} GB/s; table against {ceiling:.0f}")
    for key, cases in results["cases"].items():
        cases.pop("_inputs", None)
        for name, case in cases.items():
            if case["us"]:
                best = min(m for m, _, _ in case["us"])
                case["pct_of_read"] = 100 * case["bytes"] / (best * 1e-6) / 1e9 / ceiling
                print(
                    f"{key:18s} {name:32s} best median {best:7.2f} us "
                    f"{case['pct_of_read']:5.1f}% of read"
                )
    out = Path(os.environ.get("OUT", "/tmp"))
    (out / "w4a16_variants.json").write_text(json.dumps(results, indent=1))
    headline = results["cases"][f"b1 k{SHAPES[0]['k']} n{SHAPES[0]['n']}"]
    timed_names = [n for n, c in headline.items() if n != "base" and c.get("us")]
    if timed_names:
        best = min(timed_names, key=lambda n: min(m for m, _, _ in headline[n]["us"]))
        (out / "best.txt").write_text(best + "\n")


def profile(name: str) -> None:
    """Three headline launches of one variant (no check, no flush), for Nsight Compute."""
    import cupy as cp

    suite = load_suite()
    shape = SHAPES[0]
    opts = VARIANTS[name]
    src = SOURCE if not opts else variant(**opts)
    module = cp.RawModule(code=src, options=("--std=c++17", "-arch=sm_90"), backend="nvrtc")
    kernel = module.get_function("w4a16_b1")
    inputs = suite._inputs_w4a16(shape, cp.random.default_rng(3))
    y = cp.empty((1, shape["n"]), dtype=cp.uint16)
    for _ in range(3):
        kernel(
            (blocks_of(opts, shape["n"]),),
            (threads_of(opts),),
            (
                inputs["x"],
                inputs["wq"],
                inputs["scales"],
                y,
                np.int32(shape["k"]),
                np.int32(shape["n"]),
            ),
        )
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "emit":
        emit(sys.argv[2])
    elif len(sys.argv) > 2 and sys.argv[1] == "profile":
        profile(sys.argv[2])
    else:
        main()
