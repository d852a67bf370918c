"""Pointer-chase latency over a working-set sweep: L1, L2 and HBM plateaus in ns and cycles.

One random cyclic permutation of 128-byte slots per working set, each slot holding the byte
offset of the next from the buffer's start; 128 one-thread chasers walk it from evenly spaced
starting points, one add and one dependent load per step. Offsets, not device addresses: the
harness's re-check writes fresh values into the same buffer, and the chain must mean the same
there (addresses would point into the buffer the fresh values were made in). The L2 is not flushed
between repetitions (a warm cache is what a plateau measures); the chasers together touch
enough lines per launch that working sets beyond the L2 are read from HBM every time.
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

SLOT = 128  # bytes per slot: one L1 line
WORDS_PER_SLOT = SLOT // 8
CHASERS = 128  # one-thread blocks, as CHASERS in the .cu files
STEPS = 32768  # dependent loads per chaser per launch
KIB = [16, 64, 192, 1024, 8192, 32768, 49152, 65536, 262144, 1048576]
HEADLINE = {"kib": 1048576}


def slots(shape: Shape) -> int:
    n = shape["kib"] * 1024
    if n % SLOT:
        raise ValueError(f"working set of {shape['kib']} KiB is not a whole number of slots")
    return n // SLOT


def chain(order: Any, xp: Any) -> Any:
    """The slot that follows each slot: order[i] -> order[i + 1], the last back to the first."""
    follow = xp.empty_like(order)
    follow[order] = xp.roll(order, -1)
    return follow


def start_positions(n_slots: int) -> list[int]:
    """Where each chaser starts, as a position along the cycle: evenly spaced."""
    return [c * n_slots // CHASERS for c in range(CHASERS)]


def walk_end(order: Any, n_slots: int, steps: int, xp: Any) -> Any:
    """Byte offset of the slot each chaser reaches after `steps` loads."""
    pos = xp.asarray(start_positions(n_slots), dtype=xp.int64)
    return order[(pos + steps) % n_slots] * SLOT


def _inputs(shape: Shape, rng: Any) -> Arrays:
    import cupy

    n = slots(shape)
    order = cupy.argsort(rng.random(n)).astype(cupy.int64)  # a random cycle through all slots
    nxt = cupy.zeros(n * WORDS_PER_SLOT, dtype=cupy.uint64)
    follow = chain(order, cupy)
    # Byte offsets of the next slot, valid in any buffer these values are copied into.
    nxt[cupy.arange(n, dtype=cupy.int64) * WORDS_PER_SLOT] = follow.astype(
        cupy.uint64
    ) * cupy.uint64(SLOT)
    pos = cupy.asarray(start_positions(n), dtype=cupy.int64)
    starts = (order[pos] * SLOT).astype(cupy.uint64)
    return {"next": nxt, "starts": starts, "order": order}


def _reference(x64: Arrays, shape: Shape) -> Arrays:
    import cupy

    order = x64["order"].astype(cupy.int64)
    return {"out": walk_end(order, slots(shape), STEPS, cupy).astype(cupy.float64)}


def _launch(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    kit.kernel(module, version.name)(
        (CHASERS,), (1,), (arrays["next"], arrays["starts"], arrays["out"], numpy.int32(STEPS))
    )


def _bench(name: str, match: str, bypass: str) -> Benchmark:
    return Benchmark(
        name=name,
        match=match,
        inputs=_inputs,
        outputs={"out": OutputSpec(shape=lambda s: (CHASERS,), dtype="uint64")},
        reference=_reference,
        launch=_launch,
        flops=lambda s: 0.0,
        bytes=lambda s: 8.0 * CHASERS * STEPS,
        work_convention=(
            f"{STEPS} dependent 8-byte loads per chaser, {CHASERS} chasers; an item is one "
            f"load of one chain, so ns_per_item is the latency{bypass}"
        ),
        tolerance=0.0,
        tolerance_reason="the end of a walk is an address: any difference is a wrong or lost step",
        shapes=[{"kib": k} for k in KIB],
        headline=HEADLINE,
        roofline=Roofline(bandwidth=None, compute=None),
        items=lambda s: float(STEPS),
        items_label="dependent loads (per chain)",
        flush_l2=False,
    )


CHASE = _bench("pointer_chase", "*_pointer_chase", "")
CHASE_CG = _bench("pointer_chase_cg", "*_pointer_chase_cg", " (L1 bypassed with ld.global.cg)")

SUITE = Suite(
    topic="latency",
    benchmarks=[CHASE, CHASE_CG],
    description=(
        "Load-to-use latency of L1, L2 and HBM: a random pointer chase over working sets "
        "from 16 KiB to 1 GiB, in ns and cycles per dependent load."
    ),
)
