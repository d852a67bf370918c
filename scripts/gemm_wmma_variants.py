"""10_wmma variants against cuBLAS bf16 in one run: a scratch A/B, not a bench case.

Run on the GPU machine from the repository root:

    python3 scripts/gemm_wmma_variants.py          # 4096^3; SIZE=8192 for another size

Each variant is kernels/gemm/10_wmma.cu or 11_mma_swizzle.cu, with constants or code blocks
rewritten: `burst` issues the next tile's copies all at once after the barrier instead of
spread over the K step, `swizzle` puts 10's tiles on 11's XOR-swizzled layout (no padding),
`group` adds 11's launch order; each is checked against cuBLAS's
output first (NaN-poisoned C; a variant that fails is reported and left out), then timed with
CUDA events after warm-up, the L2 flushed before every launch, median of 25, in two
alternating rounds. A probe first compares the registers that ldmatrix leaves, in each order,
with the fragment nvcuda::wmma::load_matrix_sync fills from the same tile. Prints a line per
variant and round and writes $OUT/wmma_ab.json (or /tmp/wmma_ab.json).
"""

from __future__ import annotations

import json
import os
import re
import statistics
from collections.abc import Callable
from pathlib import Path

import cupy as cp
import numpy as np
from cupy_backends.cuda.libs import cublas

SOURCES = {"committed": Path("kernels/gemm/10_wmma.cu").read_text(),
           "mma11": Path("kernels/gemm/11_mma_swizzle.cu").read_text()}
# ONLY=name,name restricts the variants; PROFILE=1 launches each once after the check and skips
# the timing rounds (for Nsight Compute: one launch a variant, in VARIANTS order).
ONLY = [n for n in os.environ.get("ONLY", "").split(",") if n]
PROFILE = os.environ.get("PROFILE") == "1"
INCLUDE = "-I/usr/local/cuda/include"
SIZE = int(os.environ.get("SIZE", "4096"))
M = N = K = SIZE
CUDA_R_16BF, CUDA_R_32F = 14, 0

GROUPED_ORDER = """    const int tiles_n = gridDim.x, tiles_m = gridDim.y;
    const int b = blockIdx.y * gridDim.x + blockIdx.x;
    const int group = b / (8 * tiles_n), in_group = b % (8 * tiles_n);
    const int rows = min(8, tiles_m - group * 8);
    const int block_row = (group * 8 + in_group % rows) * BM;
    const int block_col = (in_group / rows) * BN;
"""

# 10's copies issued in one burst after the barrier, as before the eighth pass
SPREAD_COPIES = (
    "            // a quarter of the next tile's copies (refilling the stage of step t-1)\n"
    "            if (next < k_tiles) load_part(next % STAGES, next, kk / FRAG);\n",
    "",
)
SPREAD_COMMIT = ("        cp_async_commit();  // one group per step, empty past the end\n", "")
BURST_COPIES = (
    "        const int next = t + STAGES - 1;\n",
    "        const int next = t + STAGES - 1;\n"
    "        if (next < k_tiles) load_tile(next % STAGES, next);  // refills the stage of step t-1\n"
    "        cp_async_commit();\n",
)
# 10 on 11's layout: rows unpadded (PAD 0), 16-byte chunk c of row r stored at c ^ (r % 8); every
# row a lane's ldmatrix points at has row % 8 == r8, so its chunk is XOR-ed with r8
SWIZZLE_EDITS = (
    ("static_assert((AS_STRIDE / 2) % 8 == 4 && (BS_STRIDE / 2) % 8 == 4,\n"
     "              \"a row stride of 4 x odd words puts 8 consecutive rows on 8 distinct bank quads\");\n",
     ""),
    ("    const int b_row = tid / (BN / CHUNK), b_col = (tid % (BN / CHUNK)) * CHUNK;\n",
     "    const int b_row = tid / (BN / CHUNK), b_col = (tid % (BN / CHUNK)) * CHUNK;\n"
     "    static_assert(A_ROW_STEP % 8 == 0 && B_ROW_STEP % 8 == 0, \"a thread's row % 8 never changes\");\n"
     "    const int a_put = ((a_col / CHUNK) ^ (a_row % 8)) * CHUNK;\n"
     "    const int b_put = ((b_col / CHUNK) ^ (b_row % 8)) * CHUNK;\n"),
    ("    const unsigned as_dst = as_base + (a_row * AS_STRIDE + a_col) * 2;\n"
     "    const unsigned bs_dst = bs_base + (b_row * BS_STRIDE + b_col) * 2;\n",
     "    const unsigned as_dst = as_base + (a_row * AS_STRIDE + a_put) * 2;\n"
     "    const unsigned bs_dst = bs_base + (b_row * BS_STRIDE + b_put) * 2;\n"),
    ("    const unsigned a_lane = ((warp_row + a_r) * AS_STRIDE + a_c) * 2;\n"
     "    const unsigned b_lane = (b_r * BS_STRIDE + warp_col + b_c) * 2;\n",
     "    unsigned a_lane[PARTS], b_lane[FN];\n"
     "#pragma unroll\n"
     "    for (int q = 0; q < PARTS; ++q)\n"
     "        a_lane[q] = ((warp_row + a_r) * AS_STRIDE + (((q * FRAG + a_c) / CHUNK) ^ r8) * CHUNK) * 2;\n"
     "#pragma unroll\n"
     "    for (int j = 0; j < FN; ++j)\n"
     "        b_lane[j] = (b_r * BS_STRIDE + (((warp_col + j * FRAG + b_c) / CHUNK) ^ r8) * CHUNK) * 2;\n"),
    ("        const unsigned as = as_base + stage * A_STAGE * 2 + a_lane;\n"
     "        const unsigned bs = bs_base + stage * B_STAGE * 2 + b_lane;\n",
     "        const unsigned as = as_base + stage * A_STAGE * 2;\n"
     "        const unsigned bs = bs_base + stage * B_STAGE * 2;\n"),
    ("            for (int i = 0; i < FM; ++i) ldsm_a(a_frag[i], as + (i * FRAG * AS_STRIDE + kk) * 2);\n",
     "            for (int i = 0; i < FM; ++i) ldsm_a(a_frag[i], as + a_lane[kk / FRAG] + i * FRAG * AS_STRIDE * 2);\n"),
    ("            for (int j = 0; j < FN; ++j) ldsm_b(b_frag[j], bs + (kk * BS_STRIDE + j * FRAG) * 2);\n",
     "            for (int j = 0; j < FN; ++j) ldsm_b(b_frag[j], bs + b_lane[j] + kk * BS_STRIDE * 2);\n"),
)

VARIANTS: dict[str, dict[str, object]] = {
    "10": {},
    "11 mma.sync": {"source": "mma11"},
    "10, copies in one burst": {"burst": True},
    "10 swizzled, copies in one burst": {"swizzle": True, "burst": True},
    "10 swizzled": {"swizzle": True},
    "10 swizzled, copies in one burst, grouped": {"swizzle": True, "burst": True, "group": True},
    "10, 128x128 3 stages 2 blocks/SM": {"BN": 128, "STAGES": 3, "MIN_BLOCKS": 2},
    "10 swizzled, copies in one burst, 128x128 3 stages 2 blocks/SM": {
        "swizzle": True, "burst": True, "BN": 128, "STAGES": 3, "MIN_BLOCKS": 2},
}

PROBE = r"""
#include <cuda_bf16.h>
#include <mma.h>
using namespace nvcuda;
// One warp: the 16x16 tile t (row-major, bf16 bit patterns 0..255) into shared memory, then
// out[0..127] = the matrix_a fragment load_matrix_sync fills, out[128..255] = the matrix_b one,
// then for each order o in 0..1: the registers ldmatrix leaves for A (x4) and B (x4.trans).
extern "C" __global__ void probe(const unsigned short* t, unsigned* out) {
    __shared__ __align__(128) unsigned short tile[16 * 16];
    const int lane = threadIdx.x;
    for (int i = lane; i < 256; i += 32) tile[i] = t[i];
    __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
    wmma::load_matrix_sync(fa, reinterpret_cast<const __nv_bfloat16*>(tile), 16);
    wmma::load_matrix_sync(fb, reinterpret_cast<const __nv_bfloat16*>(tile), 16);
    const unsigned* ra = reinterpret_cast<const unsigned*>(fa.x);
    const unsigned* rb = reinterpret_cast<const unsigned*>(fb.x);
    for (int r = 0; r < 4; ++r) {
        out[r * 32 + lane] = ra[r];
        out[128 + r * 32 + lane] = rb[r];
    }
    const int quad = lane / 8, r8 = lane % 8;
    const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(tile));
    for (int o = 0; o < 2; ++o) {
        const int row = o == 0 ? r8 + (quad & 1) * 8 : r8 + (quad >> 1) * 8;
        const int col = o == 0 ? (quad >> 1) * 8 : (quad & 1) * 8;
        const unsigned addr = base + (row * 16 + col) * 2;
        unsigned a0, a1, a2, a3, b0, b1, b2, b3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(addr));
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3) : "r"(addr));
        unsigned* o_a = out + 256 + o * 256;
        const unsigned av[4] = {a0, a1, a2, a3}, bv[4] = {b0, b1, b2, b3};
        for (int r = 0; r < 4; ++r) {
            o_a[r * 32 + lane] = av[r];
            o_a[128 + r * 32 + lane] = bv[r];
        }
    }
}
"""


def probe() -> dict[str, bool]:
    """Which ldmatrix order leaves exactly the registers load_matrix_sync fills, for A and B."""
    module = cp.RawModule(code=PROBE, options=("--std=c++17", "-arch=sm_90", INCLUDE),
                          backend="nvrtc")
    tile = cp.arange(256, dtype=cp.uint16)
    out = cp.full(768, 0xFFFFFFFF, dtype=cp.uint32)
    module.get_function("probe")((1,), (32,), (tile, out))
    host = out.get()
    wmma_a, wmma_b = host[0:128], host[128:256]
    found = {}
    for o in range(2):
        block = host[256 + o * 256: 512 + o * 256]
        found[f"A{o}"] = bool((block[:128] == wmma_a).all())
        found[f"B{o}"] = bool((block[128:] == wmma_b).all())
    print("probe, ldmatrix order equal to load_matrix_sync's fragment:", found, flush=True)
    return found


def _edit(src: str, old: str, new: str) -> str:
    assert src.count(old) == 1, f"the rewrite expects exactly one {old!r}"
    return src.replace(old, new)


def variant(source: str = "committed", burst: bool = False, swizzle: bool = False,
            novol: bool = False, group: bool = False, **constants: int) -> str:
    src = SOURCES[source]
    if burst:
        for old, new in (SPREAD_COPIES, SPREAD_COMMIT, BURST_COPIES):
            src = _edit(src, old, new)
    if swizzle:
        for old, new in SWIZZLE_EDITS:
            src = _edit(src, old, new)
        constants = {"PAD": 0, **constants}
    if novol:
        src = src.replace('asm volatile("ldmatrix', 'asm("ldmatrix')
    for name, value in constants.items():
        src = re.sub(rf"constexpr int {name} = \d+;", f"constexpr int {name} = {value};", src)
    if group:
        plain = ("    const int block_row = blockIdx.y * BM;\n"
                 "    const int block_col = blockIdx.x * BN;\n")
        src = _edit(src, plain, GROUPED_ORDER)
    return src


def geometry(src: str) -> tuple[dict[str, int], int, int]:
    g = {k: int(m.group(1)) if (m := re.search(rf"constexpr int {k} = (\d+);", src)) else 0
         for k in ("BM", "BN", "BK", "STAGES", "WM", "WN", "PAD")}
    threads = (g["BM"] // g["WM"]) * (g["BN"] // g["WN"]) * 32
    smem = g["STAGES"] * (g["BM"] * (g["BK"] + g["PAD"]) + g["BK"] * (g["BN"] + g["PAD"])) * 2
    return g, threads, smem


def main() -> None:
    rng = cp.random.default_rng(7)

    def bf16(shape: tuple[int, int]) -> cp.ndarray:
        x = rng.standard_normal(shape, dtype=cp.float32)
        return (x.view(cp.uint32) >> 16).astype(cp.uint16)

    a, b = bf16((M, K)), bf16((K, N))
    flush = cp.empty(150 * 1024 * 1024 // 4, dtype=cp.float32)  # 3x the H200's 50 MB L2
    handle = cp.cuda.device.get_cublas_handle()
    one, zero = np.ones(1, dtype=np.float32), np.zeros(1, dtype=np.float32)
    ref = cp.empty((M, N), dtype=cp.float32)

    def library() -> None:
        cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
        cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
        cublas.gemmEx(handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, N, M, K, one.ctypes.data,
                      b.data.ptr, CUDA_R_16BF, N, a.data.ptr, CUDA_R_16BF, K, zero.ctypes.data,
                      ref.data.ptr, CUDA_R_32F, N, cublas.CUBLAS_COMPUTE_32F,
                      cublas.CUBLAS_GEMM_DEFAULT)

    def timed(fn: Callable[[], None], reps: int = 25) -> float:
        for _ in range(3):
            fn()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for _ in range(reps):
            flush.fill(1.0)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end))
        return statistics.median(times)

    found = probe()
    library()
    kernels: dict[str, tuple[Callable[[], None], float]] = {}
    for name, options in VARIANTS.items():
        if ONLY and name not in ONLY:
            continue
        src = variant(**options)  # type: ignore[arg-type]
        g, threads, smem = geometry(src)
        module = cp.RawModule(code=src, options=("--std=c++17", "-arch=sm_90", INCLUDE),
                              backend="nvrtc")
        entry = "gemm_bf16_mma_swizzle" if options.get("source") == "mma11" else "gemm_bf16_wmma"
        kernel = module.get_function(entry)
        kernel.max_dynamic_shared_size_bytes = smem
        c = cp.full((M, N), cp.nan, dtype=cp.float32)
        grid = (N // g["BN"], M // g["BM"])

        def run(kernel=kernel, c=c, grid=grid, threads=threads, smem=smem) -> None:  # noqa: ANN001
            kernel(grid, (threads,), (a, b, c, np.int32(M), np.int32(N), np.int32(K)),
                   shared_mem=smem)

        run()
        cp.cuda.Device().synchronize()
        rel = float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref))
        print(f"{name}: rel err vs cuBLAS {rel:.1e}, {threads} threads, {smem} B shared, "
              f"{kernel.num_regs} registers", flush=True)
        if not rel < 1e-3:
            print(f"{name}: wrong result, left out", flush=True)
            continue
        kernels[name] = (run, rel)

    if PROFILE:
        for run, _ in kernels.values():
            run()
        cp.cuda.Device().synchronize()
        return
    results: dict[str, list[float]] = {}
    flops = 2 * M * N * K
    for rnd in range(2):
        lib = timed(library)
        results.setdefault("cuBLAS", []).append(lib)
        for name, (run, _) in kernels.items():
            ms = timed(run)
            results.setdefault(name, []).append(ms)
            print(f"round {rnd} {name:40s} {ms:.4f} ms {flops / ms / 1e9:6.1f} TFLOP/s "
                  f"{100 * lib / ms:5.1f}% of cuBLAS ({lib:.4f} ms)", flush=True)
    out = Path(os.environ.get("OUT", "/tmp"), "wmma_ab.json")
    out.write_text(json.dumps({"size": SIZE, "probe": found, "median_ms": results}, indent=1))


if __name__ == "__main__":
    main()
