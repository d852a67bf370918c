"""02_w4a16 variants side by side in one run: a scratch A/B, not a bench case.

Run on the GPU machine from the repository root:

    python3 scripts/gemv_w4a16_variants.py            # check, then time every variant
    python3 scripts/gemv_w4a16_variants.py emit DIR   # write each variant's .cu (no GPU)
    python3 scripts/gemv_w4a16_variants.py profile NAME   # three headline launches, for ncu

The tenth pass compares whole files, each with its own batch-1 launch:
- `recorded`: the file the bench measured before this pass (W4A16_RECORDED, default
  scratch/02_recorded.cu, a copy of the file at commit 6464693; its batch-1 launch is N / 16
  blocks of 64 threads, two warps a 16-row tile, each over half of K);
- `installed`: kernels/gemv/02_w4a16.cu as it is now (the tenth pass's "offsets once (installed)":
  the same loop with its shared-memory addresses taken once as 32-bit offsets; since the twelfth
  pass, four warps a tile). The tenth pass's rewrites below apply to that pass's file, a scratch
  copy (W4A16_TENTH, default scratch/02_offsets_once.cu);
- `parts across blocks, ...` (PARTS_EDITS): the two parts of each
  tile's K summed by warps of two different blocks, met through device memory, the split skewed
  towards the blocks placed first on an SM by B1_SKEW stages;
- `offsets once, 3-deep ring`: the installed file with STAGES = 3 (all batches), and the
  installed file launched with 5 KB of dynamic shared memory a batch-1 block that it never
  touches (the 3-deep ring's footprint, and so its shared-memory carveout, without its depth);
- `offsets once, first blocks throttled ...`: the installed file with a per-stage sleep at batch 1,
  longest for the blocks placed first, none for the last (THROTTLE);
- the dealing builds in DEALING (CTA_PER_SM in place of the file's batch-1 entry: one CTA an SM,
  whose warps take (stage, tile) items from a counter in shared memory), timed when named in
  W4A16_DEALING (separated by ';').
The eleventh pass adds batch-1 entries kept as scratch files (not in the repository; each is the
installed file with one batch-1 change, described in kernels/gemv/NOTES.md) and switched by a
constant the script rewrites: BULK (the weights, and x, by the bulk-copy engine), FINE (stages of
one piece a lane, FINE_SLOTS deep) and PRE (the zero-point offsets of x out of the stage, by
PRE_ROUTE). The twelfth pass: KSPLIT (the K split over 2, 4 or 8 warps of a tile, blocks of that
many warps; installed at 4). W4A16_ONLY (names separated by ';') times those variants alone, in
that order; a variant whose batch-1 warps would get a part stage at some checked K skips it.
Batch 4 and 16 are timed for whole files only (the rewrites change batch 1 alone). The variants
of earlier passes (x slots, scale quads, x a stage ahead, tiled scales) were rewrites of the file
before this pass and are in the history of this script.

Each variant is checked first at every shape against the float64 reference (y poisoned with
NaN, the suite's own inputs and decoder, fresh random draws), then timed by the bench's own
timer (curriculum.bench.timing: the L2 flushed before every launch, CUDA events), median of
SAMPLES launches after warm-up, in ROUNDS rounds of alternating order. The floor is the same-run
read ceiling from curriculum.bench.ceilings, measured as a bench run measures it. The bench
package needs its dependencies (pydantic) on the path, as scripts/device_sweep.sh installs them.
Writes $OUT/w4a16_variants.json (or /tmp/...).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # the bench package: its timer, ceilings and suites
SOURCE = (ROOT / "kernels/gemv/02_w4a16.cu").read_text()
# The tenth pass's rewrites (3-deep ring, padding, throttling, parts across blocks, one CTA an SM)
# anchor on the file installed then: two warps a tile, offsets once (a scratch copy of it).
TENTH = os.environ.get("W4A16_TENTH", "scratch/02_offsets_once.cu")


def tenth_source() -> str:
    return (ROOT / TENTH).read_text()
SAMPLES = int(os.environ.get("SAMPLES", "60"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))  # alternate order: even rounds forward, odd reversed
SHAPES = (
    {"batch": 1, "k": 8192, "n": 28672},
    {"batch": 1, "k": 4096, "n": 14336},
    {"batch": 4, "k": 8192, "n": 28672},
    {"batch": 16, "k": 8192, "n": 28672},
)

RECORDED = os.environ.get("W4A16_RECORDED", "scratch/02_recorded.cu")
RING_BYTES = 6144  # sizeof(WarpRing) in the installed file (a static_assert there says so)


class Variant(NamedTuple):
    path: str = ""  # a whole file (relative to the root); "" for the installed one, rewritten below
    warps: int = 0  # batch 1 as CTA_PER_SM below, with this many warps a CTA; 0: the file's own
    ctas_per_sm: int = 1
    strided: int = 0  # batch 1 as CTA_PER_SM: the CTA's tiles spread over the grid
    tile_major: int = 0  # batch 1 as CTA_PER_SM: items tile by tile
    x_once: int = 0  # batch 1 as CTA_PER_SM: x converted once a CTA
    late_grab: int = 0  # batch 1 as CTA_PER_SM: the draw's broadcast after the arithmetic
    skew: int = -1  # B1_SKEW rewritten to this (stages the first-placed blocks take over half)
    pad: int = 0  # bytes of dynamic shared memory a batch-1 block reserves and never touches
    throttle_ns: int = 0  # batch 1: each stage, a block sleeps this x (1 - its place in the grid)
    # `path`'s `constexpr int NAME = ...;` lines rewritten to these values (the eleventh pass's
    # files switch their candidates this way); CTA_WARPS and CTA_PER_SM also set the launch
    consts: tuple[tuple[str, int], ...] = ()
    whole: bool = False  # a whole file: batch 4 and 16 timed too


VARIANTS: dict[str, Variant] = {
    "recorded": Variant(path=RECORDED, whole=True),
    "installed": Variant(whole=True),
    "parts across blocks, even": Variant(skew=0, whole=True),
    "parts across blocks, skew 1": Variant(skew=1),
    "parts across blocks, skew 2": Variant(skew=2),
    "parts across blocks, skew 3": Variant(skew=3),
    "parts across blocks, skew 4": Variant(skew=4),
    "offsets once, 3-deep ring": Variant(path=TENTH, consts=(("STAGES", 3),), whole=True),
    "offsets once, padded to the 3-deep footprint": Variant(pad=5120),
    "offsets once, first blocks throttled 150 ns": Variant(throttle_ns=150),
    "offsets once, first blocks throttled 300 ns": Variant(throttle_ns=300),
    "offsets once, first blocks throttled 600 ns": Variant(throttle_ns=600),
}

# The eleventh pass: the batch-1 ring filled by the bulk-copy engine, lane 0 issuing each stage's
# 2 KB of weights as one cp.async.bulk counted on the slot's mbarrier (W4A16_BULK, default
# scratch/02_bulk.cu: the installed file with that route at batch 1; batch 4 and 16 unchanged).
# X_ROUTE: 0, x by one cp.async a lane as before; 1, x by bulk copy too, in natural order, then
# converted in place into the permuted order; 2, the same converted into a buffer of its own.
BULK = os.environ.get("W4A16_BULK", "scratch/02_bulk.cu")
VARIANTS.update(
    {
        "bulk weights, x by cp.async": Variant(path=BULK, consts=(("X_ROUTE", 0),)),
        "bulk weights and x, in place": Variant(path=BULK, consts=(("X_ROUTE", 1),)),
        "bulk weights and x, apart": Variant(path=BULK, consts=(("X_ROUTE", 2),)),
    }
)
# Also the eleventh pass: at batch 1 a stage of one piece a lane (one group of 128 values a row,
# 1 KB of the tile's weights), FINE_SLOTS slots deep, so that 2-4 KB a warp stay in flight while a
# stage is summed where the installed 2 x 2 KB ring keeps one stage (W4A16_FINE, default
# scratch/02_fine.cu: the installed file with that batch-1 entry).
FINE = os.environ.get("W4A16_FINE", "scratch/02_fine.cu")
VARIANTS.update(
    {
        f"fine ring, {slots} slots": Variant(path=FINE, consts=(("FINE_SLOTS", slots),))
        for slots in (3, 4, 5)
    }
)
# And: the zero-point offsets of x out of the stage (W4A16_PRE, default scratch/02_pre.cu, the
# installed file with a batch-1 entry of its own). PRE_ROUTE 0: fp16 codes, each group's offset
# summed once a block at the start and subtracted after the group's mmas; 1: bf16 codes (three
# shifts a word), x used as copied, no conversion; 2: the installed stage with only the offset
# moved from the mmas' starting value to after them; 3: route 1's codes with route 2's offsets.
PRE = os.environ.get("W4A16_PRE", "scratch/02_pre.cu")
VARIANTS.update(
    {
        "offsets a block, fp16": Variant(path=PRE, consts=(("PRE_ROUTE", 0),)),
        "offsets a block, bf16, x as copied": Variant(path=PRE, consts=(("PRE_ROUTE", 1),)),
        "offset after the mmas": Variant(path=PRE, consts=(("PRE_ROUTE", 2),)),
        "bf16 codes, x as copied, offset after": Variant(path=PRE, consts=(("PRE_ROUTE", 3),)),
        "offset after the mmas, pieces unrolled": Variant(
            path=PRE, consts=(("PRE_ROUTE", 2), ("PRE_UNROLL", 2))
        ),
        "bf16 codes, offset after, pieces unrolled": Variant(
            path=PRE, consts=(("PRE_ROUTE", 3), ("PRE_UNROLL", 2))
        ),
        "late slots (>= 14) unrolled": Variant(
            path=PRE, consts=(("PRE_ROUTE", 2), ("PRE_SLOT_SPLIT", 14))
        ),
        "late slots (>= 20) unrolled": Variant(
            path=PRE, consts=(("PRE_ROUTE", 2), ("PRE_SLOT_SPLIT", 20))
        ),
        "early slots (< 14) unrolled": Variant(
            path=PRE, consts=(("PRE_ROUTE", 2), ("PRE_SLOT_SPLIT", -14))
        ),
    }
)
# And: the installed batch-1 loop and work split (warps 2j and 2j + 1 on the two halves of a
# tile), launched as CTAs of CTA_WARPS warps, CTA_PER_SM an SM, each over a contiguous run of
# tiles (W4A16_CTA, default scratch/02_cta.cu), so that an SM's warps are placed together.
CTA = os.environ.get("W4A16_CTA", "scratch/02_cta.cu")
VARIANTS.update(
    {
        f"static CTAs of {w} warps, {per} an SM": Variant(
            path=CTA, consts=(("CTA_WARPS", w), ("CTA_PER_SM", per))
        )
        for w, per in ((28, 1), (14, 2), (4, 7), (2, 14))
    }
)
# The same CTAs with warps j and W - 1 - j on one tile, the earlier-placed one taking CTA_SKEW more
# stages for the outermost pair (none for the middle one): the slot skew balanced inside a CTA.
VARIANTS.update(
    {
        f"paired CTAs of {w} warps, {per} an SM, skew {skew}": Variant(
            path=CTA, consts=(("CTA_WARPS", w), ("CTA_PER_SM", per), ("CTA_SKEW", skew))
        )
        for w, per, skew in ((28, 1, 0), (28, 1, 1), (28, 1, 2), (28, 1, 3), (14, 2, 1), (14, 2, 2))
    }
)

# The twelfth pass: batch 1 with the K split over KSPLIT_B1 warps of a tile instead of 2 (W4A16_KSPLIT,
# default scratch/02_ksplit.cu: the installed file with blocks of KSPLIT_B1 warps at batch 1, the
# partial sums meeting in shared memory, 28 warps an SM as now). At 4 the grid is 1.94 waves of
# blocks half as long: a block that ends early hands its slot to one that has not started, where
# the one-wave launch leaves the slot empty (the tenth pass's timeline: the warps placed first end
# ~5 µs before the last). K must be a multiple of 256 x KSPLIT_B1.
KSPLIT = os.environ.get("W4A16_KSPLIT", "scratch/02_ksplit.cu")
VARIANTS.update(
    {f"K split {w}": Variant(path=KSPLIT, consts=(("KSPLIT_B1", w),)) for w in (2, 4, 8)}
)
VARIANTS["K split 8, 4 blocks an SM"] = Variant(
    path=KSPLIT, consts=(("KSPLIT_B1", 8), ("B1_MIN_BLOCKS", 4))
)
VARIANTS["K split 4, 8 blocks an SM"] = Variant(
    path=KSPLIT, consts=(("KSPLIT_B1", 4), ("B1_MIN_BLOCKS", 8))
)
# Larger blocks first (W4A16_GUIDED, default scratch/02_guided.cu: a file in which the first
# N / 16 - grid blocks at batch 1 own two tiles, two warps a tile, the rest one tile four ways; the
# launch here makes B1_DOUBLE of them; installed, with the suite choosing 2 an SM).
# The block scheduler starts blocks in index order, so the big ones go into the first wave and the
# small ones fill the slots that empty last, as in guided self-scheduling. 0 is the control (the
# same code, every block one tile).
GUIDED = os.environ.get("W4A16_GUIDED", "scratch/02_guided.cu")
VARIANTS.update(
    {
        f"guided, {d} double blocks": Variant(path=GUIDED, consts=(("B1_DOUBLE", d),))
        for d in (0, 132, 198, 264, 330, 396, 528, 792)
    }
)

# Batch 1, each stage after its copies have landed: the blocks placed first (low block index) sleep
# longest, the last placed not at all, so that the warps the SM serves first leave more of the
# memory system to the ones it serves last.
THROTTLE_AT = "        wait_copies<STAGES - 1>();\n"
THROTTLE = (
    "        if constexpr (FP16) {\n"
    "            const float rank = static_cast<float>(blockIdx.x) / gridDim.x;\n"
    "            __nanosleep(static_cast<unsigned>(THROTTLE_NS * (1.0f - rank)));\n"
    "        }\n"
)
# The tenth pass's dealing builds (one CTA an SM), kept buildable for the record: add them to
# VARIANTS by name to time them again.
DEALING: dict[str, Variant] = {
    "cta an SM, 28 warps": Variant(warps=28),
    "cta an SM, strided tiles": Variant(warps=28, strided=1),
    "cta an SM, strided, late draw": Variant(warps=28, strided=1, late_grab=1),
    "cta an SM, strided, x once": Variant(warps=28, strided=1, x_once=1),
    "cta an SM, strided, x once, late draw": Variant(warps=28, strided=1, x_once=1, late_grab=1),
}
VARIANTS.update(
    {name: DEALING[name] for name in os.environ.get("W4A16_DEALING", "").split(";") if name}
)
# W4A16_ONLY (names separated by ';') times those variants alone, in that order.
if os.environ.get("W4A16_ONLY"):
    VARIANTS = {name: VARIANTS[name] for name in os.environ["W4A16_ONLY"].split(";") if name}

# The tenth pass's last candidate, as rewrites of the installed file: the two parts of a tile's K
# summed by warps of two blocks (block b: the front of tile b and the back of tile T - 1 - b, each
# over stages / 2 + skew(b) stages, skew falling from B1_SKEW for the first-placed blocks to
# -B1_SKEW for the last), meeting through device memory with one ticket a tile and no wait.
PARTS_EDITS = [
    (
        (
            "}\n"
            "\n"
            '__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }\n'
            "\n"
        ),
        (
            "}\n"
            "\n"
            "// Batch 1: the two parts of a tile are summed by warps of two different blocks, which meet through\n"
            "// these arrays: each leaves its 16 partial sums in b1_partials, then draws a ticket; the second to\n"
            "// draw adds the first's sums to its own, writes y and puts the ticket back to zero.\n"
            "constexpr int B1_MAX_TILES = 8192;  // N / 16 at batch 1\n"
            "constexpr int B1_SKEW = 0;          // stages the first-placed blocks take over an even split\n"
            "__device__ unsigned int b1_tickets[B1_MAX_TILES] = {};\n"
            "__device__ float b1_partials[B1_MAX_TILES][2][16];\n"
            "\n"
            "// Adds one to a ticket counter with acquire-release semantics at GPU scope; returns the old value.\n"
            "__device__ __forceinline__ unsigned take_ticket(unsigned* counter) {\n"
            "    unsigned old;\n"
            '    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");\n'
            "    return old;\n"
            "}\n"
            "\n"
            '__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }\n'
            "\n"
        ),
    ),
    (
        (
            "    const int lane = threadIdx.x & 31;\n"
            "    const int warp = threadIdx.x >> 5;  // owner of a ring\n"
            "    const int half = KSPLIT == 1 ? 0 : warp;  // which part of K this warp sums\n"
            "    const int tile = blockIdx.x * TILES + (KSPLIT == 1 ? warp : 0);\n"
            "    const int g = lane >> 2;\n"
            "    const int t = lane & 3;\n"
            "    const int row = tile * 16 + g;\n"
            "    const int kv = k / VALUES_PER_PIECE / KSPLIT;  // 16-byte pieces of a row in this warp's part\n"
            "    const int groups = k / GROUP;\n"
            "    constexpr int STEP = 4 * PIECES;\n"
            "\n"
            "    // The suite stores W tiled (see the header): the 2 KB of tile w in stage s are uint4s\n"
            "    // (s * N/16 + w) * 128 .. + 127, copy j of a lane (j = 2 * piece + half of the tile's rows) is\n"
            "    // uint4 32 * j + lane of that block. This warp starts at stage half * (stages a half).\n"
            "    const size_t stage_stride = static_cast<size_t>(n / 16) * 128;  // uint4s between a tile's stages\n"
            "    const uint4* wtile = reinterpret_cast<const uint4*>(wq) +\n"
            "                         static_cast<size_t>(half) * (kv / STEP) * stage_stride +\n"
            "                         static_cast<size_t>(tile) * 128 + lane;\n"
            "    const unsigned short* sa = scales + static_cast<size_t>(row) * groups + half * (groups / KSPLIT);\n"
            "    const unsigned short* sb = sa + static_cast<size_t>(8) * groups;\n"
            "    const uint4* xhalf = reinterpret_cast<const uint4*>(x) + half * (k / KSPLIT / 8);\n"
            "    // x in 16-byte vectors of 8 bf16: the 32 values of a piece are 4 of them\n"
            "    const uint4* xr[NT];\n"
        ),
        (
            "    const int lane = threadIdx.x & 31;\n"
            "    const int warp = threadIdx.x >> 5;  // owner of a ring\n"
            "    const int half = KSPLIT == 1 ? 0 : warp;  // batch 1: 0 sums the front of a tile, 1 the back\n"
            "    const int stages = k / (4 * PIECES * VALUES_PER_PIECE);  // of 256 values along K\n"
            "    int tile = blockIdx.x * TILES + warp, first_stage = 0, my_stages = stages;\n"
            "    if constexpr (KSPLIT == 2) {\n"
            "        // Block b: warp 0 sums the front of tile b, warp 1 the back of tile T - 1 - b, each over\n"
            "        // stages / 2 + skew(b) stages, skew falling from B1_SKEW for the first blocks placed to\n"
            "        // -B1_SKEW for the last (blocks placed on an SM first are served first).\n"
            "        const int tiles = gridDim.x, b = blockIdx.x;\n"
            "        const float at = tiles > 1 ? 1.0f - 2.0f * b / (tiles - 1) : 0.0f;\n"
            "        const int skew = max(-(stages / 2 - 1), min(stages / 2 - 1, __float2int_rn(B1_SKEW * at)));\n"
            "        tile = half == 0 ? b : tiles - 1 - b;\n"
            "        first_stage = half == 0 ? 0 : stages / 2 - skew;\n"
            "        my_stages = stages / 2 + skew;\n"
            "    }\n"
            "    const int g = lane >> 2;\n"
            "    const int t = lane & 3;\n"
            "    const int row = tile * 16 + g;\n"
            "    constexpr int STEP = 4 * PIECES;\n"
            "    const int kv = my_stages * STEP;  // 16-byte pieces of a row in this warp's part\n"
            "    const int groups = k / GROUP;\n"
            "\n"
            "    // The suite stores W tiled (see the header): the 2 KB of tile w in stage s are uint4s\n"
            "    // (s * N/16 + w) * 128 .. + 127, copy j of a lane (j = 2 * piece + half of the tile's rows) is\n"
            "    // uint4 32 * j + lane of that block. This warp starts at stage first_stage.\n"
            "    const size_t stage_stride = static_cast<size_t>(n / 16) * 128;  // uint4s between a tile's stages\n"
            "    const uint4* wtile = reinterpret_cast<const uint4*>(wq) +\n"
            "                         static_cast<size_t>(first_stage) * stage_stride +\n"
            "                         static_cast<size_t>(tile) * 128 + lane;\n"
            "    const unsigned short* sa = scales + static_cast<size_t>(row) * groups + 2 * first_stage;\n"
            "    const unsigned short* sb = sa + static_cast<size_t>(8) * groups;\n"
            "    const uint4* xhalf = reinterpret_cast<const uint4*>(x) + 32 * first_stage;\n"
            "    // x in 16-byte vectors of 8 bf16: the 32 values of a piece are 4 of them\n"
            "    const uint4* xr[NT];\n"
        ),
    ),
    (
        (
            "    wait_copies<0>();\n"
            "\n"
            "    // at batch 1 the halves meet: the ring is free now, so the second half leaves its sums in it\n"
            "    float red_part[NT][4] = {};\n"
            "    if constexpr (KSPLIT == 2) {\n"
            "    __syncthreads();\n"
            "    float* red = reinterpret_cast<float*>(&ring[0][0][0][0][0]);\n"
            "    if (half == 1) {\n"
            "#pragma unroll\n"
            "        for (int nt = 0; nt < NT; ++nt)\n"
            "#pragma unroll\n"
            "            for (int e = 0; e < 4; ++e)\n"
            "                if (BATCH > 1 || e % 2 == 0) red[(nt * 4 + e) * 32 + lane] = acc[nt][e];  // column 2t + e % 2\n"
            "    }\n"
            "    __syncthreads();\n"
            "    if (half == 1) return;\n"
            "#pragma unroll\n"
            "    for (int nt = 0; nt < NT; ++nt)\n"
            "#pragma unroll\n"
            "        for (int e = 0; e < 4; ++e)\n"
            "            if (BATCH > 1 || e % 2 == 0) red_part[nt][e] = red[(nt * 4 + e) * 32 + lane];\n"
            "    }\n"
            "\n"
        ),
        (
            "    wait_copies<0>();\n"
            "\n"
            "    // at batch 1 the two parts of the tile meet through device memory: column 0 of the product\n"
            "    // (lanes t = 0, rows g and g + 8) is left in b1_partials, then a ticket is drawn\n"
            "    float red_part[NT][4] = {};\n"
            "    if constexpr (KSPLIT == 2) {\n"
            "        float* mine = b1_partials[tile][half];\n"
            "        if (t == 0) {\n"
            "            mine[g] = acc[0][0];\n"
            "            mine[g + 8] = acc[0][2];\n"
            "        }\n"
            "        __syncwarp();\n"
            "        unsigned drawn = 0;\n"
            "        if (lane == 0) drawn = take_ticket(&b1_tickets[tile]);\n"
            "        drawn = __shfl_sync(0xffffffffu, drawn, 0);\n"
            "        if (drawn == 0) return;  // first to arrive: the other part finishes the tile\n"
            "        if (lane == 0) b1_tickets[tile] = 0;  // ready for the next launch\n"
            "        const float* other = b1_partials[tile][1 - half];\n"
            "        if (t == 0) {\n"
            "            red_part[0][0] = __ldcg(other + g);\n"
            "            red_part[0][2] = __ldcg(other + g + 8);\n"
            "        }\n"
            "    }\n"
            "\n"
        ),
    ),
]


# The tenth pass's first candidate, in place of the file's batch-1 entry: one CTA an SM (or
# ctas_per_sm), whose warps deal the CTA's (stage, tile) items among themselves.
B1_ENTRY = (
    'extern "C" __global__ void __launch_bounds__(WARPS * 32, BLOCKS_PER_SM)\n'
    "w4a16_b1(const unsigned short* x, const unsigned* wq, const unsigned short* scales, "
    "unsigned short* y,\n"
    "         int k, int n) {\n"
    "    gemv_w4a16<1>(x, wq, scales, y, k, n);\n"
    "}\n"
)
CTA_PER_SM = r"""// Batch 1: one CTA an SM, its warps dealing the CTA's (tile, stage) items among themselves.
constexpr int B1_WARPS = 28;       // 896 threads: at 72 registers a thread, the whole register file
constexpr int B1_CTAS_PER_SM = 1;  // the suite launches this many CTAs an SM
constexpr int B1_STRIDED = 0;      // 1: CTA c owns tiles c, c + grid, c + 2 grid, ... (else a run)
constexpr int B1_TILE_MAJOR = 0;   // 1: items tile by tile (else stage by stage)
constexpr int B1_X_ONCE = 0;       // 1: x converted once a CTA into shared memory, with the offsets
constexpr int B1_LATE_GRAB = 0;    // 1: the next item's number is read at the end of the iteration
constexpr int B1_CTA_TILES = 16;   // 16-row tiles a CTA may own (each warp keeps a sum for each)
constexpr int STAGE_VALUES = 4 * PIECES * VALUES_PER_PIECE;  // 256 values of K a row a stage

// One warp's share of the CTA's dynamic shared memory at batch 1.
struct WarpRing {
    uint4 w[STAGES][PIECES][2][32];  // a stage's 2 KB of weights, in 02's copy order
    uint4 x[STAGES][X_VECTORS];      // the stage's 512 bytes of x, converted in place
    float sums[B1_CTA_TILES][16];    // this warp's share of y for each of the CTA's tiles
};
static_assert(sizeof(WarpRing) == 6144, "the suite launches B1_WARPS x 6144 bytes of shared memory");
static_assert(B1_CTAS_PER_SM * (B1_WARPS * sizeof(WarpRing) + 16 + 1024) <= 228 * 1024, "CTAs an SM fit");

// grid: at most N / 16 CTAs (the suite launches one an SM), B1_WARPS x 32 threads, B1_WARPS x
// sizeof(WarpRing) bytes of dynamic shared memory. CTA c owns tiles [c T / grid, (c + 1) T / grid)
// of the T = N / 16; its items are (stage, tile) pairs, stage-major, handed out by a counter in
// shared memory, so a warp that is served quickly takes more of them.
extern "C" __global__ void __launch_bounds__(B1_WARPS * 32, B1_CTAS_PER_SM)
w4a16_b1(const unsigned short* __restrict__ x, const unsigned* __restrict__ wq,
         const unsigned short* __restrict__ scales, unsigned short* __restrict__ y, int k, int n) {
    // No static shared memory, so the rings start at offset 0 of the window (a 128-byte aligned
    // destination: behind a static counter they sat 16 bytes off, and every 128-byte line a warp
    // copied landed across two, twice the sectors a copy); the counter follows the rings.
    extern __shared__ uint4 dynamic_smem[];
    WarpRing* rings = reinterpret_cast<WarpRing*>(dynamic_smem);
    int& next_item = *reinterpret_cast<int*>(rings + B1_WARPS);
    // B1_X_ONCE: all of x as fp16 in the stage order the loop reads, then each group's offset
    uint4* xs = reinterpret_cast<uint4*>(dynamic_smem) + (B1_WARPS * sizeof(WarpRing) + 16) / 16;
    float* offs = reinterpret_cast<float*>(xs + k / 8);

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int g = lane >> 2;
    const int t = lane & 3;
    WarpRing& my = rings[warp];
    const int tiles = n / 16;
    const int first =
        B1_STRIDED ? blockIdx.x : static_cast<int>(static_cast<long long>(blockIdx.x) * tiles / gridDim.x);
    const int ntiles = B1_STRIDED
        ? (tiles - static_cast<int>(blockIdx.x) + gridDim.x - 1) / gridDim.x
        : static_cast<int>(static_cast<long long>(blockIdx.x + 1) * tiles / gridDim.x) - first;
    const int tile_step = B1_STRIDED ? gridDim.x : 1;  // tile tl of the CTA is first + tl * tile_step
    const int stages = k / STAGE_VALUES;
    const int items = ntiles * stages;
    // item / divisor in floating point: exact, as items < 2^20 and the divisor <= 64 leave a margin
    // of at least 1 / 128 around every whole quotient
    const int divisor = B1_TILE_MAJOR ? stages : ntiles;
    const float inv_divisor = 1.0f / static_cast<float>(divisor);
    const int groups = k / GROUP;
#pragma unroll
    for (int i = 0; i < B1_CTA_TILES / 2; ++i) (&my.sums[0][0])[32 * i + lane] = 0.0f;
    if (threadIdx.x == 0) next_item = B1_X_ONCE ? B1_WARPS : 0;  // X_ONCE: warp w starts at item w

    const uint4* w_lane = reinterpret_cast<const uint4*>(wq) + lane;
    const uint4* x_lane = reinterpret_cast<const uint4*>(x) + lane;
    const int x_slot = 16 * (lane >> 4) + 4 * (lane & 3) + ((lane >> 2) & 3);

    auto grab = [&]() {
        int item = 0;
        if (lane == 0) item = atomicAdd(&next_item, 1);
        return __shfl_sync(0xffffffffu, item, 0);
    };
    auto split = [&](int item, int& s, int& tl) {
        const int q = static_cast<int>((item + 0.5f) * inv_divisor);
        const int r = item - q * divisor;
        s = B1_TILE_MAJOR ? r : q;
        tl = B1_TILE_MAJOR ? q : r;
    };
    auto issue = [&](int item, int slot) {
        if (item < items) {
            int s, tl;
            split(item, s, tl);
            const uint4* block =
                w_lane + (static_cast<size_t>(s) * tiles + first + tl * tile_step) * 128;
#pragma unroll
            for (int p = 0; p < PIECES; ++p) {
                copy_async_16(shared_addr(&my.w[slot][p][0][lane]), block + 32 * (2 * p));
                copy_async_16(shared_addr(&my.w[slot][p][1][lane]), block + 32 * (2 * p + 1));
            }
            if constexpr (!B1_X_ONCE) copy_async_16_l1(shared_addr(&my.x[slot][x_slot]), x_lane + 32 * s);
        }
        commit_copies();
    };

    int cur;
    if constexpr (B1_X_ONCE) {
        cur = warp;
        issue(cur, 0);  // the first weights are on their way while x is converted
        for (int v = threadIdx.x; v < k / 8; v += blockDim.x) {  // v = 32 s + lane
            const uint4 raw = __ldg(reinterpret_cast<const uint4*>(x) + v);
            const float x0 = __uint_as_float(raw.x << 16), x1 = __uint_as_float(raw.x & 0xFFFF0000u);
            const float x2 = __uint_as_float(raw.y << 16), x3 = __uint_as_float(raw.y & 0xFFFF0000u);
            const float x4 = __uint_as_float(raw.z << 16), x5 = __uint_as_float(raw.z & 0xFFFF0000u);
            const float x6 = __uint_as_float(raw.w << 16), x7 = __uint_as_float(raw.w & 0xFFFF0000u);
            xs[(v & ~31) + x_slot] = make_uint4(to_f16x2(x0, x1), to_f16x2(x2 * 0.0625f, x3 * 0.0625f),
                                                to_f16x2(x4, x5), to_f16x2(x6 * 0.0625f, x7 * 0.0625f));
            float off = fmaf(1032.0f, (x0 + x1) + (x4 + x5), 72.0f * ((x2 + x3) + (x6 + x7)));
#pragma unroll
            for (int m = 1; m < 16; m <<= 1) off += __shfl_xor_sync(0xffffffffu, off, m);
            if ((lane & 15) == 0) offs[2 * (v >> 5) + (lane >> 4)] = off;
        }
        __syncthreads();
    } else {
        __syncthreads();
        cur = grab();
        issue(cur, 0);
    }
    int nxt = grab();
    int slot = 0;
#pragma unroll 1
    while (cur < items) {
        __syncwarp();  // every lane is done reading the slot refilled next
        issue(nxt, slot ^ 1);
        int ticket = 0;  // B1_LATE_GRAB: lane 0's draw, broadcast after the stage's arithmetic
        if (B1_LATE_GRAB && lane == 0) ticket = atomicAdd(&next_item, 1);
        const int early = B1_LATE_GRAB ? 0 : grab();
        wait_copies<1>();
        int s, tl;
        split(cur, s, tl);
        // the stage's two scales of rows g and g + 8 (groups 2s and 2s + 1) as one 32-bit load a row
        const unsigned* srow =
            reinterpret_cast<const unsigned*>(scales + static_cast<size_t>((first + tl * tile_step) * 16 + g) * groups) + s;
        const unsigned scale_pair[2] = {__ldg(srow), __ldg(srow + 4 * groups)};
        float offset[2];
        if constexpr (B1_X_ONCE) {
            offset[0] = offs[2 * s];
            offset[1] = offs[2 * s + 1];
        } else {
            uint4& mine = my.x[slot][x_slot];
            const uint4 v = mine;
            const float x0 = __uint_as_float(v.x << 16), x1 = __uint_as_float(v.x & 0xFFFF0000u);
            const float x2 = __uint_as_float(v.y << 16), x3 = __uint_as_float(v.y & 0xFFFF0000u);
            const float x4 = __uint_as_float(v.z << 16), x5 = __uint_as_float(v.z & 0xFFFF0000u);
            const float x6 = __uint_as_float(v.w << 16), x7 = __uint_as_float(v.w & 0xFFFF0000u);
            mine = make_uint4(to_f16x2(x0, x1), to_f16x2(x2 * 0.0625f, x3 * 0.0625f), to_f16x2(x4, x5),
                              to_f16x2(x6 * 0.0625f, x7 * 0.0625f));
            float off = fmaf(1032.0f, (x0 + x1) + (x4 + x5), 72.0f * ((x2 + x3) + (x6 + x7)));
#pragma unroll
            for (int m = 1; m < 16; m <<= 1) off += __shfl_xor_sync(0xffffffffu, off, m);
            offset[0] = __shfl_sync(0xffffffffu, off, 0);
            offset[1] = __shfl_sync(0xffffffffu, off, 16);
            __syncwarp();
        }
        float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll 1
        for (int p = 0; p < PIECES; ++p) {
            const float scale_a = __uint_as_float(p == 0 ? scale_pair[0] << 16 : scale_pair[0] & 0xFFFF0000u);
            const float scale_b = __uint_as_float(p == 0 ? scale_pair[1] << 16 : scale_pair[1] & 0xFFFF0000u);
            const uint4 a = my.w[slot][p][0][lane];
            const uint4 b = my.w[slot][p][1][lane];
            const unsigned a_words[4] = {a.x, a.y, a.z, a.w};
            const unsigned b_words[4] = {b.x, b.y, b.z, b.w};
            float part[2][4];
            const float start = -(p == 0 ? offset[0] : offset[1]);
            part[0][0] = part[0][1] = part[0][2] = part[0][3] = start;
            part[1][0] = part[1][1] = part[1][2] = part[1][3] = 0.0f;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const unsigned a_hi = a_words[i] >> 8, b_hi = b_words[i] >> 8;
                const uint4 xv = load_shared_if(
                    shared_addr(B1_X_ONCE ? &xs[32 * s + 16 * p + 4 * i + t] : &my.x[slot][16 * p + 4 * i + t]),
                    g == 0);
                mma_f16(part[i & 1], and_or(a_words[i], 0x000F000Fu, 0x64006400u),
                        and_or(b_words[i], 0x000F000Fu, 0x64006400u),
                        and_or(a_words[i], 0x00F000F0u, 0x64006400u),
                        and_or(b_words[i], 0x00F000F0u, 0x64006400u), xv.x, xv.y);
                mma_f16(part[i & 1], and_or(a_hi, 0x000F000Fu, 0x64006400u),
                        and_or(b_hi, 0x000F000Fu, 0x64006400u), and_or(a_hi, 0x00F000F0u, 0x64006400u),
                        and_or(b_hi, 0x00F000F0u, 0x64006400u), xv.z, xv.w);
            }
            sum_a = fmaf(scale_a, part[0][0] + part[1][0], sum_a);
            sum_b = fmaf(scale_b, part[0][2] + part[1][2], sum_b);
        }
        if (t == 0) {  // column 0 of the product: rows g and g + 8 of tile tl
            my.sums[tl][g] += sum_a;
            my.sums[tl][g + 8] += sum_b;
        }
        const int after = B1_LATE_GRAB ? __shfl_sync(0xffffffffu, ticket, 0) : early;
        cur = nxt;
        nxt = after;
        slot ^= 1;
    }
    wait_copies<0>();
    __syncthreads();
    for (int i = threadIdx.x; i < ntiles * 16; i += blockDim.x) {
        float v = 0.0f;
#pragma unroll 4
        for (int w = 0; w < B1_WARPS; ++w) v += (&rings[w].sums[0][0])[i];
        y[(first + (i >> 4) * tile_step) * 16 + (i & 15)] = to_bf16(v);
    }
}
"""
# checked, not timed: small shapes, 1 to 3 stages of 256 values a half of K at batch 1
CHECK_ONLY = tuple({"batch": b, "k": 1024, "n": 1024} for b in (1, 4, 16)) + (
    {"batch": 1, "k": 512, "n": 1024},
    {"batch": 1, "k": 1536, "n": 2048},
    {"batch": 1, "k": 1536, "n": 5120},  # 320 tiles: two or three a CTA at batch 1
    {"batch": 1, "k": 2048, "n": 2048},
    {"batch": 1, "k": 3072, "n": 5120},
    {"batch": 16, "k": 1536, "n": 2048},
)


def _sub(src: str, old: str, new: str) -> str:
    found = src.count(old)
    if found != 1:
        raise ValueError(f"rewrite anchor found {found} times, want 1: {old[:60]!r}")
    return src.replace(old, new)


def source_of(v: Variant) -> str:
    if v.path and v.consts:
        src = (ROOT / v.path).read_text()
        for name, value in v.consts:
            src, found = re.subn(
                rf"constexpr int {name} = -?\d+;", f"constexpr int {name} = {value};", src
            )
            if found != 1:
                raise ValueError(f"{v.path}: constexpr int {name} found {found} times, want 1")
        return src
    if v.path:
        return (ROOT / v.path).read_text()
    if v.throttle_ns:
        src = _sub(tenth_source(), THROTTLE_AT, THROTTLE_AT + THROTTLE)
        return _sub(
            src,
            "constexpr int WARPS = 2;",
            f"#define THROTTLE_NS {v.throttle_ns}\nconstexpr int WARPS = 2;",
        )
    if v.skew >= 0:
        src = tenth_source()
        for old, new in PARTS_EDITS:
            src = _sub(src, old, new)
        return _sub(src, "constexpr int B1_SKEW = 0;", f"constexpr int B1_SKEW = {v.skew};")
    if not v.warps:
        return tenth_source() if v.pad else SOURCE
    entry = _sub(CTA_PER_SM, "constexpr int B1_WARPS = 28;", f"constexpr int B1_WARPS = {v.warps};")
    entry = _sub(
        entry,
        "constexpr int B1_CTAS_PER_SM = 1;",
        f"constexpr int B1_CTAS_PER_SM = {v.ctas_per_sm};",
    )
    entry = _sub(entry, "constexpr int B1_STRIDED = 0;", f"constexpr int B1_STRIDED = {v.strided};")
    entry = _sub(
        entry, "constexpr int B1_TILE_MAJOR = 0;", f"constexpr int B1_TILE_MAJOR = {v.tile_major};"
    )
    entry = _sub(entry, "constexpr int B1_X_ONCE = 0;", f"constexpr int B1_X_ONCE = {v.x_once};")
    entry = _sub(
        entry, "constexpr int B1_LATE_GRAB = 0;", f"constexpr int B1_LATE_GRAB = {v.late_grab};"
    )
    return _sub(tenth_source(), B1_ENTRY, entry)


def launch_of(v: Variant, shape: dict[str, int], sms: int) -> tuple[int, int, int]:
    """(blocks, threads a block, dynamic shared bytes) of `v` at `shape`."""
    if shape["batch"] > 1:
        return shape["n"] // 32, 64, 0
    consts = dict(v.consts)
    if "CTA_WARPS" in consts:  # each warp's ring: STAGES x (2 KB of weights + 512 B of x)
        warps = consts["CTA_WARPS"]
        return sms * consts.get("CTA_PER_SM", 1), 32 * warps, warps * 2 * (2048 + 512)
    if not v.warps:  # a block is one 16-row tile, its K split between KSPLIT_B1 warps (else 2)
        split = re.search(r"constexpr int KSPLIT_B1 = (\d+);", source_of(v))
        tiles = shape["n"] // 16
        if v == Variant(whole=True):  # the installed file: the suite's grid, two-tile blocks first
            suite = load_suite()
            doubles = suite.batch_1_doubles(suite.FORMATS["02_w4a16"], tiles, sms)
        else:  # blocks of two tiles that lead the grid, where the file reads them off it
            doubles = min(consts.get("B1_DOUBLE", 0), tiles // 2)
        return tiles - doubles, 32 * (int(split.group(1)) if split else 2), v.pad
    return (
        min(sms * v.ctas_per_sm, shape["n"] // 16),
        32 * v.warps,
        v.warps * RING_BYTES + 16 + (2 * shape["k"] + shape["k"] // 32 if v.x_once else 0),
    )


def kernel_args(inputs: dict[str, Any], y: Any, shape: dict[str, int]) -> tuple:
    """02's arguments in order: x, the packed weights, the scales, y, K, N."""
    return (
        inputs["x"],
        inputs["wq"],
        inputs["scales"],
        y,
        np.int32(shape["k"]),
        np.int32(shape["n"]),
    )


def load_suite() -> Any:
    spec = importlib.util.spec_from_file_location("gemv_suite", ROOT / "kernels/gemv/suite.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sources() -> dict[str, str]:
    return {name: source_of(v) for name, v in VARIANTS.items()}


def emit(folder: str) -> None:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for name, src in sources().items():
        (out / (re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") + ".cu")).write_text(src)


class Timer:
    """The bench's own timer (curriculum.bench.timing: its L2 flush, its events, its statistics),
    run for a fixed number of launches so that variants timed in alternating rounds get equal
    samples; `start` and `end` are spare events for a single stamped launch (stream_probe)."""

    def __init__(self, cp: Any) -> None:
        from curriculum.bench.timing import CudaEventTimer

        dev = cp.cuda.Device()
        self.bench = CudaEventTimer(
            dev.attributes["L2CacheSize"], dev.attributes["MultiProcessorCount"]
        )
        self.start, self.end = cp.cuda.Event(), cp.cuda.Event()

    def flush(self) -> None:
        self.bench.flush_l2()

    def median_us(
        self, fn: Callable[[], None], samples: int = SAMPLES
    ) -> tuple[float, float, float]:
        """Median, 20th and 80th percentile in µs of `samples` launches after 5 warm-up ones."""
        from curriculum.bench.timing import TimingPolicy, time_call

        fixed = TimingPolicy(
            warmup_ms=0.0, warmup_launches=5, min_samples=samples, max_samples=samples
        )
        stat = time_call(fn, self.bench, fixed)
        return stat.median_ms * 1e3, stat.p20_ms * 1e3, stat.p80_ms * 1e3


def read_ceiling(cp: Any, timer: Timer) -> float:
    """GB/s: the read ceiling exactly as a bench run measures it, on this timer."""
    from curriculum.bench.ceilings import measure_ceiling
    from curriculum.bench.timing import TimingPolicy

    gbps = measure_ceiling("read", timer.bench, TimingPolicy()).gbps
    assert gbps is not None
    return gbps


def main() -> None:
    import cupy as cp

    suite = load_suite()
    timer = Timer(cp)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    rng = cp.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    modules: dict[str, Any] = {}
    for name, src in sources().items():
        module = cp.RawModule(code=src, options=("--std=c++17", "-arch=sm_90"), backend="nvrtc")
        fns = {b: module.get_function(f"w4a16_b{b}") for b in (1, 4, 16)}
        if VARIANTS[name].warps or "CTA_WARPS" in dict(VARIANTS[name].consts):  # over 48 KB
            fns[1].max_dynamic_shared_size_bytes = 227 * 1024
        regs = {b: f.num_regs for b, f in fns.items()}
        spills = {b: f.local_size_bytes for b, f in fns.items()}
        print(f"{name}: registers {regs}, local bytes {spills}", flush=True)
        modules[name] = module

    ceiling_before = read_ceiling(cp, timer)
    cp.get_default_memory_pool().free_all_blocks()
    print(f"read ceiling {ceiling_before:.0f} GB/s", flush=True)

    results: dict[str, Any] = {"ceiling_gbps": [ceiling_before], "sms": sms, "cases": {}}
    runners: dict[tuple[str, str], Callable[[], None]] = {}
    failed: set[str] = set()
    keep: list[Any] = []
    for shape in CHECK_ONLY + SHAPES:
        timed = shape in SHAPES
        key = f"b{shape['batch']} k{shape['k']} n{shape['n']}"
        inputs = suite._inputs_w4a16(shape, rng)
        ref = suite._reference(suite._weights_w4a16)(inputs, shape)["y"]  # float64, exact decode
        nbytes = suite.bytes_w4a16(shape)
        for name, module in modules.items():
            v = VARIANTS[name]
            threads = launch_of(v, shape, sms)[1] if shape["batch"] == 1 else 64
            if not v.warps and shape["k"] % (256 * threads // 32):  # a warp's slice: whole stages
                print(f"check {key} {name}: skipped (K not a multiple of {256 * threads // 32})")
                continue
            kernel = module.get_function(f"w4a16_b{shape['batch']}")
            blocks, threads, smem = launch_of(v, shape, sms)
            for attempt in range(2):  # twice: the counters and sums must start clean each launch
                y = cp.full((shape["batch"], shape["n"]), 0xFFFF, dtype=cp.uint16)  # NaN in bf16
                args = kernel_args(inputs, y, shape)

                def run(
                    kernel: Any = kernel,
                    args: tuple = args,
                    blocks: int = blocks,
                    threads: int = threads,
                    smem: int = smem,
                ) -> None:
                    kernel((blocks,), (threads,), args, shared_mem=smem)

                run()
                cp.cuda.Device().synchronize()
                got = suite.bf16_bits_to_float64(y, cp)
                rel = float(cp.linalg.norm(got - ref) / cp.linalg.norm(ref))
                ok = bool(cp.isfinite(got).all()) and rel < suite.TOLERANCE
                if not ok or attempt:
                    break
            print(
                f"check {key} {name}: rel_err {rel:.2e} {'ok' if ok else 'FAILED'} "
                f"({blocks} x {threads}, {smem} B)",
                flush=True,
            )
            results["cases"].setdefault(key, {})[name] = {
                "rel_err": rel,
                "ok": ok,
                "us": [],
                "bytes": nbytes,
                "launch": [blocks, threads, smem],
            }
            if not ok:
                failed.add(name)
            elif timed and (shape["batch"] == 1 or v.whole):
                runners[(key, name)] = run
        if timed:
            keep.append(inputs)  # every timed shape's inputs stay alive for the rounds
        else:
            del inputs, ref
            cp.get_default_memory_pool().free_all_blocks()

    # a variant wrong at any shape is timed at none
    runners = {key: run for key, run in runners.items() if key[1] not in failed}
    for rnd in range(ROUNDS):
        order = list(runners.items())
        if rnd % 2:
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
    timed_names = [n for n, c in headline.items() if n != "recorded" and c.get("us")]
    if timed_names:
        best = min(timed_names, key=lambda n: min(m for m, _, _ in headline[n]["us"]))
        (out / "best.txt").write_text(best + "\n")


def profile(name: str) -> None:
    """Three headline launches of one variant (no check, no flush), for Nsight Compute."""
    import cupy as cp

    suite = load_suite()
    shape = SHAPES[0]
    v = VARIANTS[name]
    module = cp.RawModule(
        code=source_of(v), options=("--std=c++17", "-arch=sm_90"), backend="nvrtc"
    )
    kernel = module.get_function("w4a16_b1")
    kernel.max_dynamic_shared_size_bytes = 227 * 1024
    blocks, threads, smem = launch_of(v, shape, cp.cuda.Device().attributes["MultiProcessorCount"])
    inputs = suite._inputs_w4a16(shape, cp.random.default_rng(3))
    y = cp.empty((1, shape["n"]), dtype=cp.uint16)
    args = kernel_args(inputs, y, shape)
    for _ in range(3):
        kernel((blocks,), (threads,), args, shared_mem=smem)
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "emit":
        emit(sys.argv[2])
    elif len(sys.argv) > 2 and sys.argv[1] == "profile":
        profile(sys.argv[2])
    else:
        main()
