"""Atomic contention: 2^22 global atomicAdds spread over 1 to 2^20 counters.

`01_global_add` issues one atomicAdd a thread a trip; `02_warp_aggregated`
sums each warp's 32 values with shuffles and issues one atomicAdd a warp a
trip. Both produce the same counters: warp-trip e (e = trip * warps + warp)
adds the sum over its lanes of salt[lane] + trip to counter e mod
`addresses`. `03_global_add_lanes` makes the same additions lane by lane, each
thread-trip g on counter g mod `addresses`, so the lanes of a warp hit different
words. `items` counts the 2^22 logical additions for every version, so their
`ns_per_item` compare directly. CuPy is imported inside functions only.
"""

from __future__ import annotations

from typing import Any

from curriculum.bench.api import Arrays, Benchmark, OutputSpec, Roofline, Shape, Suite, Version
from curriculum.bench.kit import kernel

BLOCK = 256  # matches BLOCK in the .cu files
WARPS_PER_BLOCK = BLOCK // 32
BLOCKS = 1024
THREADS = BLOCKS * BLOCK  # 2^18
WARPS = THREADS // 32  # 8192
ITERS = 16  # trips a thread
ADDS = THREADS * ITERS  # 2^22 additions a launch
WARP_TRIPS = WARPS * ITERS  # 131,072

ADDRESSES = (1, 32, 1024, 1 << 20)
HEADLINE_ADDRESSES = 1


def _xp(a: Any) -> Any:
    """The array module of `a`: CuPy on the device, NumPy in the CPU-side tests."""
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    import numpy

    return numpy


def additions(shape: Shape) -> int:
    return ADDS


def _inputs(shape: Shape, rng: Any) -> Arrays:
    import cupy

    # Small values: the largest counter (addresses = 1) is 131,072 x 7 x 32 + 32 x 8192 x 120,
    # about 6.1e7, far below 2^32 and exact in float64.
    return {"salt": rng.integers(1, 8, size=32).astype(cupy.uint32)}


def _reference(x64: Arrays, shape: Shape) -> Arrays:
    """01 and 02: warp-trip e adds the sum of its lanes' values to counter e mod addresses."""
    salt = x64["salt"]
    xp = _xp(salt)
    addresses = shape["addresses"]
    event = xp.arange(WARP_TRIPS)
    trip = event // WARPS
    per_event = salt.sum() + 32.0 * trip  # the sum over one warp's lanes of salt[l] + trip
    counts = xp.bincount(event & (addresses - 1), weights=per_event, minlength=addresses)
    return {"counters": counts.astype(xp.float64)}


def _reference_lanes(x64: Arrays, shape: Shape) -> Arrays:
    """03: thread-trip g (lane g mod 32) adds salt[lane] + trip to counter g mod addresses."""
    salt = x64["salt"]
    xp = _xp(salt)
    addresses = shape["addresses"]
    g = xp.arange(ADDS)
    trip = g // THREADS
    values = salt[g % 32] + trip
    counts = xp.bincount(g & (addresses - 1), weights=values, minlength=addresses)
    return {"counters": counts.astype(xp.float64)}


def _launch(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    addresses = shape["addresses"]
    if addresses < 1 or addresses & (addresses - 1):
        raise ValueError(f"{version.stem}: addresses={addresses} is not a power of two")
    counters = arrays["counters"]
    counters.fill(0)  # every launch adds into zeroed counters: one memset, timed with it
    kernel(module, version.name)(
        (BLOCKS,),
        (BLOCK,),
        (arrays["salt"], counters, numpy.uint32(addresses), numpy.int32(ITERS)),
    )


def _benchmark(name: str, match: str, convention: str, reference: Any = _reference) -> Benchmark:
    return Benchmark(
        name=name,
        match=match,
        inputs=_inputs,
        outputs={"counters": OutputSpec(shape=lambda s: (s["addresses"],), dtype="uint32")},
        reference=reference,
        launch=_launch,
        flops=lambda s: 0.0,
        bytes=lambda s: 0.0,
        work_convention=convention,
        tolerance=0.0,
        tolerance_reason=(
            "integer sums below 2^32, exact in uint32 and in float64: any difference is a lost, "
            "doubled or misplaced addition"
        ),
        shapes=[{"addresses": a} for a in ADDRESSES],
        headline={"addresses": HEADLINE_ADDRESSES},
        roofline=Roofline(bandwidth=None, compute=None),
        items=additions,
        items_label="atomic additions (logical: one a thread a trip)",
        flush_l2=False,
    )


GLOBAL_ADD = _benchmark(
    "global_add",
    "*_global_add",
    "no FLOPs or bytes counted; 2^22 atomicAdds of 4 bytes (2^18 threads x 16 trips), "
    "plus one memset of the counters (4 x addresses bytes) in the timed launch",
)
WARP_AGGREGATED = _benchmark(
    "warp_aggregated",
    "*_warp_aggregated",
    "no FLOPs or bytes counted; the same 2^22 additions as global_add, issued as 131,072 "
    "atomicAdds (one a warp a trip) after a 5-step shuffle sum, plus the counters' memset",
)

GLOBAL_ADD_LANES = _benchmark(
    "global_add_lanes",
    "*_global_add_lanes",
    "no FLOPs or bytes counted; the same 2^22 atomicAdds of 4 bytes as global_add, each "
    "thread-trip on its own counter (lanes of a warp on different words), plus the memset",
    reference=_reference_lanes,
)

SUITE = Suite(
    topic="atomics",
    benchmarks=[GLOBAL_ADD, WARP_AGGREGATED, GLOBAL_ADD_LANES],
    description=(
        "Atomic contention: global atomicAdd over 1 to 2^20 counters, one a thread against "
        "one a warp after a shuffle reduction, and with a warp's lanes on different counters."
    ),
)
