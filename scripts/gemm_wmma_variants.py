"""10_wmma variants against cuBLAS bf16 in one run: a scratch A/B, not a bench case.

Run on the GPU machine from the repository root:

    python3 scripts/gemm_wmma_variants.py          # 4096^3; SIZE=8192 for another size

Each variant is kernels/gemm/10_wmma.cu with a constant or one code block rewritten; each is
checked against cuBLAS's output first (NaN-poisoned C), then timed with CUDA events after
warm-up, the L2 flushed before every launch, median of 25, in two alternating rounds. Prints
a line per variant and round and writes $OUT/wmma_ab.json (or /tmp/wmma_ab.json).
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

SOURCE = Path("kernels/gemm/10_wmma.cu").read_text()
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

VARIANTS: dict[str, dict[str, object]] = {
    "base": {},
    "loads not volatile": {"novol": True},
    "grouped launch order": {"group": True},
    "both": {"novol": True, "group": True},
    "BK 32": {"BK": 32},
    "BK 32 + both": {"BK": 32, "novol": True, "group": True},
    "BK 32, 5 stages + both": {"BK": 32, "STAGES": 5, "novol": True, "group": True},
    "128x128, 3 stages, 2 blocks/SM + both": {"BN": 128, "STAGES": 3, "MIN_BLOCKS": 2,
                                              "novol": True, "group": True},
    "warp tile 64x32 + both": {"WN": 32, "novol": True, "group": True},
}


def variant(novol: bool = False, group: bool = False, **constants: int) -> str:
    src = SOURCE
    if novol:
        src = src.replace('asm volatile("wmma.load', 'asm("wmma.load')
    for name, value in constants.items():
        src = re.sub(rf"constexpr int {name} = \d+;", f"constexpr int {name} = {value};", src)
    if group:
        plain = ("    const int block_row = blockIdx.y * BM;\n"
                 "    const int block_col = blockIdx.x * BN;\n")
        assert plain in src
        src = src.replace(plain, GROUPED_ORDER)
    return src


def geometry(src: str) -> tuple[dict[str, int], int, int]:
    g = {k: int(re.search(rf"constexpr int {k} = (\d+);", src).group(1))  # type: ignore[union-attr]
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

    library()
    kernels: dict[str, tuple[Callable[[], None], float]] = {}
    for name, options in VARIANTS.items():
        src = variant(**options)  # type: ignore[arg-type]
        g, threads, smem = geometry(src)
        module = cp.RawModule(code=src, options=("--std=c++17", "-arch=sm_90", INCLUDE),
                              backend="nvrtc")
        kernel = module.get_function("gemm_bf16_wmma")
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
            raise SystemExit(f"{name}: wrong result")
        kernels[name] = (run, rel)

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
    out.write_text(json.dumps({"size": SIZE, "median_ms": results}, indent=1))


if __name__ == "__main__":
    main()
