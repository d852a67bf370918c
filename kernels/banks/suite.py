"""Shared-memory bank conflicts: one SM, one warp-wide load per item, a stride per shape.

`01_smem_stride` runs one block of 32 warps; lane l of each warp reads word
l * stride of a 2048-word shared table, 8 independent loads a loop trip. The
stride decides how many lanes share a bank (1, 2, 4, 8, 16, 32 or, for
stride 33, none), and the case's `cycles_per_item` is the SM clocks each
warp-wide load takes: the number of passes ("wavefronts") the conflicts force.
CuPy is imported inside functions only.
"""

from __future__ import annotations

from typing import Any

from curriculum.bench.api import Arrays, Benchmark, OutputSpec, Roofline, Shape, Suite, Version
from curriculum.bench.kit import kernel

BLOCK = 1024  # threads of the one block; matches BLOCK in the .cu file
WARPS = BLOCK // 32
WORDS = 2048  # shared table size in 4-byte words; matches WORDS
UNROLL = 8  # independent loads a loop trip; matches UNROLL
ITERS = 1536  # loop trips: 32 x 1536 x 8 = 393,216 warp-wide loads, ~0.2 ms at stride 1
BANKS = 32

STRIDES = (1, 2, 4, 8, 16, 32, 33)
HEADLINE_STRIDE = 32


def _xp(a: Any) -> Any:
    """The array module of `a`: CuPy on the device, NumPy in the CPU-side tests."""
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    import numpy

    return numpy


def loads(shape: Shape) -> int:
    """Warp-wide shared loads one launch issues on its one SM."""
    return WARPS * ITERS * UNROLL


def max_word(stride: int) -> int:
    """The highest word any lane reads at this stride."""
    return 31 * stride + UNROLL - 1


def wavefronts(stride: int) -> int:
    """Passes a warp-wide 4-byte load at this stride needs: the most distinct words
    that any one bank is asked for (the bank-conflict degree)."""
    words = [lane * stride for lane in range(32)]
    per_bank: dict[int, set[int]] = {}
    for w in words:
        per_bank.setdefault(w % BANKS, set()).add(w)
    return max(len(ws) for ws in per_bank.values())


def _inputs(shape: Shape, rng: Any) -> Arrays:
    import cupy

    # Values 1..999: 1536 trips x 8 loads x 999 stays far below 2^32, so sums are exact.
    return {"table": rng.integers(1, 1000, size=WORDS).astype(cupy.uint32)}


def _reference(x64: Arrays, shape: Shape) -> Arrays:
    table = x64["table"]
    xp = _xp(table)
    stride = shape["stride"]
    idx = xp.arange(32)[:, None] * stride + xp.arange(UNROLL)[None, :]
    per_lane = table[idx].sum(axis=1) * ITERS
    return {"out": xp.tile(per_lane, WARPS)}


def _launch(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    stride = shape["stride"]
    if stride < 1 or max_word(stride) >= WORDS:
        raise ValueError(f"{version.stem}: stride {stride} reads past the {WORDS}-word table")
    kernel(module, version.name)(
        (1,),
        (BLOCK,),
        (arrays["table"], arrays["out"], numpy.int32(stride), numpy.int32(ITERS)),
    )


SMEM_STRIDE = Benchmark(
    name="smem_stride",
    match="*_smem_stride",
    inputs=_inputs,
    outputs={"out": OutputSpec(shape=lambda s: (BLOCK,), dtype="uint32")},
    reference=_reference,
    launch=_launch,
    flops=lambda s: 0.0,
    bytes=lambda s: 128.0 * loads(s),
    work_convention=(
        "no FLOPs; bytes are those the lanes ask shared memory for: 32 lanes x 4 bytes a "
        "warp-wide load, 32 warps x 1536 trips x 8 loads (393,216 loads, 50.3 MB) on one SM"
    ),
    tolerance=0.0,
    tolerance_reason=(
        "integer sums of 1536 x 8 table words, each below 1000: exact in uint32 and in "
        "float64, so any difference means a lane read a wrong word"
    ),
    shapes=[{"stride": s} for s in STRIDES],
    headline={"stride": HEADLINE_STRIDE},
    roofline=Roofline(bandwidth=None, compute=None),
    items=loads,
    items_label="warp-wide shared loads on one SM",
    flush_l2=False,
)


SUITE = Suite(
    topic="banks",
    benchmarks=[SMEM_STRIDE],
    description=(
        "Shared-memory bank conflicts: the clocks one warp-wide load takes as the stride "
        "between lanes goes from 1 (no conflict) to 32 (all lanes on one bank) and 33."
    ),
)
