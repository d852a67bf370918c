"""Tensor-core peak: mma.sync (warp, registers) and wgmma (warpgroup, shared memory), bf16 and
fp8 e4m3.

Each version is a loop of tensor-core instructions on operands loaded once, so the figure is
the instruction's throughput and nothing else. The comparison is the same run's cuBLAS bf16
GEMM (torch.matmul) at a shape with exactly the FLOPs of the microbenchmark, so `pct_library`
reads as "% of cuBLAS bf16". The operands are integers in {-1, 0, 1}: every accumulator holds
an exact integer, and the check is exact.
CuPy and torch are imported inside the functions: this module is imported without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from curriculum.bench import kit
from curriculum.bench.api import (
    Arrays,
    Benchmark,
    LibraryBaseline,
    OutputSpec,
    Roofline,
    Shape,
    Suite,
    Version,
)

SMS = 132  # H200 SM count: the grids are fixed so the work (and the FLOP count) never changes

# --- mma.sync ----------------------------------------------------------------

MMA_THREADS = 128
MMA_CHAINS = 8  # independent accumulators per warp, as CHAINS in 01
MMA_BLOCKS = SMS * 8  # 8 blocks of 4 warps per SM: one wave
MMA_WARPS = MMA_BLOCKS * MMA_THREADS // 32
MMA_FLOPS = 2 * 16 * 8 * 16  # one m16n8k16
MMA_ITERS = 4096


def mma_flops(shape: Shape) -> float:
    return float(MMA_WARPS * MMA_CHAINS * shape["iters"] * MMA_FLOPS)


def mma_library_shape(shape: Shape) -> tuple[int, int, int]:
    """An M x N x K GEMM with exactly the FLOPs of 01 at this shape."""
    return (8448, 8192, shape["iters"])


# --- wgmma -------------------------------------------------------------------

WG_THREADS = 256
WG_BLOCKS = SMS  # one block (two warpgroups, 128 accumulators each) per SM
WG_BM, WG_BN, WG_BK = 128, 256, 64
WG_SMEM = WG_BM * WG_BK * 2 + WG_BK * WG_BN * 2 + 1024  # tiles + swizzle-atom alignment slack
WG_FLOPS_PER_ITER = 2 * 4 * 2 * 64 * 256 * 16  # two warpgroups x four m64n256k16
WG_ITERS = 2048


def wgmma_flops(shape: Shape) -> float:
    return float(WG_BLOCKS * shape["iters"] * WG_FLOPS_PER_ITER)


def wgmma_library_shape(shape: Shape) -> tuple[int, int, int]:
    """An M x N x K GEMM with exactly the FLOPs of 02 at this shape."""
    return (8448, 8192, 4 * shape["iters"])


# --- wgmma fp8 ---------------------------------------------------------------

F8_BK = 128  # e4m3 per 128-byte row
F8_SMEM = WG_BM * F8_BK + WG_BN * F8_BK + 1024
F8_FLOPS_PER_ITER = 2 * 4 * 2 * 64 * 256 * 32  # two warpgroups x four m64n256k32
F8_ITERS = 2048
E4M3 = {1: 0x38, -1: 0xB8, 0: 0x00}  # the e4m3 bytes of the three values used


def wgmma_fp8_flops(shape: Shape) -> float:
    return float(WG_BLOCKS * shape["iters"] * F8_FLOPS_PER_ITER)


def wgmma_fp8_library_shape(shape: Shape) -> tuple[int, int, int]:
    """An M x N x K GEMM with exactly the FLOPs of 03 at this shape."""
    return (8448, 8192, 8 * shape["iters"])


def ternary_e4m3(rng: Any, size: int) -> Any:
    """e4m3 bytes of random integers in {-1, 0, 1}."""
    import cupy

    v = rng.integers(-1, 2, size=size)
    return cupy.where(v > 0, E4M3[1], cupy.where(v < 0, E4M3[-1], E4M3[0])).astype(cupy.uint8)


def e4m3_ternary_to_float64(a: Any) -> Any:
    """The values of bytes made by ternary_e4m3 (the uint8 array or its float64 copy)."""
    import cupy

    b = a.astype(cupy.float64)
    return cupy.where(b == E4M3[1], 1.0, cupy.where(b == E4M3[-1], -1.0, 0.0))


def _f8_inputs(shape: Shape, rng: Any) -> Arrays:
    return {"a": ternary_e4m3(rng, WG_BM * F8_BK), "b": ternary_e4m3(rng, WG_BN * F8_BK)}


def _f8_reference(x64: Arrays, shape: Shape) -> Arrays:
    import cupy

    a = e4m3_ternary_to_float64(x64["a"]).reshape(WG_BM, F8_BK)
    b = e4m3_ternary_to_float64(x64["b"]).reshape(WG_BN, F8_BK)  # N x K
    return {"d": cupy.broadcast_to(a @ b.T, (WG_BLOCKS, WG_BM, WG_BN))}


def _launch_f8(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    fn = kit.kernel(module, version.name)
    if fn.max_dynamic_shared_size_bytes < F8_SMEM:
        fn.max_dynamic_shared_size_bytes = F8_SMEM
    fn(
        (WG_BLOCKS,),
        (WG_THREADS,),
        (arrays["a"], arrays["b"], arrays["d"], numpy.int32(shape["iters"]), numpy.int32(0)),
        shared_mem=F8_SMEM,
    )


# --- mma.sync fp8 -------------------------------------------------------------

F8_CHAINS = 4  # as CHAINS in 04
F8_MMA_FLOPS = 2 * 16 * 8 * 32  # one m16n8k32
F8_MMA_ITERS = 4096
F8_SEED = 12345


def mma_fp8_flops(shape: Shape) -> float:
    """The loop's 2 MMAs per chain per iteration; the 4 final MMAs per warp are not counted."""
    return float(MMA_WARPS * F8_CHAINS * 2 * shape["iters"] * F8_MMA_FLOPS)


def mma_fp8_library_shape(shape: Shape) -> tuple[int, int, int]:
    """An M x N x K GEMM with exactly the counted FLOPs of 04 at this shape."""
    return (8448, 8192, 2 * shape["iters"])


def lcg_sign_sum(seed: int, iters: int) -> int:
    """Sum of the signs 04 draws: per iteration x -> 1664525 x + 1013904223 (mod 2^32), then
    -1 for each of bits 31 and 30 that is set, +1 for each that is clear."""
    x, total = seed, 0
    for _ in range(iters):
        x = (x * 1664525 + 1013904223) & 0xFFFFFFFF
        total += (-1 if x >> 31 & 1 else 1) + (-1 if x >> 30 & 1 else 1)
    return total


def _mma_f8_inputs(shape: Shape, rng: Any) -> Arrays:
    return {"a": ternary_e4m3(rng, 16 * 32), "b": ternary_e4m3(rng, F8_CHAINS * 32 * 8)}


def _mma_f8_reference(x64: Arrays, shape: Shape) -> Arrays:
    import cupy

    a = e4m3_ternary_to_float64(x64["a"]).reshape(16, 32)
    b = e4m3_ternary_to_float64(x64["b"]).reshape(F8_CHAINS, 32, 8)
    scale = 1 + lcg_sign_sum(F8_SEED, shape["iters"])  # the loop's signs, then one more A B_j
    prod = cupy.einsum("mk,jkn->jmn", a, b) * scale
    return {"d": cupy.broadcast_to(prod, (MMA_WARPS, F8_CHAINS, 16, 8))}


def _launch_mma_f8(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    kit.kernel(module, version.name)(
        (MMA_BLOCKS,),
        (MMA_THREADS,),
        (
            arrays["a"],
            arrays["b"],
            arrays["d"],
            numpy.int32(shape["iters"]),
            numpy.uint32(F8_SEED),
        ),
    )


def scaled_mm(
    dims: Callable[[Shape], tuple[int, int, int]],
) -> Callable[[Arrays, Shape], Callable[[], None]]:
    """torch._scaled_mm (cuBLASLt fp8 e4m3, bf16 out) at an M x N x K from `dims`."""

    def make(arrays: Arrays, shape: Shape) -> Callable[[], None]:
        import torch

        m, n, k = dims(shape)
        device = torch.device("cuda", kit.torch_view(arrays["d"]).device.index)
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
        bt = torch.randn(n, k, device=device, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
        one = torch.ones((), device=device, dtype=torch.float32)

        def run() -> None:
            torch._scaled_mm(a, bt.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        return kit.warmed(kit.on_cupy_stream(run))

    return make


# --- shared ------------------------------------------------------------------


def ternary_bf16(rng: Any, size: int) -> Any:
    """bf16 bit patterns of random integers in {-1, 0, 1}."""
    import cupy

    values = rng.integers(-1, 2, size=size).astype(cupy.float32)
    return kit.to_bf16_bits(values)


def _mma_inputs(shape: Shape, rng: Any) -> Arrays:
    return {"a": ternary_bf16(rng, 16 * 16), "b": ternary_bf16(rng, MMA_CHAINS * 16 * 8)}


def _mma_reference(x64: Arrays, shape: Shape) -> Arrays:
    import cupy

    a = kit.bf16_bits_to_float64(x64["a"]).reshape(16, 16)
    b = kit.bf16_bits_to_float64(x64["b"]).reshape(MMA_CHAINS, 16, 8)
    prod = cupy.einsum("mk,jkn->jmn", a, b) * shape["iters"]
    return {"d": cupy.broadcast_to(prod, (MMA_WARPS, MMA_CHAINS, 16, 8))}


def _launch_mma(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    kit.kernel(module, version.name)(
        (MMA_BLOCKS,),
        (MMA_THREADS,),
        (arrays["a"], arrays["b"], arrays["d"], numpy.int32(shape["iters"])),
    )


def _wg_inputs(shape: Shape, rng: Any) -> Arrays:
    return {"a": ternary_bf16(rng, WG_BM * WG_BK), "b": ternary_bf16(rng, WG_BK * WG_BN)}


def _wg_reference(x64: Arrays, shape: Shape) -> Arrays:
    import cupy

    a = kit.bf16_bits_to_float64(x64["a"]).reshape(WG_BM, WG_BK)
    b = kit.bf16_bits_to_float64(x64["b"]).reshape(WG_BK, WG_BN)
    # every iteration restarts the accumulator: the output is one A @ B, whatever iters is
    return {"d": cupy.broadcast_to(a @ b, (WG_BLOCKS, WG_BM, WG_BN))}


def _launch_wgmma(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    fn = kit.kernel(module, version.name)
    if fn.max_dynamic_shared_size_bytes < WG_SMEM:
        fn.max_dynamic_shared_size_bytes = WG_SMEM
    fn(
        (WG_BLOCKS,),
        (WG_THREADS,),
        (arrays["a"], arrays["b"], arrays["d"], numpy.int32(shape["iters"]), numpy.int32(0)),
        shared_mem=WG_SMEM,
    )


def cublas_same_flops(
    dims: Callable[[Shape], tuple[int, int, int]],
) -> Callable[[Arrays, Shape], Callable[[], None]]:
    """torch.matmul (cuBLAS) bf16 at an M x N x K with the microbenchmark's FLOPs."""

    def make(arrays: Arrays, shape: Shape) -> Callable[[], None]:
        import torch

        m, n, k = dims(shape)
        device = torch.device("cuda", kit.torch_view(arrays["a"]).device.index)
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=device, dtype=torch.bfloat16)
        c = torch.empty(m, n, device=device, dtype=torch.bfloat16)
        return kit.warmed(kit.on_cupy_stream(lambda: torch.matmul(a, b, out=c)))

    return make


EXACT = (
    "operands are integers in {-1, 0, 1}: every partial sum is an integer of at most 2^16, exact "
    "in fp32, so the answer is exact (1e-6 leaves no room for any error), while a wrong "
    "fragment or a skipped instruction gives errors of order 1"
)

MMA_SYNC = Benchmark(
    name="mma_sync_bf16",
    match="*_mma_sync_bf16",
    inputs=_mma_inputs,
    outputs={"d": OutputSpec(shape=lambda s: (MMA_WARPS, MMA_CHAINS, 16, 8), dtype="float32")},
    reference=_mma_reference,
    launch=_launch_mma,
    flops=mma_flops,
    bytes=lambda s: float(MMA_WARPS * MMA_CHAINS * 128 * 4),
    work_convention=(
        "4096 FLOPs per mma.sync.m16n8k16 (2 x 16 x 8 x 16), 8 chains per warp, 4224 warps, "
        "iters each; bytes = the fp32 accumulators written once"
    ),
    tolerance=1e-6,
    tolerance_reason=EXACT,
    shapes=[{"iters": MMA_ITERS}],
    headline={"iters": MMA_ITERS},
    roofline=Roofline(bandwidth=None, compute="gemm_bf16"),
    baselines=(
        LibraryBaseline(
            name="cuBLAS bf16 GEMM (torch.matmul, 8448x8192x4096, same FLOPs)",
            make=cublas_same_flops(mma_library_shape),
        ),
    ),
    items=lambda s: float(MMA_WARPS * MMA_CHAINS * s["iters"]),
    items_label="mma.sync instructions",
    flush_l2=False,
)

WGMMA = Benchmark(
    name="wgmma_bf16",
    match="*_wgmma_bf16",
    inputs=_wg_inputs,
    outputs={"d": OutputSpec(shape=lambda s: (WG_BLOCKS, WG_BM, WG_BN), dtype="float32")},
    reference=_wg_reference,
    launch=_launch_wgmma,
    flops=wgmma_flops,
    bytes=lambda s: float(WG_BLOCKS * WG_BM * WG_BN * 4),
    work_convention=(
        "524288 FLOPs per wgmma m64n256k16 (2 x 64 x 256 x 16), 4 per iteration per "
        "warpgroup, 2 warpgroups x 132 blocks; bytes = the fp32 accumulators written once"
    ),
    tolerance=1e-6,
    tolerance_reason=(
        "operands are integers in {-1, 0, 1} and every iteration restarts the accumulator, so "
        "the output is A @ B over k = 64, integers below 2^7, exact however the tensor cores "
        "round their additions; a wrong descriptor or swizzle gives errors of order 1"
    ),
    shapes=[{"iters": WG_ITERS}],
    headline={"iters": WG_ITERS},
    # No compute ceiling: a loop with no memory traffic may beat the cuBLAS GEMM, and a
    # figure above a declared ceiling is refused. The library figure is the comparison.
    roofline=Roofline(bandwidth=None, compute=None),
    baselines=(
        LibraryBaseline(
            name="cuBLAS bf16 GEMM (torch.matmul, 8448x8192x8192, same FLOPs)",
            make=cublas_same_flops(wgmma_library_shape),
        ),
    ),
    version_options={"02_wgmma_bf16": ("-arch=sm_90a",)},
    items=lambda s: float(WG_BLOCKS * 2 * 4 * s["iters"]),
    items_label="wgmma instructions",
    flush_l2=False,
)

WGMMA_FP8 = Benchmark(
    name="wgmma_fp8",
    match="*_wgmma_fp8",
    inputs=_f8_inputs,
    outputs={"d": OutputSpec(shape=lambda s: (WG_BLOCKS, WG_BM, WG_BN), dtype="float32")},
    reference=_f8_reference,
    launch=_launch_f8,
    flops=wgmma_fp8_flops,
    bytes=lambda s: float(WG_BLOCKS * WG_BM * WG_BN * 4),
    work_convention=(
        "1048576 FLOPs per wgmma m64n256k32 e4m3 (2 x 64 x 256 x 32), 4 per iteration per "
        "warpgroup, 2 warpgroups x 132 blocks; bytes = the fp32 accumulators written once"
    ),
    tolerance=1e-6,
    tolerance_reason=(
        "operands are integers in {-1, 0, 1} and every iteration restarts the accumulator, so "
        "the output is A @ B over k = 128, integers below 2^8, exact even with the reduced "
        "accumulation width of fp8 wgmma; a wrong layout gives errors of order 1"
    ),
    shapes=[{"iters": F8_ITERS}],
    headline={"iters": F8_ITERS},
    roofline=Roofline(bandwidth=None, compute=None),
    baselines=(
        LibraryBaseline(
            name="cuBLASLt fp8 GEMM (torch._scaled_mm, 8448x8192x16384, same FLOPs)",
            make=scaled_mm(wgmma_fp8_library_shape),
        ),
    ),
    version_options={"03_wgmma_fp8": ("-arch=sm_90a",)},
    items=lambda s: float(WG_BLOCKS * 2 * 4 * s["iters"]),
    items_label="wgmma instructions",
    flush_l2=False,
)

MMA_SYNC_FP8 = Benchmark(
    name="mma_sync_fp8",
    match="*_mma_sync_fp8",
    inputs=_mma_f8_inputs,
    outputs={"d": OutputSpec(shape=lambda s: (MMA_WARPS, F8_CHAINS, 16, 8), dtype="float32")},
    reference=_mma_f8_reference,
    launch=_launch_mma_f8,
    flops=mma_fp8_flops,
    bytes=lambda s: float(MMA_WARPS * F8_CHAINS * 128 * 4),
    work_convention=(
        "8192 FLOPs per mma.sync.m16n8k32 e4m3 (2 x 16 x 8 x 32), 2 per chain per iteration, "
        "4 chains per warp, 4224 warps (the 4 final MMAs per warp not counted); bytes = the "
        "fp32 accumulators written once"
    ),
    tolerance=1e-6,
    tolerance_reason=(
        "operands are integers in {-1, 0, 1}: the output is (1 + the loop's sign sum) x A @ B_j, "
        "integers below 2^19 built from exact products and fp32 additions of integers, so "
        "exact; a wrong fragment or a lost MMA gives errors of order 1 or more"
    ),
    shapes=[{"iters": F8_MMA_ITERS}],
    headline={"iters": F8_MMA_ITERS},
    roofline=Roofline(bandwidth=None, compute=None),
    baselines=(
        LibraryBaseline(
            name="cuBLASLt fp8 GEMM (torch._scaled_mm, 8448x8192x8192, same FLOPs)",
            make=scaled_mm(mma_fp8_library_shape),
        ),
    ),
    items=lambda s: float(MMA_WARPS * F8_CHAINS * 2 * s["iters"]),
    items_label="mma.sync instructions",
    flush_l2=False,
)

SUITE = Suite(
    topic="tensorcore",
    benchmarks=[MMA_SYNC, WGMMA, WGMMA_FP8, MMA_SYNC_FP8],
    description=(
        "Tensor-core peak: bf16 and fp8 mma.sync from registers, bf16 and fp8 wgmma from "
        "shared memory, each against the same run's cuBLAS GEMM of the same FLOPs."
    ),
)
