"""Arithmetic pipe throughput: FP32, FP16x2 and FP64 FMA and INT32 multiply-add, no memory
traffic.

Every version runs 8 independent chains per thread on a full GPU (1056 blocks of 256
threads, 8 per SM on an H200), so the figure is the pipe's issue rate. There is no library
to compare with and no same-run ceiling that bounds these loops (cuBLAS SGEMM is slower than
an FMA loop): the capsule compares `tflops` with SM count x clock x lanes x ops per lane.
CuPy is imported inside the functions: this module is imported without a GPU.
"""

from __future__ import annotations

from typing import Any

from curriculum.bench import kit
from curriculum.bench.api import (
    Arrays,
    Benchmark,
    OutputSpec,
    Roofline,
    Shape,
    Suite,
    Version,
)

SMS = 132  # H200: the grid is fixed, so the work never depends on the device
THREADS = 256
BLOCKS = SMS * 8
TOTAL_THREADS = BLOCKS * THREADS  # 270336
CHAINS = 8

FMA_B = 0.9999  # rounded to fp32 in 01, as the kernel's constant B
FMA_C = 1.0e-4
HALF_B = 0.75
LCG_M = 1664525
LCG_K = 1013904223


def fp32(v: float) -> float:
    import numpy

    return float(numpy.float32(v))


def fma_closed_form(a0: Any, iters: int, b: float, c: float) -> Any:
    """a_K of a -> b a + c in float64: F + b^K (a0 - F), F = c / (1 - b)."""
    fixed = c / (1.0 - b)
    return fixed + b**iters * (a0 - fixed)


def affine_power(m: int, k: int, iters: int) -> tuple[int, int]:
    """(M_K, K_K) with a -> m a + k applied `iters` times = a -> M_K a + K_K, mod 2^32."""
    mask = (1 << 32) - 1
    rm, rk = 1, 0  # identity
    bm, bk = m & mask, k & mask  # the map raised to the current power of two
    n = iters
    while n:
        if n & 1:
            rm, rk = (bm * rm) & mask, (bm * rk + bk) & mask  # apply base after result
        bm, bk = (bm * bm) & mask, (bm * bk + bk) & mask
        n >>= 1
    return rm, rk


def _starts(xp: Any, x0: Any, step: float) -> Any:
    return x0[:, None] + step * xp.arange(CHAINS, dtype=xp.float64)[None, :]


# --- FP32 --------------------------------------------------------------------


def _fp32_inputs(shape: Shape, rng: Any) -> Arrays:
    import cupy

    return {"x": rng.random(TOTAL_THREADS, dtype=cupy.float32)}


def _fp32_reference(x64: Arrays, shape: Shape) -> Arrays:
    import cupy

    a0 = _starts(cupy, x64["x"], 0.125)
    return {"out": fma_closed_form(a0, shape["iters"], fp32(FMA_B), fp32(FMA_C))}


def _launch_fp32(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    kit.kernel(module, version.name)(
        (BLOCKS,), (THREADS,), (arrays["x"], arrays["out"], numpy.int32(shape["iters"]))
    )


FP32_FMA = Benchmark(
    name="fp32_fma",
    match="*_fp32_fma",
    inputs=_fp32_inputs,
    outputs={"out": OutputSpec(shape=lambda s: (TOTAL_THREADS, CHAINS), dtype="float32")},
    reference=_fp32_reference,
    launch=_launch_fp32,
    flops=lambda s: 2.0 * TOTAL_THREADS * CHAINS * s["iters"],
    bytes=lambda s: 4.0 * TOTAL_THREADS * (1 + CHAINS),
    work_convention="an FMA is 2 FLOPs; 270336 threads x 8 chains x iters FMAs; bytes = x "
    "read once, the chains written once",
    tolerance=2e-3,
    tolerance_reason=(
        "each fp32 FMA rounds once, by at most 2^-24 of a value below 2, and the map "
        "a -> 0.9999 a + 1e-4 shrinks earlier errors by 0.9999 a step: the error stays "
        "below 2^-23 / 1e-4 = 1.2e-3 of values near 1 (a replay in NumPy lands near 1e-5)"
    ),
    shapes=[{"iters": 8192}],
    headline={"iters": 8192},
    roofline=Roofline(bandwidth=None, compute=None),
    items=lambda s: float(TOTAL_THREADS * CHAINS * s["iters"]),
    items_label="FMAs",
    flush_l2=False,
)


# --- FP16x2 ------------------------------------------------------------------


def _fp16_inputs(shape: Shape, rng: Any) -> Arrays:
    import cupy

    # c in [0.125, 0.25): the fixed point 4c lies in [0.5, 1)
    return {"x": 0.125 + 0.125 * rng.random((TOTAL_THREADS, 2), dtype=cupy.float32)}


def _fp16_reference(x64: Arrays, shape: Shape) -> Arrays:
    import cupy

    c = x64["x"].astype(cupy.float16).astype(cupy.float64)  # the kernel's __floats2half2_rn
    j = cupy.arange(CHAINS, dtype=cupy.float64)
    a0 = cupy.stack([0.0625 * j, 0.0625 * (j + 1)], axis=-1)[None, :, :]
    c = c[:, None, :]
    return {"out": fma_closed_form(a0, shape["iters"], HALF_B, c)}


def _launch_fp16(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    kit.kernel(module, version.name)(
        (BLOCKS,), (THREADS,), (arrays["x"], arrays["out"], numpy.int32(shape["iters"]))
    )


FP16X2_FMA = Benchmark(
    name="fp16x2_fma",
    match="*_fp16x2_fma",
    inputs=_fp16_inputs,
    outputs={"out": OutputSpec(shape=lambda s: (TOTAL_THREADS, CHAINS, 2), dtype="float16")},
    reference=_fp16_reference,
    launch=_launch_fp16,
    flops=lambda s: 4.0 * TOTAL_THREADS * CHAINS * s["iters"],
    bytes=lambda s: 8.0 * TOTAL_THREADS + 4.0 * TOTAL_THREADS * CHAINS,
    work_convention="an HFMA2 is 4 FLOPs (two FMAs); 270336 threads x 8 chains x iters; "
    "bytes = x read once (2 floats a thread), the half2 chains written once",
    tolerance=3e-3,
    tolerance_reason=(
        "the chains converge to the fixed point 4c, exact in fp16; where the last roundings "
        "stall beside it they stop at most two fp16 ulps away, 2 x 2^-10 = 2e-3 relative"
    ),
    shapes=[{"iters": 8192}],
    headline={"iters": 8192},
    roofline=Roofline(bandwidth=None, compute=None),
    items=lambda s: float(TOTAL_THREADS * CHAINS * s["iters"]),
    items_label="HFMA2 instructions",
    flush_l2=False,
)


# --- INT32 -------------------------------------------------------------------


def _int_inputs(shape: Shape, rng: Any) -> Arrays:
    import cupy

    return {"x": rng.integers(0, 1 << 32, size=TOTAL_THREADS, dtype=cupy.int64).astype(cupy.uint32)}


def _int_reference(x64: Arrays, shape: Shape) -> Arrays:
    import cupy

    m_k, k_k = affine_power(LCG_M, LCG_K, shape["iters"])
    x0 = x64["x"].astype(cupy.uint64)
    j = cupy.arange(CHAINS, dtype=cupy.uint64) * cupy.uint64(0x9E3779B9)
    a0 = (x0[:, None] + j[None, :]) & cupy.uint64(0xFFFFFFFF)
    out = (a0 * cupy.uint64(m_k) + cupy.uint64(k_k)) & cupy.uint64(0xFFFFFFFF)
    return {"out": out.astype(cupy.float64)}


def _launch_int(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    kit.kernel(module, version.name)(
        (BLOCKS,),
        (THREADS,),
        (
            arrays["x"],
            arrays["out"],
            numpy.int32(shape["iters"]),
            numpy.uint32(LCG_M),
            numpy.uint32(LCG_K),
        ),
    )


INT32_MAD = Benchmark(
    name="int32_mad",
    match="*_int32_mad",
    inputs=_int_inputs,
    outputs={"out": OutputSpec(shape=lambda s: (TOTAL_THREADS, CHAINS), dtype="uint32")},
    reference=_int_reference,
    launch=_launch_int,
    flops=lambda s: 2.0 * TOTAL_THREADS * CHAINS * s["iters"],
    bytes=lambda s: 4.0 * TOTAL_THREADS * (1 + CHAINS),
    work_convention="a 32-bit multiply-add counted as 2 integer ops (reported in the tflops "
    "field as Tops/s); 270336 threads x 8 chains x iters; bytes = x read, chains written once",
    tolerance=0.0,
    tolerance_reason="integer arithmetic mod 2^32 is exact: any difference is a lost or extra step",
    shapes=[{"iters": 4096}],
    headline={"iters": 4096},
    roofline=Roofline(bandwidth=None, compute=None),
    items=lambda s: float(TOTAL_THREADS * CHAINS * s["iters"]),
    items_label="IMADs",
    flush_l2=False,
)


# --- FP64 --------------------------------------------------------------------


def _fp64_inputs(shape: Shape, rng: Any) -> Arrays:
    import cupy

    return {"x": rng.random(TOTAL_THREADS, dtype=cupy.float64)}


def _fp64_reference(x64: Arrays, shape: Shape) -> Arrays:
    import cupy

    a0 = _starts(cupy, x64["x"], 0.125)
    return {"out": fma_closed_form(a0, shape["iters"], FMA_B, FMA_C)}


FP64_FMA = Benchmark(
    name="fp64_fma",
    match="*_fp64_fma",
    inputs=_fp64_inputs,
    outputs={"out": OutputSpec(shape=lambda s: (TOTAL_THREADS, CHAINS), dtype="float64")},
    reference=_fp64_reference,
    launch=_launch_fp32,  # the same arguments: x, out, iters
    flops=lambda s: 2.0 * TOTAL_THREADS * CHAINS * s["iters"],
    bytes=lambda s: 8.0 * TOTAL_THREADS * (1 + CHAINS),
    work_convention="a DFMA is 2 FLOPs; 270336 threads x 8 chains x iters; bytes = x read "
    "once, the chains written once",
    tolerance=1e-10,
    tolerance_reason=(
        "each DFMA rounds once (2^-53 relative) and the map shrinks earlier errors by 0.9999 "
        "a step: at most 2^-52 / 1e-4 = 2.2e-12 of values near 1 from the closed form"
    ),
    shapes=[{"iters": 4096}],
    headline={"iters": 4096},
    roofline=Roofline(bandwidth=None, compute=None),
    items=lambda s: float(TOTAL_THREADS * CHAINS * s["iters"]),
    items_label="DFMAs",
    flush_l2=False,
)

SUITE = Suite(
    topic="pipes",
    benchmarks=[FP32_FMA, FP16X2_FMA, INT32_MAD, FP64_FMA],
    description=(
        "FP32, FP16x2, FP64 and INT32 pipe throughput against SM count x clock x lanes: loops of "
        "independent multiply-adds with no memory traffic."
    ),
)
