"""Read bandwidth of each level: shared memory, L1, L2 and HBM, with 128-bit loads.

Four benchmarks, one per level, because each needs its own cache policy: the shared-memory,
L1 and L2 kernels re-read data that is already on chip (the L2 is not flushed between
repetitions), the HBM kernel streams 1 GiB from a flushed L2. Every kernel sums the words it
read, so the check proves each load happened and read the right vector.
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

SMS = 132  # H200
THREADS = 256
VEC = 16  # bytes per uint4
ON_CHIP_BLOCKS = SMS * 16  # 01, 02: two waves of 8 blocks per SM
ON_CHIP_VECS = 4  # uint4 per thread per pass in 01, 02: a 16 KiB tile
L2_VECS = 2  # uint4 per thread per pass in 03: 8 KiB per block
HBM_VECS = 8  # uint4 per thread in 04: 32 KiB per block
PASS_ROTATION = 32  # vectors the read pattern advances per pass, as in 01-03


def read_counts(threads: int, vecs: int, passes: int, xp: Any) -> Any:
    """counts[t, i]: how often thread t reads vector i of its tile or chunk, from the kernels'
    index formula (t + 32 p + 256 k) mod (threads * vecs)."""
    chunk = threads * vecs
    t = xp.arange(threads)[:, None, None]
    p = xp.arange(passes)[None, :, None]
    k = xp.arange(vecs)[None, None, :]
    idx = (t + PASS_ROTATION * p + threads * k) % chunk
    rows = xp.broadcast_to(t, idx.shape).ravel()
    flat = rows * chunk + idx.ravel()
    counts = xp.bincount(flat, minlength=threads * chunk)
    return counts.reshape(threads, chunk).astype(xp.float64)


def _words(rng: Any, n_words: int) -> Any:
    import cupy

    return rng.integers(0, 1 << 16, size=n_words).astype(cupy.uint32)


def _vector_sums(words64: Any) -> Any:
    """Sum of the four words of every 16-byte vector."""
    return words64.reshape(-1, 4).sum(axis=1)


# --- shared memory and L1: one 16 KiB tile, re-read `passes` times --------------


def _tile_inputs(shape: Shape, rng: Any) -> Arrays:
    return {"src": _words(rng, THREADS * ON_CHIP_VECS * 4)}


def _tile_reference(x64: Arrays, shape: Shape) -> Arrays:
    import cupy

    counts = read_counts(THREADS, ON_CHIP_VECS, shape["passes"], cupy)
    per_thread = counts @ _vector_sums(x64["src"])
    return {"out": cupy.broadcast_to(per_thread, (ON_CHIP_BLOCKS, THREADS))}


def _launch_tile(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    kit.kernel(module, version.name)(
        (ON_CHIP_BLOCKS,),
        (THREADS,),
        (arrays["src"], arrays["out"], numpy.int32(shape["passes"])),
    )


def tile_bytes(shape: Shape) -> float:
    """Bytes read by the timed loop (the one-off 16 KiB fill per block is under 0.5%)."""
    return float(ON_CHIP_BLOCKS * THREADS * ON_CHIP_VECS * VEC * shape["passes"])


def _tile_bench(name: str, match: str, what: str) -> Benchmark:
    return Benchmark(
        name=name,
        match=match,
        inputs=_tile_inputs,
        outputs={"out": OutputSpec(shape=lambda s: (ON_CHIP_BLOCKS, THREADS), dtype="uint32")},
        reference=_tile_reference,
        launch=_launch_tile,
        flops=lambda s: 0.0,
        bytes=tile_bytes,
        work_convention=(
            f"bytes = {what} reads: 2112 blocks x 256 threads x 4 x 16 bytes x passes; the "
            "fill of the 16 KiB tile and the 4-byte sums are not counted"
        ),
        tolerance=0.0,
        tolerance_reason="integer sums below 2^32: exact, any difference is a wrong or lost load",
        shapes=[{"passes": 256}],
        headline={"passes": 256},
        roofline=Roofline(bandwidth=None, compute=None),
        flush_l2=False,
    )


SMEM_READ = _tile_bench("smem_read", "*_smem_read", "shared-memory")
L1_READ = _tile_bench("l1_read", "*_l1_read", "L1-resident global")


# --- L2: kib KiB re-read `passes` times with the L1 bypassed ---------------------

L2_KIB = [4096, 16384, 32768]
L2_PASSES = 256


def l2_blocks(shape: Shape) -> int:
    per_block = THREADS * L2_VECS * VEC
    if (shape["kib"] * 1024) % per_block:
        raise ValueError(f"l2_read needs kib a multiple of {per_block // 1024}")
    return shape["kib"] * 1024 // per_block


def _l2_inputs(shape: Shape, rng: Any) -> Arrays:
    return {"src": _words(rng, shape["kib"] * 256)}


def _l2_reference(x64: Arrays, shape: Shape) -> Arrays:
    import cupy

    counts = read_counts(THREADS, L2_VECS, L2_PASSES, cupy)
    chunks = _vector_sums(x64["src"]).reshape(l2_blocks(shape), THREADS * L2_VECS)
    return {"out": chunks @ counts.T}


def _launch_l2(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    kit.kernel(module, version.name)(
        (l2_blocks(shape),), (THREADS,), (arrays["src"], arrays["out"], numpy.int32(L2_PASSES))
    )


L2_READ = Benchmark(
    name="l2_read",
    match="*_l2_read",
    inputs=_l2_inputs,
    outputs={"out": OutputSpec(shape=lambda s: (l2_blocks(s), THREADS), dtype="uint32")},
    reference=_l2_reference,
    launch=_launch_l2,
    flops=lambda s: 0.0,
    bytes=lambda s: float(s["kib"] * 1024 * L2_PASSES),
    work_convention=(
        f"bytes = the working set read {L2_PASSES} times (ld.global.cg, L1 bypassed); the "
        "4-byte per-thread sums are not counted"
    ),
    tolerance=0.0,
    tolerance_reason="integer sums below 2^32: exact, any difference is a wrong or lost load",
    shapes=[{"kib": k} for k in L2_KIB],
    headline={"kib": 16384},
    roofline=Roofline(bandwidth=None, compute=None),
    flush_l2=False,
)


# --- HBM: 1 GiB read once from a flushed L2 ---------------------------------------

HBM_KIB = 1048576


def hbm_blocks(shape: Shape) -> int:
    per_block = THREADS * HBM_VECS * VEC
    if (shape["kib"] * 1024) % per_block:
        raise ValueError(f"hbm_read needs kib a multiple of {per_block // 1024}")
    return shape["kib"] * 1024 // per_block


def _hbm_inputs(shape: Shape, rng: Any) -> Arrays:
    return {"src": _words(rng, shape["kib"] * 256)}


def _hbm_reference(x64: Arrays, shape: Shape) -> Arrays:
    return {"out": x64["src"].reshape(hbm_blocks(shape), -1).sum(axis=1)}


def _launch_hbm(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    kit.kernel(module, version.name)(
        (hbm_blocks(shape),), (THREADS,), (arrays["src"], arrays["out"])
    )


HBM_READ = Benchmark(
    name="hbm_read",
    match="*_hbm_read",
    inputs=_hbm_inputs,
    outputs={"out": OutputSpec(shape=lambda s: (hbm_blocks(s),), dtype="uint32")},
    reference=_hbm_reference,
    launch=_launch_hbm,
    flops=lambda s: 0.0,
    bytes=lambda s: float(s["kib"] * 1024 + 4 * hbm_blocks(s)),
    work_convention="bytes = the buffer read once plus one 4-byte sum written per 32 KiB block",
    tolerance=0.0,
    tolerance_reason="integer sums below 2^29: exact, any difference is a wrong or lost load",
    shapes=[{"kib": HBM_KIB}],
    headline={"kib": HBM_KIB},
    roofline=Roofline(bandwidth="read"),
)

SUITE = Suite(
    topic="bandwidth",
    benchmarks=[SMEM_READ, L1_READ, L2_READ, HBM_READ],
    description=(
        "Read bandwidth per level, 128-bit loads: shared memory, L1, L2 (L1 bypassed) and "
        "HBM (1 GiB from a flushed L2)."
    ),
)
