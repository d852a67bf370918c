"""Occupancy sweeps: how many resident warps a memory-bound and a latency-bound kernel need.

The resident warps per SM are set with dynamic shared memory, not by shrinking the grid: a
block of 4 warps asks for 228 KiB / b - 1 KiB, so exactly b blocks fit on an SM (the
shared memory of an H100/H200 SM is 228 KiB, and each block also costs 1 KiB of system use),
and the grid is 132 x b blocks: one resident set, every SM alike.
CuPy is imported inside the functions: this module is imported without a GPU.
"""

from __future__ import annotations

import contextlib
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

SMS = 132  # H200
THREADS = 128  # 4 warps per block
SM_SMEM = 228 * 1024  # shared memory per SM on sm_90
BLOCK_RESERVED = 1024  # shared memory the system keeps per resident block
WARPS = [4, 8, 16, 32, 64]
HEADLINE = {"warps_per_sm": 64}


def blocks_per_sm(shape: Shape) -> int:
    w = shape["warps_per_sm"]
    if w % (THREADS // 32) or not 1 <= w // (THREADS // 32) <= 16:
        raise ValueError(f"warps_per_sm must be 4, 8, ..., 64 in steps of 4 warps, got {w}")
    return w // (THREADS // 32)


def smem_per_block(shape: Shape) -> int:
    """Dynamic shared memory that lets exactly blocks_per_sm blocks share an SM."""
    return SM_SMEM // blocks_per_sm(shape) - BLOCK_RESERVED


def grid(shape: Shape) -> int:
    return SMS * blocks_per_sm(shape)


def _limit_occupancy(fn: Any, shape: Shape) -> int:
    smem = smem_per_block(shape)
    if fn.max_dynamic_shared_size_bytes < smem:
        fn.max_dynamic_shared_size_bytes = smem
    # All of the unified L1/shared array as shared memory, so the request is the only limit
    # (an older CuPy without the attribute leaves the choice to the driver).
    with contextlib.suppress(AttributeError, TypeError, ValueError):
        fn.preferred_shared_memory_carveout = 100
    return smem


# --- memory-bound: a streaming read ------------------------------------------------

READ_WORDS = 1 << 28  # 1 GiB of uint32


def _read_inputs(shape: Shape, rng: Any) -> Arrays:
    import cupy

    return {"src": rng.integers(0, 1 << 16, size=READ_WORDS).astype(cupy.uint32)}


def _read_reference(x64: Arrays, shape: Shape) -> Arrays:
    return {"out": x64["src"].sum().reshape(1)}


def _launch_read(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    fn = kit.kernel(module, version.name)
    smem = _limit_occupancy(fn, shape)
    out = arrays["out"]
    out.fill(0)  # the kernel accumulates with atomics
    fn(
        (grid(shape),),
        (THREADS,),
        (arrays["src"], out, numpy.int64(READ_WORDS // 4)),
        shared_mem=smem,
    )


STREAM_READ = Benchmark(
    name="stream_read",
    match="*_stream_read",
    inputs=_read_inputs,
    outputs={"out": OutputSpec(shape=lambda s: (1,), dtype="uint64")},
    reference=_read_reference,
    launch=_launch_read,
    flops=lambda s: 0.0,
    bytes=lambda s: 4.0 * READ_WORDS + 8.0,
    work_convention="bytes = 1 GiB read once (every word summed) plus the 8-byte total",
    tolerance=0.0,
    tolerance_reason="an integer sum below 2^45 in 64 bits: exact, any difference is a bug",
    shapes=[{"warps_per_sm": w} for w in WARPS],
    headline=HEADLINE,
    roofline=Roofline(bandwidth="read"),
)


# --- latency-bound: one dependent FMA chain per thread ---------------------------

FMA_ITERS = 65536
FMA_B = 0.9999
FMA_C = 1.0e-4


def threads(shape: Shape) -> int:
    return grid(shape) * THREADS


def fma_closed_form(a0: Any, iters: int, b: float, c: float) -> Any:
    """a_K of a -> b a + c in float64: F + b^K (a0 - F), F = c / (1 - b)."""
    fixed = c / (1.0 - b)
    return fixed + b**iters * (a0 - fixed)


def _fma_inputs(shape: Shape, rng: Any) -> Arrays:
    import cupy

    return {"x": rng.random(threads(shape), dtype=cupy.float32)}


def _fma_reference(x64: Arrays, shape: Shape) -> Arrays:
    import numpy

    b, c = float(numpy.float32(FMA_B)), float(numpy.float32(FMA_C))
    return {"out": fma_closed_form(x64["x"], FMA_ITERS, b, c)}


def _launch_fma(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    fn = kit.kernel(module, version.name)
    smem = _limit_occupancy(fn, shape)
    fn(
        (grid(shape),),
        (THREADS,),
        (arrays["x"], arrays["out"], numpy.int32(FMA_ITERS)),
        shared_mem=smem,
    )


DEPENDENT_FMA = Benchmark(
    name="dependent_fma",
    match="*_dependent_fma",
    inputs=_fma_inputs,
    outputs={"out": OutputSpec(shape=lambda s: (threads(s),), dtype="float32")},
    reference=_fma_reference,
    launch=_launch_fma,
    flops=lambda s: 2.0 * threads(s) * FMA_ITERS,
    bytes=lambda s: 8.0 * threads(s),
    work_convention=f"an FMA is 2 FLOPs; {FMA_ITERS} dependent FMAs per thread, 132 x "
    "warps_per_sm x 32 threads; bytes = one float read and one written per thread",
    tolerance=2e-3,
    tolerance_reason=(
        "each fp32 FMA rounds once, by at most 2^-24 of a value below 2, and the map "
        "a -> 0.9999 a + 1e-4 shrinks earlier errors by 0.9999 a step: the error stays "
        "below 2^-23 / 1e-4 = 1.2e-3 of values near 1"
    ),
    shapes=[{"warps_per_sm": w} for w in WARPS],
    headline=HEADLINE,
    roofline=Roofline(bandwidth=None, compute=None),
    items=lambda s: float(threads(s) * FMA_ITERS),
    items_label="FMAs",
    flush_l2=False,
)

SUITE = Suite(
    topic="occupancy",
    benchmarks=[STREAM_READ, DEPENDENT_FMA],
    description=(
        "Resident warps per SM against throughput: a streaming read (bandwidth needs bytes in "
        "flight) and a dependent FMA chain (latency needs warps to switch to)."
    ),
)
