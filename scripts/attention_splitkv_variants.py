"""Variants of kernels/attention/04_split_kv.cu side by side: a scratch A/B, not a bench case.

Run on the GPU machine from the repository root:

    python3 scripts/attention_splitkv_variants.py            # check, then time every variant
    python3 scripts/attention_splitkv_variants.py --profile  # one variant a few launches, for ncu

Each variant is the recorded source with one or more text blocks rewritten (every anchor must
occur exactly once), launched with the split plan of suite.py's `plan_splits` unless the variant
names its own. Each (variant, context) pair is first checked against a float64 reference on fresh
random inputs with a NaN-poisoned output, then timed by the bench's own timer
(curriculum.bench.timing: the L2 flushed before every launch, CUDA events), median of REPS
launches, in two alternating rounds. The copy ceiling comes from curriculum.bench.ceilings, so it
is measured exactly as a bench run measures it (the better of a device memcpy
and a float4 copy kernel over 2 GiB, bytes = read + write) in the same process, and each time is
given as a percentage of the floor (K + V + q + out bytes at that ceiling). Writes
$OUT/splitkv_ab.json and prints a table last.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # the bench package: its timer and ceilings
# The file the variants rewrite. Rounds one to fifteen rewrote 04's fp32 FMA loop as it stood at
# commit 1789bdc; to rebuild them, `git show 1789bdc:kernels/attention/04_split_kv.cu >
# /tmp/04_fma.cu` and set SPLITKV_SOURCE=/tmp/04_fma.cu. A variant whose anchors are not in the
# source in use is skipped with a message.
SOURCE_PATH = Path(os.environ.get("SPLITKV_SOURCE", "kernels/attention/04_split_kv.cu"))
HQ, HKV, D, B = 32, 8, 128, 1
CONTEXTS = (1024, 4096, 32768)
HEADLINE = 32768
REPS = int(os.environ.get("REPS", "30"))
TOL = 5e-3
LOG2E = 1.4426950408889634
OUT = Path(os.environ.get("OUT", "/tmp"))
OUT.mkdir(parents=True, exist_ok=True)

# --- source rewriting -------------------------------------------------------------------------

def rewrite(source: str, edits: list[tuple[str, str]]) -> str:
    for old, new in edits:
        count = source.count(old)
        if count != 1:
            raise ValueError(f"anchor found {count} times: {old[:60]!r}")
        source = source.replace(old, new)
    return source



LOAD_LINE = "        r[u] = __ldg(reinterpret_cast<const uint4*>(head + row));\n"
LOAD_ANCHOR = "// The lane's chunks of the UNROLL rows"


def stream_load_source(qualifiers: str, policy: bool = False) -> str:
    """A 16-byte streaming load with the given PTX qualifiers (optionally an L2 policy)."""
    if policy:
        body = (
            "    unsigned long long pol;\n"
            '    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\\n" : "=l"(pol));\n'
            f'    asm("ld.global.nc{qualifiers}.L2::cache_hint.v4.u32 {{%0, %1, %2, %3}}, [%4], %5;\\n"\n'
            '        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "l"(pol));\n'
        )
    else:
        body = (
            f'    asm("ld.global.nc{qualifiers}.v4.u32 {{%0, %1, %2, %3}}, [%4];\\n"\n'
            '        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));\n'
        )
    return (
        "__device__ __forceinline__ uint4 ld_stream(const uint4* p) {\n"
        "    uint4 r;\n" + body + "    return r;\n}\n\n"
    )


def hint_edits(qualifiers: str, policy: bool = False) -> list[tuple[str, str]]:
    return [
        (LOAD_ANCHOR, stream_load_source(qualifiers, policy) + LOAD_ANCHOR),
        (LOAD_LINE, "        r[u] = ld_stream(reinterpret_cast<const uint4*>(head + row));\n"),
    ]


# Each CTA starts its walk at a different step of its range and wraps around, so CTAs that
# stream at the same time do not sit at the same offset of equally aligned ranges.
ROTATE_EDITS = [
    (
        "    int t = t_begin + warp * WARP_TOKENS;\n",
        "    const int nsteps = (t_end - t_begin) / CTA_TOKENS;\n"
        "    int step = 0;\n"
        "    int t = t_begin + ((split * 7 + hk * 3) % nsteps) * CTA_TOKENS + warp * WARP_TOKENS;\n",
    ),
    (
        "        const int t_next = t + CTA_TOKENS;\n        const bool more = t_next < t_end;\n",
        "        int t_next = t + CTA_TOKENS;\n"
        "        if (t_next >= t_end) t_next -= t_end - t_begin;\n"
        "        const bool more = ++step < nsteps;\n",
    ),
]

# CTAs numbered group-fastest (each group gets CTAs the block scheduler places first and
# second on their SMs), and the last 1 / POOL_DIV of every split's range put into a pool shared
# by the splits of one residue class modulo NPOOL: a warp first walks its static steps, then draws
# 8-token chunks from the pool's counter (lane 0, one draw ahead), so warps that run ahead take
# more of the tail. Only when every split is full (T % tokens_per_split == 0) and has >= 2 steps.
def balance_edits(npool: int, pool_div: int) -> list[tuple[str, str]]:
    return [
        (
            "__device__ unsigned int group_tickets[MAX_GROUPS] = {};\n",
            "__device__ unsigned int group_tickets[MAX_GROUPS] = {};\n"
            f"constexpr int NPOOL = {npool};\n"
            f"constexpr int POOL_DIV = {pool_div};\n"
            "constexpr int POOL_STRIDE = 32;  // one 128-byte line a counter\n"
            "__device__ unsigned int pool_tickets[MAX_GROUPS * NPOOL * POOL_STRIDE] = {};\n",
        ),
        (
            "    const int split = blockIdx.x, splits = gridDim.x;\n"
            "    const int hk = blockIdx.y, kv_heads = gridDim.y, b = blockIdx.z;\n"
            "    const int group = b * kv_heads + hk;\n",
            "    const int splits = gridDim.x, kv_heads = gridDim.y;\n"
            "    const int groups_all = kv_heads * gridDim.z;\n"
            "    const int linear = blockIdx.x + splits * (blockIdx.y + kv_heads * blockIdx.z);\n"
            "    const int group = linear % groups_all, split = linear / groups_all;\n",
        ),
        (
            "    int t = t_begin + warp * WARP_TOKENS;\n",
            "    int t = t_begin + warp * WARP_TOKENS;\n"
            "    const int steps = (t_end - t_begin) / CTA_TOKENS;\n"
            "    const bool pooled = T % tokens_per_split == 0 && steps >= 2;\n"
            "    const int static_steps = pooled ? steps - max(1, steps / POOL_DIV) : steps;\n"
            "    const int pool = split % NPOOL;\n"
            "    const unsigned members = (splits - pool + NPOOL - 1) / NPOOL;\n"
            "    const unsigned pool_chunks = pooled ? members * (steps - static_steps) * WARPS : 0u;\n"
            "    const int pool_base = pool * tokens_per_split + static_steps * CTA_TOKENS;\n"
            "    const int ctr = (group * NPOOL + pool) * POOL_STRIDE;\n"
            "    int left = static_steps - 1;  // static iterations after the current one\n"
            "    unsigned drawn = 0;\n"
            "    if (left == 0 && pool_chunks > 0 && lane == 0) drawn = atomicAdd(&pool_tickets[ctr], 1u);\n",
        ),
        (
            "        const int t_next = t + CTA_TOKENS;\n        const bool more = t_next < t_end;\n",
            "        int t_next;\n"
            "        bool more;\n"
            "        if (left > 0) {\n"
            "            --left;\n"
            "            t_next = t + CTA_TOKENS;\n"
            "            more = true;\n"
            "            if (left == 0 && pool_chunks > 0 && lane == 0) drawn = atomicAdd(&pool_tickets[ctr], 1u);\n"
            "        } else {\n"
            "            const unsigned d = __shfl_sync(0xffffffffu, drawn, 0);\n"
            "            more = d < pool_chunks;\n"
            "            const unsigned i = d % members, kk = d / members;\n"
            "            t_next = pool_base + static_cast<int>(i) * (NPOOL * tokens_per_split) +\n"
            "                     static_cast<int>(kk) * WARP_TOKENS;\n"
            "            if (more && lane == 0) drawn = atomicAdd(&pool_tickets[ctr], 1u);\n"
            "        }\n",
        ),
        (
            "    if (threadIdx.x == 0) group_tickets[group] = 0;  // ready for the next launch\n",
            "    if (threadIdx.x == 0) group_tickets[group] = 0;  // ready for the next launch\n"
            "    if (threadIdx.x < NPOOL) pool_tickets[(group * NPOOL + threadIdx.x) * POOL_STRIDE] = 0;\n",
        ),
    ]



# --- fifth round: K and V through a shared-memory ring filled by bulk copies -------------------
#
# One elected thread (thread 0) issues, for each 16-token stage, two bulk copies (4 KB of K and
# 4 KB of V, contiguous in [B, Hkv, T, D]) that complete on the stage's "full" mbarrier; a warp
# waits on the four stages of its 64-token step, copies its rows into registers (LDS.128, a
# half-warp one 256-byte row), and lane 0 arrives on each stage's "empty" mbarrier (count 8).
# Thread 0 then waits for those four "empty" phases and refills the slots NST stages ahead.
# Row 2 warp + half of stage 4 j + u is what the register kernel calls unroll u of warp `warp`.
# The ring is reused as red_acc after the loop (a barrier first). RING_DYNAMIC puts the ring in
# dynamic shared memory (the launch must pass NST * 8 KB and raise the function's limit), which
# the suite's launcher does not do today: a what-if for deeper rings.

RING_FUNCTIONS = r"""
constexpr int STAGE_TOKENS = 16;                        // tokens a ring stage holds
constexpr int STAGES_PER_STEP = CTA_TOKENS / STAGE_TOKENS;
constexpr unsigned HALF_STAGE = STAGE_TOKENS * D * 2;   // bytes of K (or V) in a stage
constexpr unsigned STAGE_BYTES = 2 * HALF_STAGE;
static_assert(STAGES_PER_STEP == UNROLL, "unroll u of a warp reads stage u of its step");
static_assert(STAGE_TOKENS == 2 * WARPS, "a stage holds one row per half-warp");
static_assert(NST * STAGE_BYTES >= STATES * G * D * 4, "the ring doubles as red_acc");

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void bar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_expect(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void bar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ bool bar_test(unsigned bar, unsigned parity) {
    unsigned done;
    asm volatile(
        "{\n .reg .pred ready;\n"
        " mbarrier.try_wait.parity.shared::cta.b64 ready, [%1], %2;\n"
        " selp.u32 %0, 1, 0, ready;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    return done != 0;
}
__device__ __forceinline__ void bar_wait(unsigned bar, unsigned parity) {
    while (!bar_test(bar, parity)) {
    }
}
__device__ __forceinline__ void bulk_copy(unsigned dst, const void* src, unsigned bytes,
                                          unsigned bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
        ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
        : "memory");
}

"""

RING_SHARED_STATIC = (
    "    __shared__ __align__(128) unsigned char ring[NST * STAGE_BYTES];\n"
    "    __shared__ __align__(8) unsigned long long ring_full[NST], ring_empty[NST];\n"
    "    float (*red_acc)[G][D] = reinterpret_cast<float (*)[G][D]>(ring);\n"
)
RING_SHARED_DYNAMIC = (
    "    extern __shared__ __align__(128) unsigned char ring[];\n"
    "    __shared__ __align__(8) unsigned long long ring_full[NST], ring_empty[NST];\n"
    "    float (*red_acc)[G][D] = reinterpret_cast<float (*)[G][D]>(ring);\n"
)

RING_PROLOGUE = r"""    // Ring set-up: thread 0 initialises the barriers and issues the first NST stages.
#if RING_INTERLEAVE
    const int nsteps = (T / CTA_TOKENS - split + splits - 1) / splits;
#else
    const int nsteps = (t_end - t_begin) / CTA_TOKENS;
#endif
    const int total = nsteps * STAGES_PER_STEP;
    const unsigned ring_s = smem_u32(ring), full_s = smem_u32(ring_full);
    const unsigned empty_s = smem_u32(ring_empty);
    const unsigned short* kg = k + static_cast<size_t>(group) * T * D;
    const unsigned short* vg = v + static_cast<size_t>(group) * T * D;
    auto issue = [&](int g) {
        const int j = g / STAGES_PER_STEP, u = g % STAGES_PER_STEP, slot = g % NST;
#if RING_INTERLEAVE
        const int tok = (split + j * splits) * CTA_TOKENS + u * STAGE_TOKENS;
#else
        const int tok = t_begin + j * CTA_TOKENS + u * STAGE_TOKENS;
#endif
        const unsigned bar = full_s + 8 * slot, dst = ring_s + slot * STAGE_BYTES;
        bar_expect(bar, STAGE_BYTES);
        bulk_copy(dst, kg + static_cast<size_t>(tok) * D, HALF_STAGE, bar);
        bulk_copy(dst + HALF_STAGE, vg + static_cast<size_t>(tok) * D, HALF_STAGE, bar);
    };
    if (threadIdx.x == 0) {
        for (int i = 0; i < NST; ++i) {
            bar_init(full_s + 8 * i, 1);
            bar_init(empty_s + 8 * i, WARPS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int g = 0; g < min(NST, total); ++g) issue(g);
    }
    uint4 kr[UNROLL], vr[UNROLL];
"""

RING_LOOP_HEAD = r"""    for (int j = 0; j < nsteps; ++j) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int g = j * UNROLL + u, slot = g % NST;
            bar_wait(full_s + 8 * slot, (g / NST) & 1);
            const uint4* row = reinterpret_cast<const uint4*>(ring + slot * STAGE_BYTES) +
                               (2 * warp + half) * LANES_PER_TOKEN + c;
            kr[u] = row[0];
            vr[u] = row[HALF_STAGE / 16];
        }
        __syncwarp();
        if (lane == 0) {
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) bar_arrive(empty_s + 8 * ((j * UNROLL + u) % NST));
        }
        if (threadIdx.x == 0) {
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const int g = j * UNROLL + u;
                if (g + NST < total) {
                    bar_wait(empty_s + 8 * (g % NST), (g / NST) & 1);
                    issue(g + NST);
                }
            }
        }
        float s[UNROLL * G];  // partial dot products over this lane's 8 dims, index u * G + h
"""


def ring_edits(nst: int, interleave: bool, dynamic: bool) -> list[tuple[str, str]]:
    """The recorded loop with its K and V loads replaced by the bulk-copy ring."""
    defines = f"#define NST {nst}\n#define RING_INTERLEAVE {int(interleave)}\n"
    return [
        ("// Grid (splits, Hkv, B).", defines + RING_FUNCTIONS + "// Grid (splits, Hkv, B)."),
        ("    __shared__ __align__(16) float red_acc[STATES][G][D];\n",
         RING_SHARED_DYNAMIC if dynamic else RING_SHARED_STATIC),
        (
            "    int t = t_begin + warp * WARP_TOKENS;\n"
            "    uint4 kr[UNROLL], vr[UNROLL];\n"
            "    load_rows(kr, kh, t, half);\n"
            "    load_rows(vr, vh, t, half);\n",
            RING_PROLOGUE,
        ),
        (
            "    while (true) {\n"
            "        float s[UNROLL * G];  // partial dot products over this lane's 8 dims, index u * G + h\n",
            RING_LOOP_HEAD,
        ),
        (
            "        const int t_next = t + CTA_TOKENS;\n"
            "        const bool more = t_next < t_end;\n"
            "        if (more) load_rows(kr, kh, t_next, half);\n",
            "",
        ),
        (
            "        if (!more) break;\n"
            "        load_rows(vr, vh, t_next, half);\n"
            "        t = t_next;\n"
            "    }\n",
            "    }\n    __syncthreads();  // every warp is done with the ring: it becomes red_acc\n",
        ),
    ]


# Interleaved steps on the recorded register loop: split s takes its group's 64-token steps
# s, s + splits, s + 2 splits, ..., so the CTAs of a group sweep one window of the context
# together. Every split is non-empty because T / 64 >= splits.
INTERLEAVE_EDITS = [
    ("    int t = t_begin + warp * WARP_TOKENS;\n",
     "    int t = split * CTA_TOKENS + warp * WARP_TOKENS;\n"),
    (
        "        const int t_next = t + CTA_TOKENS;\n        const bool more = t_next < t_end;\n",
        "        const int t_next = t + splits * CTA_TOKENS;\n        const bool more = t_next < T;\n",
    ),
]


# Interleaved only where a split has at least 8 steps (32K on the suite's plan); shorter ranges
# (1K: one step, 4K: two) keep the recorded contiguous walk, where the tenth run saw no gain.
INTERLEAVE_LONG_EDITS = [
    ("    int t = t_begin + warp * WARP_TOKENS;\n",
     "    const bool interleave = tokens_per_split >= 8 * CTA_TOKENS;\n"
     "    const int stride = interleave ? splits * CTA_TOKENS : CTA_TOKENS;\n"
     "    const int t_stop = interleave ? T : t_end;\n"
     "    int t = (interleave ? split * CTA_TOKENS : t_begin) + warp * WARP_TOKENS;\n"),
    (
        "        const int t_next = t + CTA_TOKENS;\n        const bool more = t_next < t_end;\n",
        "        const int t_next = t + stride;\n        const bool more = t_next < t_stop;\n",
    ),
]

# --- sixth round of the tail: the group merge shared by the last CTAs of a group ----------------
#
# The last MERGERS ticket holders of a group each merge G / MERGERS query heads: the CTA with the
# last ticket starts at once; the ones before it (which hold tickets splits - MERGERS ..
# splits - 2) wait, thread 0 polling the counter with an acquire load until it reaches splits,
# then merge their heads. Each merging CTA then adds one more to the counter (acq_rel), and the
# one that brings it to splits + mergers - 1 puts it back to zero: every merger has seen the
# counter at >= splits before its own add, so none is still polling when it is reset. Waiting
# CTAs hold SM slots, so they wait only while at most (MERGERS - 1) * groups <= SPIN_LIMIT of them
# can wait at once: fewer than the SMs of any sm_90 part, so a slot stays free for the CTAs still
# to run; otherwise (and when splits < MERGERS) the last CTA merges alone, as recorded.
# FP16_PART additionally stores the partial accumulators as fp16 normalised by the CTA's l
# (|acc / l| <= max |v|, so the values must stay under 65504), halving the merge's bytes.

MERGERS_FUNCTIONS = r"""
constexpr int SPIN_LIMIT = 64;  // waiting CTAs allowed at once; every sm_90 part has more SMs

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Heads [h_first, h_first + NH) of one group's merge (NH = 1 or 2): thread (h, d) owns dimension d
// of head h_first + threadIdx.x / D; with NH = 1 threads 128-255 only help with the weights.
template <int NH>
__device__ __noinline__ void merge_heads(const float* __restrict__ part_m,
                                         const float* __restrict__ part_l,
                                         const float* __restrict__ part_acc,
                                         unsigned short* __restrict__ out,
                                         float (*weight)[MAX_SPLITS], int q_row, int splits,
                                         int h_first) {
    static_assert(NH * D <= THREADS, "one dimension a thread");
    const bool active = threadIdx.x < NH * D;
    const int h = h_first + (active ? threadIdx.x / D : 0), d = threadIdx.x % D;
    const float* acc_src = part_acc + static_cast<size_t>(q_row + h) * splits * D + d;
    float a[MERGE_CHUNK];
    if (active) {
#pragma unroll
        for (int i = 0; i < MERGE_CHUNK; ++i) {
            if (i < splits) a[i] = __ldcg(acc_src + static_cast<size_t>(i) * D);
        }
    }
    {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wh = warp / 2;
        const float* pm = part_m + static_cast<size_t>(q_row + wh) * splits;
        const float* pl = part_l + static_cast<size_t>(q_row + wh) * splits;
        float wm[MAX_SPLITS / 32], wl[MAX_SPLITS / 32];
        float big = __int_as_float(0xff800000u);
#pragma unroll
        for (int r = 0; r < MAX_SPLITS / 32; ++r) {
            const int i = lane + 32 * r;
            wm[r] = i < splits ? __ldcg(pm + i) : __int_as_float(0xff800000u);
            wl[r] = i < splits ? __ldcg(pl + i) : 0.0f;
            big = fmaxf(big, wm[r]);
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) big = fmaxf(big, __shfl_xor_sync(0xffffffffu, big, off));
        float sum = 0.0f;
#pragma unroll
        for (int r = 0; r < MAX_SPLITS / 32; ++r) {
            wm[r] = fast_exp2(wm[r] - big);
            sum = fmaf(wm[r], wl[r], sum);
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        const float inv = 1.0f / sum;
        if (warp % 2 == 0) {
#pragma unroll
            for (int r = 0; r < MAX_SPLITS / 32; ++r) {
                if (lane + 32 * r < splits) weight[wh][lane + 32 * r] = wm[r] * inv;
            }
        }
    }
    __syncthreads();
    if (!active) return;
    float val = 0.0f;
    for (int base = 0; base < splits; base += MERGE_CHUNK) {
        if (base > 0) {
#pragma unroll
            for (int i = 0; i < MERGE_CHUNK; ++i) {
                if (base + i < splits) a[i] = __ldcg(acc_src + static_cast<size_t>(base + i) * D);
            }
        }
#pragma unroll
        for (int i = 0; i < MERGE_CHUNK; ++i) {
            if (base + i < splits) val = fmaf(weight[h][base + i], a[i], val);
        }
    }
    out[static_cast<size_t>(q_row + h) * D + d] = to_bf16(val);
}

"""

MERGERS_TAIL_OLD = (
    "    if (ticket != static_cast<unsigned>(splits - 1)) return;\n"
    "\n"
    "    merge_splits(part_m, part_l, part_acc, out, weight, q_row, splits);\n"
    "    if (threadIdx.x == 0) group_tickets[group] = 0;  // ready for the next launch\n"
)
MERGERS_TAIL_NEW = r"""    const int waiting = (MERGERS - 1) * static_cast<int>(gridDim.y * gridDim.z);
    const int mergers = splits >= MERGERS && waiting <= SPIN_LIMIT ? MERGERS : 1;
    const int rank = splits - 1 - static_cast<int>(ticket);  // 0 for the last CTA of the group
    if (rank >= mergers) return;
    if (rank > 0) {  // wait for the group's last ticket: every partial is published then
        if (threadIdx.x == 0) {
            while (load_acquire(&group_tickets[group]) < static_cast<unsigned>(splits)) {
            }
        }
        __syncthreads();
    }
    if (mergers == 1) {
        merge_splits(part_m, part_l, part_acc, out, weight, q_row, splits);
    } else {
        merge_heads<G / MERGERS>(part_m, part_l, part_acc, out, weight, q_row, splits,
                                 rank * (G / MERGERS));
    }
    if (threadIdx.x == 0 &&
        take_ticket(&group_tickets[group]) == static_cast<unsigned>(splits + mergers - 1)) {
        group_tickets[group] = 0;  // every merger has passed its wait: ready for the next launch
    }
"""


def mergers_edits(mergers: int) -> list[tuple[str, str]]:
    """The group merge shared by the group's last `mergers` CTAs, G / mergers heads each."""
    return [
        ("// Grid (splits, Hkv, B).",
         f"#define MERGERS {mergers}\n" + MERGERS_FUNCTIONS + "// Grid (splits, Hkv, B)."),
        (MERGERS_TAIL_OLD, MERGERS_TAIL_NEW),
    ]


FP16_FUNCTIONS = r"""
// Two fp32 values as one fp16x2 word (x in the low half) and back.
__device__ __forceinline__ unsigned pack_f16(float x, float y) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(y), "f"(x));
    return r;
}
__device__ __forceinline__ float2 unpack_f16(unsigned r) {
    float2 f;
    asm("{\n .reg .f16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.f32.f16 %0, lo;\n"
        " cvt.f32.f16 %1, hi;\n}\n" : "=f"(f.x), "=f"(f.y) : "r"(r));
    return f;
}

"""

FP16_EDITS = [
    ("// The merge of one group's splits,", FP16_FUNCTIONS + "// The merge of one group's splits,"),
    (
        "    const float2* acc_src =\n"
        "        reinterpret_cast<const float2*>(part_acc + static_cast<size_t>(q_row + h) * splits * D) + d2;\n"
        "    float2 a[MERGE_CHUNK];\n",
        "    const unsigned* acc_src = reinterpret_cast<const unsigned*>(part_acc) +\n"
        "                              static_cast<size_t>(q_row + h) * splits * (D / 2) + d2;\n"
        "    unsigned a[MERGE_CHUNK];\n",
    ),
    ("                if (lane + 32 * r < splits) weight[wh][lane + 32 * r] = wm[r] * inv;\n"
     "            }\n"
     "        }\n"
     "    }\n"
     "    __syncthreads();\n"
     "\n"
     "    float2 val",
     "                if (lane + 32 * r < splits) weight[wh][lane + 32 * r] = wm[r] * wl[r] * inv;\n"
     "            }\n"
     "        }\n"
     "    }\n"
     "    __syncthreads();\n"
     "\n"
     "    float2 val"),
    (
        "                val.x = fmaf(w, a[i].x, val.x);\n"
        "                val.y = fmaf(w, a[i].y, val.y);\n",
        "                const float2 f = unpack_f16(a[i]);\n"
        "                val.x = fmaf(w, f.x, val.x);\n"
        "                val.y = fmaf(w, f.y, val.y);\n",
    ),
    (
        "        reinterpret_cast<float2*>(part_acc + p * D)[d2] = val;\n",
        "        const float inv_l = 1.0f / cta_l[h];  // acc / l: a convex combination of V rows\n"
        "        reinterpret_cast<unsigned*>(part_acc)[p * (D / 2) + d2] =\n"
        "            pack_f16(val.x * inv_l, val.y * inv_l);\n",
    ),
]


# The second call's variants. LIGHT_* is "merge by 2 CTAs" without the second acquire-release add
# at the end of every merger: the one waiting CTA puts the counter back to zero itself once it has
# seen the last ticket, and it polls with relaxed loads and one fence after the wait.
LIGHT_FUNCTIONS = r"""
__device__ __forceinline__ unsigned load_relaxed(const unsigned* p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void fence_acq_rel() {
    asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
}

"""

LIGHT_TAIL_NEW = r"""    const int waiting = static_cast<int>(gridDim.y * gridDim.z);
    const int mergers = splits >= 2 && waiting <= SPIN_LIMIT ? 2 : 1;
    const int rank = splits - 1 - static_cast<int>(ticket);  // 0 for the last CTA of the group
    if (rank >= mergers) return;
    if (rank > 0) {  // the one waiting CTA: the last ticket publishes every partial
        if (threadIdx.x == 0) {
            while (load_relaxed(&group_tickets[group]) < static_cast<unsigned>(splits)) {
            }
            fence_acq_rel();
            group_tickets[group] = 0;  // nobody reads it again in this launch
        }
        __syncthreads();
        merge_heads<G / 2>(part_m, part_l, part_acc, out, weight, q_row, splits, G / 2);
        return;
    }
    if (mergers == 1) {
        merge_splits(part_m, part_l, part_acc, out, weight, q_row, splits);
        if (threadIdx.x == 0) group_tickets[group] = 0;
    } else {
        merge_heads<G / 2>(part_m, part_l, part_acc, out, weight, q_row, splits, 0);
    }
"""


def light_mergers_edits() -> list[tuple[str, str]]:
    return [
        ("// Grid (splits, Hkv, B).",
         "#define MERGERS 2\n" + MERGERS_FUNCTIONS + LIGHT_FUNCTIONS + "// Grid (splits, Hkv, B)."),
        (MERGERS_TAIL_OLD, LIGHT_TAIL_NEW),
    ]


# Ticket first: thread 0 draws the ticket with a relaxed add as soon as its loop ends, so the
# round trip overlaps the CTA merge. A CTA that is not last stores its partial, then counts it
# done on a second per-group counter with an acquire-release add. The last CTA keeps its own
# state on chip (no partial store, no release wait before its ticket), polls the done counter
# until the other splits - 1 are published (they drew their tickets before it, so they are
# running: no deadlock whatever the residency), then merges, taking its own (m, l, acc) from
# shared memory and registers. It puts both counters back to zero.
_RECORDED = SOURCE_PATH.read_text()
MISSING = "\0 anchor of another version of 04"  # an edit that makes its variant skip


def _from(start: str) -> str:
    """The recorded source from `start` to its end, or MISSING."""
    return _RECORDED[_RECORDED.index(start) :] if start in _RECORDED else MISSING


def _between(start: str, end: str) -> str:
    """The recorded source from `start` to the end of `end`, or MISSING."""
    if start not in _RECORDED or end not in _RECORDED:
        return MISSING
    return _RECORDED[_RECORDED.index(start) : _RECORDED.index(end) + len(end)]

_CTA_TAIL_ANCHOR = "    {  // thread (h, d2) merges dimensions 2 d2 and 2 d2 + 1 of head h"
TICKET_FIRST_TAIL = r"""    // thread (h, d2) merges dimensions 2 d2 and 2 d2 + 1 of head h: 16 weighted float2 sums
    const int h = threadIdx.x / (D / 2), d2 = threadIdx.x % (D / 2);
    float2 val = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int st = 0; st < STATES; ++st) {
        const float w = red_w[st][h];
        const float2 a = *reinterpret_cast<const float2*>(&red_acc[st][h][2 * d2]);
        val.x = fmaf(w, a.x, val.x);
        val.y = fmaf(w, a.y, val.y);
    }
    if (threadIdx.x == 0) ticket = drawn;
    __syncthreads();
    if (ticket != static_cast<unsigned>(splits - 1)) {
        const size_t p = static_cast<size_t>(q_row + h) * splits + split;
        if (d2 == 0) {
            part_m[p] = cta_m[h];
            part_l[p] = cta_l[h];
        }
        reinterpret_cast<float2*>(part_acc + p * D)[d2] = val;
        __syncthreads();
        if (threadIdx.x == 0) take_ticket(&group_done[group]);  // publishes the partial
        return;
    }
    if (threadIdx.x == 0) {
        while (load_relaxed(&group_done[group]) < static_cast<unsigned>(splits - 1)) {
        }
        fence_acq_rel();
    }
    __syncthreads();
    merge_splits(part_m, part_l, part_acc, out, weight, q_row, splits, split, cta_m, cta_l, val);
    if (threadIdx.x == 0) {
        group_tickets[group] = 0;  // ready for the next launch
        group_done[group] = 0;
    }
}
"""

TICKET_FIRST_EDITS = [
    ("__device__ unsigned int group_tickets[MAX_GROUPS] = {};\n",
     "__device__ unsigned int group_tickets[MAX_GROUPS] = {};\n"
     "__device__ unsigned int group_done[MAX_GROUPS] = {};\n" + LIGHT_FUNCTIONS),
    ("                                          float (*weight)[MAX_SPLITS], int q_row, int splits) {\n",
     "                                          float (*weight)[MAX_SPLITS], int q_row, int splits,\n"
     "                                          int own, const float* own_m, const float* own_l,\n"
     "                                          float2 own_val) {\n"),
    ("            wm[r] = i < splits ? __ldcg(pm + i) : __int_as_float(0xff800000u);\n"
     "            wl[r] = i < splits ? __ldcg(pl + i) : 0.0f;\n",
     "            wm[r] = i < splits ? (i == own ? own_m[wh] : __ldcg(pm + i)) : __int_as_float(0xff800000u);\n"
     "            wl[r] = i < splits ? (i == own ? own_l[wh] : __ldcg(pl + i)) : 0.0f;\n"),
    ("                val.x = fmaf(w, a[i].x, val.x);\n"
     "                val.y = fmaf(w, a[i].y, val.y);\n",
     "                const float2 ai = base + i == own ? own_val : a[i];\n"
     "                val.x = fmaf(w, ai.x, val.x);\n"
     "                val.y = fmaf(w, ai.y, val.y);\n"),
    ("    // Merge the CTA's 16 half-warp states; keep the result unnormalised for the split merge.\n",
     "    unsigned drawn = 0;  // the ticket goes out first: its round trip overlaps the CTA merge\n"
     "    if (threadIdx.x == 0) drawn = atomicAdd(&group_tickets[group], 1u);\n"
     "    // Merge the CTA's 16 half-warp states; keep the result unnormalised for the split merge.\n"),
    (_from(_CTA_TAIL_ANCHOR), TICKET_FIRST_TAIL),
]


LB3_EDITS = [("__launch_bounds__(THREADS, 2)", "__launch_bounds__(THREADS, 3)")]

# The twelfth round. Chunks dealt inside a CTA: each warp's first two 8-token chunks are fixed
# (warp w takes chunks w and w + 8, as now), the rest are drawn from a counter in shared memory
# (lane 0, two iterations ahead), so a warp the SM serves faster takes more of its CTA's range
# and the CTA's warps end together; the order of the range's chunks, and so the walk over memory,
# stays what it is.
DEAL_EDITS = [
    (
        "    __shared__ unsigned int ticket;\n",
        "    __shared__ unsigned int ticket;\n    __shared__ int next_chunk;\n",
    ),
    (
        "    load_rows(vr, vh, t, half);\n\n",
        "    load_rows(vr, vh, t, half);\n"
        "    int t_next = t + CTA_TOKENS;  // the second chunk is fixed too; the rest are drawn\n"
        "    if (threadIdx.x == 0) next_chunk = 2 * WARPS;\n"
        "    __syncthreads();\n\n",
    ),
    (
        "    while (true) {\n        float s[UNROLL * G];",
        "    while (true) {\n"
        "        int drawn = 0;  // the chunk of the iteration after next\n"
        "        if (lane == 0) drawn = atomicAdd(&next_chunk, 1);\n"
        "        float s[UNROLL * G];",
    ),
    (
        "        const int t_next = t + CTA_TOKENS;\n        const bool more = t_next < t_end;\n",
        "        const bool more = t_next < t_end;\n",
    ),
    (
        "        load_rows(vr, vh, t_next, half);\n        t = t_next;\n",
        "        load_rows(vr, vh, t_next, half);\n"
        "        t = t_next;\n"
        "        t_next = t_begin + __shfl_sync(0xffffffffu, drawn, 0) * WARP_TOKENS;\n",
    ),
]

# The next iteration's V rows loaded one at a time as soon as this iteration's P V has used each
# (the recorded loop loads all four after the last), so V's loads leave up to 3/4 of a P V earlier.
V_AS_USED_EDITS = [
    (
        "                for (int j = 0; j < 8; ++j) acc[h][j] = fmaf(pu, vf[j], acc[h][j]);\n"
        "            }\n"
        "        }\n"
        "        if (!more) break;\n"
        "        load_rows(vr, vh, t_next, half);\n",
        "                for (int j = 0; j < 8; ++j) acc[h][j] = fmaf(pu, vf[j], acc[h][j]);\n"
        "            }\n"
        "            if (more) {\n"
        "                const size_t row = static_cast<size_t>(t_next + u * TOKENS_PER_LOAD + half) * D;\n"
        "                vr[u] = __ldg(reinterpret_cast<const uint4*>(vh + row));\n"
        "            }\n"
        "        }\n"
        "        if (!more) break;\n",
    ),
]

# Each lane's own ring in shared memory: the lane copies its K and V chunks of the next
# LANE_SLOTS - 1 warp iterations with cp.async (the addresses its __ldg loads read) and reads them
# back itself, so no lane waits for another and no warp for another (the tenth round's bulk-copy
# ring tied a CTA's eight warps to one issuing thread). 2 slots: the next iteration's K and V in
# flight for the whole of this one (the register loop starts V's a step later); 3 slots: two
# iterations ahead, the CTA merge's scratch then aliased into the ring (after a barrier) so that
# two CTAs still fit an SM.
def lane_ring_edits(slots: int) -> list[tuple[str, str]]:
    alias = slots > 2
    edits = [
        (
            "// Adds one to a ticket counter",
            f"constexpr int LANE_SLOTS = {slots};\n"
            "constexpr unsigned LANE_SLOT_BYTES = WARPS * 2 * UNROLL * 32 * 16;\n"
            "__device__ __forceinline__ void lane_copy(unsigned dst, const void* src) {\n"
            '    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n" ::"r"(dst), "l"(src) : "memory");\n'
            "}\n"
            "__device__ __forceinline__ uint4 lane_read(unsigned at) {\n"
            "    uint4 v;\n"
            '    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\\n"\n'
            '                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(at) : "memory");\n'
            "    return v;\n"
            "}\n\n"
            "// Adds one to a ticket counter",
        ),
        (
            "    uint4 kr[UNROLL], vr[UNROLL];\n"
            "    load_rows(kr, kh, t, half);\n"
            "    load_rows(vr, vh, t, half);\n",
            "    uint4 kr[UNROLL], vr[UNROLL];\n"
            "    const unsigned ring_at = static_cast<unsigned>(__cvta_generic_to_shared(lane_ring)) +\n"
            "                             16 * (warp * 2 * UNROLL * 32 + lane);\n"
            "    auto issue = [&](int tt, int slot) {\n"
            "        if (tt < t_end) {\n"
            "#pragma unroll\n"
            "            for (int u = 0; u < UNROLL; ++u) {\n"
            "                const size_t row = static_cast<size_t>(tt + u * TOKENS_PER_LOAD + half) * D;\n"
            "                lane_copy(ring_at + slot * LANE_SLOT_BYTES + 512 * u, kh + row);\n"
            "                lane_copy(ring_at + slot * LANE_SLOT_BYTES + 512 * (UNROLL + u), vh + row);\n"
            "            }\n"
            "        }\n"
            '        asm volatile("cp.async.commit_group;\\n" ::: "memory");\n'
            "    };\n"
            "#pragma unroll\n"
            "    for (int s = 0; s < LANE_SLOTS - 1; ++s) issue(t + s * CTA_TOKENS, s);\n"
            "    int ring_slot = 0;\n",
        ),
        (
            "    while (true) {\n        float s[UNROLL * G];",
            "    while (true) {\n"
            "        issue(t + (LANE_SLOTS - 1) * CTA_TOKENS, ring_slot == 0 ? LANE_SLOTS - 1 : ring_slot - 1);\n"
            '        asm volatile("cp.async.wait_group %0;\\n" ::"n"(LANE_SLOTS - 1) : "memory");\n'
            "#pragma unroll\n"
            "        for (int u = 0; u < UNROLL; ++u) kr[u] = lane_read(ring_at + ring_slot * LANE_SLOT_BYTES + 512 * u);\n"
            "        float s[UNROLL * G];",
        ),
        ("        if (more) load_rows(kr, kh, t_next, half);\n", ""),
        (
            "        // P V: every lane needs all 16 probabilities of its half.\n",
            "#pragma unroll\n"
            "        for (int u = 0; u < UNROLL; ++u)\n"
            "            vr[u] = lane_read(ring_at + ring_slot * LANE_SLOT_BYTES + 512 * (UNROLL + u));\n"
            "        // P V: every lane needs all 16 probabilities of its half.\n",
        ),
        (
            "        load_rows(vr, vh, t_next, half);\n        t = t_next;\n",
            "        ring_slot = ring_slot == LANE_SLOTS - 1 ? 0 : ring_slot + 1;\n        t = t_next;\n",
        ),
    ]
    if alias:
        edits += [
            (
                "    __shared__ __align__(16) float red_acc[STATES][G][D];\n",
                "    extern __shared__ __align__(128) uint4 lane_ring[];\n"
                "    float (*red_acc)[G][D] = reinterpret_cast<float (*)[G][D]>(lane_ring);\n",
            ),
            (
                "    // Merge the CTA's 16 half-warp states; keep the result unnormalised for the split merge.\n",
                "    __syncthreads();  // every warp is done with its ring before red_acc reuses it\n"
                "    // Merge the CTA's 16 half-warp states; keep the result unnormalised for the split merge.\n",
            ),
        ]
    else:
        edits += [
            (
                "    __shared__ __align__(16) float red_acc[STATES][G][D];\n",
                "    __shared__ __align__(16) float red_acc[STATES][G][D];\n"
                "    extern __shared__ __align__(128) uint4 lane_ring[];\n",
            ),
        ]
    return edits


# The fourteenth round. Ranges skewed by where the block scheduler places a CTA: CTAs numbered
# group-fastest (so every group holds CTAs placed first and second on their SMs), and the splits
# placed first (linear index below the SM count) take `skew`/128 of a range more, the others as
# much less, in 8-token chunks (a range need no longer be a multiple of the CTA's 64-token step:
# warps past the end of a short last step sit the loop out with an empty state). The last split
# takes what is left. Hypothesis: the twelfth round's stamps had the CTAs placed second on their SM
# end about a microsecond after those placed first; moving work to the first-placed ones should
# end both together. A negative skew is the control (it should be slower). Only where every split
# is a whole number of chunks and the skew is at least a chunk (32K on the suite's plan).
SCRATCH_SMS = 132  # the H200's SM count; a scratch build, so the launch keeps its arguments

# Ranges counted in 8-token chunks need not be whole CTA steps: a warp whose first chunk lies past
# the range's end skips the loads and the loop, and the CTA merge weighs its empty state at zero.
ACTIVE_GUARD_EDITS = [
    (
        "    load_rows(kr, kh, t, half);\n    load_rows(vr, vh, t, half);\n",
        "    const bool active = t < t_end;  // a short last step leaves some warps without tokens\n"
        "    if (active) {\n"
        "        load_rows(kr, kh, t, half);\n"
        "        load_rows(vr, vh, t, half);\n"
        "    }\n",
    ),
    ("    while (true) {\n        float s[UNROLL * G];", "    if (active) while (true) {\n        float s[UNROLL * G];"),
]


def skew_edits(skew: int, control: bool = False) -> list[tuple[str, str]]:
    """`control`: the same code with the skew zero at run time (the compiler cannot fold it), to
    tell the skew from the cost of the range code (8 bytes of spill at 128 registers)."""
    runtime = " * (T > (1 << 30) ? 1 : 0)" if control else ""
    return balance_edits(4, 4)[1:2] + [
        (
            "    const int t_begin = split * tokens_per_split;\n"
            "    const int t_end = min(T, t_begin + tokens_per_split);\n",
            "    int t_begin = split * tokens_per_split;\n"
            "    int t_end = min(T, t_begin + tokens_per_split);\n"
            "    {\n"
            "        const int chunks = T / WARP_TOKENS, base = chunks / splits;\n"
            f"        const int d = base * ({skew}) / 128{runtime};\n"
            "        if (d != 0 && chunks % splits == 0) {\n"
            f"            const int placed = {SCRATCH_SMS} - group;  // splits s with s * groups_all + group < SMs\n"
            "            const int firsts = placed <= 0 ? 0 : min(splits, (placed + groups_all - 1) / groups_all);\n"
            "            const int f0 = min(split, firsts), f1 = min(split + 1, firsts);\n"
            "            t_begin = (split * base + d * (2 * f0 - split)) * WARP_TOKENS;\n"
            "            t_end = split == splits - 1 ? T\n"
            "                                        : ((split + 1) * base + d * (2 * f1 - split - 1)) * WARP_TOKENS;\n"
            "        }\n"
            "    }\n",
        ),
    ] + ACTIVE_GUARD_EDITS


# The same round, second call. Balanced ranges in 8-token chunks, split s taking chunks
# [s C / S, (s + 1) C / S) of the C = T / 8 of its head, so that any split count works: 33 at 32K
# and 4K makes 264 CTAs, exactly two on each of the 132 SMs, where 32 leaves 8 SMs with one CTA
# (the twelfth round's stamps: those end ~2 µs early, their SMs idle for the rest). The merge
# loads up to MERGE_CHUNK partials at once, so it is raised to 40 for 33 splits (32 would leave
# the 33rd for a second dependent round trip). The control runs the same code on the suite's plan,
# where the ranges are the recorded ones.
BALANCED_EDITS = [
    (
        "    const int t_begin = split * tokens_per_split;\n"
        "    const int t_end = min(T, t_begin + tokens_per_split);\n",
        "    const int chunks = T / WARP_TOKENS;  // tokens_per_split is not used: the range is balanced\n"
        "    const int t_begin = split * chunks / splits * WARP_TOKENS;\n"
        "    const int t_end = (split + 1) * chunks / splits * WARP_TOKENS;\n",
    ),
    *ACTIVE_GUARD_EDITS,
    ("constexpr int MERGE_CHUNK = 32;", "constexpr int MERGE_CHUNK = 40;"),
]


# --- fifteenth round: what the compute costs the stream, what the release costs the tail ---------
#
# Diagnostics (names starting "diag"; their output is not the attention, so they are timed without
# the check): the recorded loop stopped after the stream ("loop only"); the same grid and loads with
# the arithmetic replaced by an XOR fold, so each warp waits for its step's K and V and issues the
# next step's at once ("loads only": 4 KB a warp in flight, against ~2 KB on average in the recorded
# loop); the same two steps deep (8 KB a warp, no arithmetic to hold registers); and the recorded
# kernel with the ticket's acquire-release add made relaxed ("relaxed ticket": no longer ordered, so
# not a candidate, only the price of the release's wait for the partial stores).
_LOOP_START = "    while (true) {\n        float s[UNROLL * G];"
_LOOP_END = "        t = t_next;\n    }\n"
_LOOP = _between(_LOOP_START, _LOOP_END)
_STOP = "    // Merge the CTA's 16 half-warp states; keep the result unnormalised for the split merge.\n"
_FOLD = r"""#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            fold ^= KR[u].x ^ KR[u].y ^ KR[u].z ^ KR[u].w ^ VR[u].x ^ VR[u].y ^ VR[u].z ^ VR[u].w;
        }
"""
LOADS_ONLY_LOOP = (
    "    m = 0.0f;\n    l = 1.0f;\n    unsigned fold = 0u;\n    while (true) {\n"
    + _FOLD.replace("KR", "kr").replace("VR", "vr")
    + "        const int t_next = t + CTA_TOKENS;\n        if (t_next >= t_end) break;\n"
    "        load_rows(kr, kh, t_next, half);\n        load_rows(vr, vh, t_next, half);\n"
    "        t = t_next;\n    }\n    acc[0][0] = __uint_as_float(fold & 0x3f800000u);\n"
)
LOADS_2DEEP_LOOP = (
    "    m = 0.0f;\n    l = 1.0f;\n    unsigned fold = 0u;\n    uint4 kr2[UNROLL], vr2[UNROLL];\n"
    "    if (t + CTA_TOKENS < t_end) {\n        load_rows(kr2, kh, t + CTA_TOKENS, half);\n"
    "        load_rows(vr2, vh, t + CTA_TOKENS, half);\n    }\n    while (true) {\n"
    + _FOLD.replace("KR", "kr").replace("VR", "vr")
    + "        if (t + CTA_TOKENS >= t_end) break;\n"
    "        if (t + 2 * CTA_TOKENS < t_end) {\n            load_rows(kr, kh, t + 2 * CTA_TOKENS, half);\n"
    "            load_rows(vr, vh, t + 2 * CTA_TOKENS, half);\n        }\n"
    + _FOLD.replace("KR", "kr2").replace("VR", "vr2")
    + "        if (t + 2 * CTA_TOKENS >= t_end) break;\n"
    "        if (t + 3 * CTA_TOKENS < t_end) {\n            load_rows(kr2, kh, t + 3 * CTA_TOKENS, half);\n"
    "            load_rows(vr2, vh, t + 3 * CTA_TOKENS, half);\n        }\n"
    "        t += 2 * CTA_TOKENS;\n    }\n    acc[0][0] = __uint_as_float(fold & 0x3f800000u);\n"
)
LOOP_ONLY_EDITS = [(_STOP, "    if (acc[0][0] == 1.2345f) out[threadIdx.x] = 0;  // keep the loop\n    return;\n" + _STOP)]
RELAXED_TICKET_EDITS = [("atom.acq_rel.gpu.global.add.u32", "atom.relaxed.gpu.global.add.u32")]
# The tail cut at two more points: every CTA stops after its partial stores ("stop before
# ticket": the loop, the CTA merge and the stores), or after drawing its ticket, the last CTA only
# putting the counter back ("stop after ticket": the release and the ticket's round trip added).
_PUBLISH = "    // Publish the partials and take a ticket in one step"
STOP_BEFORE_TICKET_EDITS = [(_PUBLISH, "    return;\n" + _PUBLISH)]
# Two more cuts: after the CTA merge's first barrier (every warp done, nothing merged), and after
# the CTA merge with its partial stores skipped (kept alive by a store that never happens).
STOP_AT_BARRIER_EDITS = [
    (
        "    __syncthreads();\n    // The 64 weights w = 2^(m_st - M_h)",
        "    __syncthreads();\n    return;\n    // The 64 weights w = 2^(m_st - M_h)",
    )
]
NO_PARTIAL_STORES_EDITS = [
    (
        "        if (d2 == 0) {\n            part_m[p] = cta_m[h];\n            part_l[p] = cta_l[h];\n        }\n"
        "        reinterpret_cast<float2*>(part_acc + p * D)[d2] = val;\n",
        "        if (val.x == 1.2345f) part_m[p] = val.y;  // keep the merge; store nothing\n",
    ),
    (_PUBLISH, "    return;\n" + _PUBLISH),
]
STOP_AFTER_TICKET_EDITS = [
    (
        "    if (ticket != static_cast<unsigned>(splits - 1)) return;\n",
        "    if (ticket == static_cast<unsigned>(splits - 1) && threadIdx.x == 0) {\n"
        "        group_tickets[group] = 0;\n"
        "    }\n"
        "    return;\n",
    )
]

# "tagged partials": no release and no wait on a counter. The launch passes an epoch; every value
# of a partial state (m, l and the D accumulators) carries epoch mod 16 in its low 4 mantissa bits
# (a relative change under 2^-19), so the CTA that merges can tell a value of this launch from one
# left by the previous launch (every launch writes every slot, so a stale slot holds epoch - 1)
# and wait for a value whose tag is not current. The ticket is then a relaxed add, drawn by thread
# 0 as soon as all the CTA's warps are done (its round trip overlaps the CTA merge); the CTA with
# the last ticket stores its partial like the others but merges with its own state from registers.
# The tag checks are folded into the merge's sums (one flag a thread); a thread that saw a stale
# value merges again, out of line, from values re-read until they carry the tag. Off the last CTA's
# path: the release's wait for the partial stores, and the ticket's round trip. Partial buffers
# must start at zero. (Two earlier forms, a re-read loop a value and a batched re-read loop before
# the sums, are described in the notes' fifteenth round.)
TAG_FUNCTIONS = r"""
constexpr unsigned TAG_MASK = 15u;  // low mantissa bits that carry the launch's tag

__device__ __forceinline__ float tagged(float x, unsigned tag) {
    return __uint_as_float((__float_as_uint(x) & ~TAG_MASK) | tag);
}
__device__ __forceinline__ bool has_tag(float x, unsigned tag) {
    return (__float_as_uint(x) & TAG_MASK) == tag;
}
// Strong (relaxed, GPU scope) reads: a weak .cg read may be served again from a stale copy of the
// line, so a loop of them need not ever see the new value
__device__ __forceinline__ float reload(const float* p) {
    float v;
    asm volatile("ld.relaxed.gpu.global.f32 %0, [%1];\n" : "=f"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ float2 reload2(const float2* p) {
    float2 v;
    asm volatile("ld.relaxed.gpu.global.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "l"(p));
    return v;
}
// The slow paths, out of line so the common path keeps the recorded code: spin on one value (or
// one float2) until it carries this launch's tag.
__device__ __noinline__ float current_value(const float* p, unsigned tag) {
    float v = reload(p);
    while (!has_tag(v, tag)) v = reload(p);
    return v;
}
__device__ __noinline__ float2 current_pair(const float2* p, unsigned tag) {
    float2 v = reload2(p);
    while (!has_tag(v.x, tag) || !has_tag(v.y, tag)) v = reload2(p);
    return v;
}
__device__ __forceinline__ unsigned add_relaxed(unsigned* counter) {
    unsigned old;
    asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(old) : "l"(counter) : "memory");
    return old;
}

"""
# The recorded CTA merge up to its partial stores is kept; from there the tail is this.
_PARTIAL_STORES = "        if (d2 == 0) {\n            part_m[p] = cta_m[h];\n"
TAGGED_TAIL = r"""        if (d2 == 0) {
            part_m[p] = tagged(cta_m[h], tag);
            part_l[p] = tagged(cta_l[h], tag);
        }
        reinterpret_cast<float2*>(part_acc + p * D)[d2] = make_float2(tagged(val.x, tag), tagged(val.y, tag));
        if (threadIdx.x == 0) ticket = drawn;
        __syncthreads();
        if (ticket != static_cast<unsigned>(splits - 1)) return;
        merge_splits(part_m, part_l, part_acc, out, weight, q_row, splits, split, cta_m, cta_l, val, tag);
    }
    if (threadIdx.x == 0) group_tickets[group] = 0;  // ready for the next launch
}
"""
DRAW_EARLY = (  # the ticket drawn at the CTA merge's first barrier, as a relaxed add
    "    __syncthreads();\n    // The 64 weights w = 2^(m_st - M_h)",
    "    __syncthreads();\n"
    "    unsigned drawn = 0;  // every warp is done: the ticket goes out, its round trip overlaps the merge\n"
    "    if (threadIdx.x == 0) drawn = add_relaxed(&group_tickets[group]);\n"
    "    // The 64 weights w = 2^(m_st - M_h)",
)
TAGGED_EDITS = [
    ("// Adds one to a ticket counter", TAG_FUNCTIONS + "// Adds one to a ticket counter"),
    (
        "         int T, int tokens_per_split, float scale_log2) {\n",
        "         int T, int tokens_per_split, float scale_log2, unsigned epoch) {\n"
        "    const unsigned tag = epoch & TAG_MASK;\n",
    ),
    (
        "                                          float (*weight)[MAX_SPLITS], int q_row, int splits) {\n",
        "                                          float (*weight)[MAX_SPLITS], int q_row, int splits,\n"
        "                                          int own, const float* own_m, const float* own_l,\n"
        "                                          float2 own_val, unsigned tag) {\n",
    ),
    (
        "            wm[r] = i < splits ? __ldcg(pm + i) : __int_as_float(0xff800000u);\n"
        "            wl[r] = i < splits ? __ldcg(pl + i) : 0.0f;\n",
        "            wm[r] = i < splits ? (i == own ? own_m[wh] : __ldcg(pm + i)) : __int_as_float(0xff800000u);\n"
        "            wl[r] = i < splits ? (i == own ? own_l[wh] : __ldcg(pl + i)) : 0.0f;\n"
        "        }\n"
        "        bool current = true;  // every (m, l) of another split carries this launch's tag\n"
        "#pragma unroll\n"
        "        for (int r = 0; r < MAX_SPLITS / 32; ++r) {\n"
        "            const int i = lane + 32 * r;\n"
        "            if (i < splits && i != own) current &= has_tag(wm[r], tag) & has_tag(wl[r], tag);\n"
        "        }\n"
        "        if (!current) {  // a store that has not landed yet: wait for it\n"
        "#pragma unroll\n"
        "            for (int r = 0; r < MAX_SPLITS / 32; ++r) {\n"
        "                const int i = lane + 32 * r;\n"
        "                if (i < splits && i != own && !has_tag(wm[r], tag)) wm[r] = current_value(pm + i, tag);\n"
        "                if (i < splits && i != own && !has_tag(wl[r], tag)) wl[r] = current_value(pl + i, tag);\n"
        "            }\n"
        "        }\n"
        "#pragma unroll\n"
        "        for (int r = 0; r < MAX_SPLITS / 32; ++r) {\n",
    ),
    (
        "#pragma unroll\n"
        "        for (int i = 0; i < MERGE_CHUNK; ++i) {\n"
        "            if (base + i < splits) {\n"
        "                const float w = weight[h][base + i];\n"
        "                val.x = fmaf(w, a[i].x, val.x);\n"
        "                val.y = fmaf(w, a[i].y, val.y);\n",
        "#pragma unroll\n"
        "        for (int i = 0; i < MERGE_CHUNK; ++i) {\n"
        "            if (base + i < splits) {\n"
        "                const float w = weight[h][base + i];\n"
        "                const float2 ai = base + i == own ? own_val : a[i];\n"
        "                if (base + i != own) current &= has_tag(ai.x, tag) & has_tag(ai.y, tag);\n"
        "                val.x = fmaf(w, ai.x, val.x);\n"
        "                val.y = fmaf(w, ai.y, val.y);\n",
    ),
    DRAW_EARLY,
    (
        "    float2 val = make_float2(0.0f, 0.0f);\n    for (int base = 0; base < splits; base += MERGE_CHUNK) {\n",
        "    bool current = true;  // every accumulator read from another split carries this launch's tag\n"
        "    float2 val = make_float2(0.0f, 0.0f);\n    for (int base = 0; base < splits; base += MERGE_CHUNK) {\n",
    ),
    (
        "    const unsigned packed = to_bf16(val.x)",
        "    if (!current) {  // a store had not landed: merge again from values that carry the tag\n"
        "        val = make_float2(0.0f, 0.0f);\n"
        "#pragma unroll 1\n"
        "        for (int i = 0; i < splits; ++i) {\n"
        "            const float w = weight[h][i];\n"
        "            const float2 ai =\n"
        "                i == own ? own_val : current_pair(acc_src + static_cast<size_t>(i) * (D / 2), tag);\n"
        "            val.x = fmaf(w, ai.x, val.x);\n"
        "            val.y = fmaf(w, ai.y, val.y);\n"
        "        }\n"
        "    }\n"
        "    const unsigned packed = to_bf16(val.x)",
    ),
    (_from(_PARTIAL_STORES), TAGGED_TAIL),
]
# Taking "tagged partials" apart. "tagged, no re-reads": the same with the tag checks removed (not
# ordered, so not a candidate: what the checks cost). "diag early relaxed ticket": the recorded kernel
# with only the ticket moved to the first barrier as a relaxed add, no tags, no checks (unordered:
# what the early draw is worth by itself). "tagged, ticket after stores": tags and checks, but the
# ticket drawn where the recorded kernel draws it, after the partial stores, as a relaxed add (the
# release's wait gone, the checks almost never re-reading).
TAGGED_NO_CHECK_EDITS = [
    ("    return (__float_as_uint(x) & TAG_MASK) == tag;\n", "    return true;  // checks off\n"),
]
# "tagged, strong reads": every read of a partial strong, the first ones too (none is served from a
# stale copy, so the checks should almost never read again).
TAGGED_STRONG_EDITS = [
    (
        "        if (i < splits) a[i] = __ldcg(acc_src + static_cast<size_t>(i) * (D / 2));\n",
        "        if (i < splits) a[i] = reload2(acc_src + static_cast<size_t>(i) * (D / 2));\n",
    ),
    ("(i == own ? own_m[wh] : __ldcg(pm + i))", "(i == own ? own_m[wh] : reload(pm + i))"),
    ("(i == own ? own_l[wh] : __ldcg(pl + i))", "(i == own ? own_l[wh] : reload(pl + i))"),
]
# "diag time ... merge": the group merge stamped with %globaltimer at its start and after its
# output stores; thread 0 and thread 255 of each merging CTA write the nanoseconds over the output
# (words 0 and 4 of its first head's row).
TIMER_EDITS = [
    (
        "    float2 a[MERGE_CHUNK];\n",
        "    float2 a[MERGE_CHUNK];\n"
        "    unsigned long long t0;\n"
        '    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));\n',
    ),
    (
        "    const unsigned packed = to_bf16(val.x) | (static_cast<unsigned>(to_bf16(val.y)) << 16);\n"
        "    reinterpret_cast<unsigned*>(out + static_cast<size_t>(q_row + h) * D)[d2] = packed;\n",
        "    const unsigned packed = to_bf16(val.x) | (static_cast<unsigned>(to_bf16(val.y)) << 16);\n"
        "    reinterpret_cast<unsigned*>(out + static_cast<size_t>(q_row + h) * D)[d2] = packed;\n"
        "    unsigned long long t1;\n"
        '    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));\n'
        "    __syncthreads();\n"
        "    if (threadIdx.x == 0 || threadIdx.x == THREADS - 1) {\n"
        "        unsigned* w = reinterpret_cast<unsigned*>(out + static_cast<size_t>(q_row) * D) +\n"
        "                      (threadIdx.x == 0 ? 0 : 4);\n"
        "        w[0] = static_cast<unsigned>(t1 - t0);\n"
        "    }\n",
    ),
]
EARLY_TICKET_EDITS = [
    ("// Adds one to a ticket counter", TAG_FUNCTIONS + "// Adds one to a ticket counter"),
    DRAW_EARLY,
    (
        "    __syncthreads();\n    if (threadIdx.x == 0) ticket = take_ticket(&group_tickets[group]);\n",
        "    if (threadIdx.x == 0) ticket = drawn;\n",
    ),
]
TAGGED_LATE_TICKET_EDITS = [
    (
        DRAW_EARLY[1],
        "    __syncthreads();\n    // The 64 weights w = 2^(m_st - M_h)",
    ),
    (
        "        if (threadIdx.x == 0) ticket = drawn;\n        __syncthreads();\n",
        "        __syncthreads();\n"
        "        if (threadIdx.x == 0) ticket = add_relaxed(&group_tickets[group]);\n"
        "        __syncthreads();\n",
    ),
]
# Launches that pass an epoch (and zero their partial buffers once).
EPOCH_VARIANTS = {
    "tagged partials",
    "diag tagged, no re-reads",
    "tagged, ticket after stores",
    "tagged, strong reads",
    "tagged, strong, ticket after stores",
    "diag time tagged merge",
}


# Candidates. "q in shared memory": q (scaled) read back from shared memory every iteration
# (two LDS.128 a head a lane, after the step's K is widened, so the next K loads go out before
# the dot products), freeing the 32 registers that held it; level would make those registers
# available to a deeper loop. "warp pre-merge": the two half-warp states of a warp merged with
# shuffles after the loop, so the CTA merge takes 8 states a head, not 16 (half its shared-memory
# traffic and reads).
Q_SMEM_EDITS = [
    (
        "// Adds one to a ticket counter",
        "__device__ __forceinline__ float4 lds_f4(unsigned addr) {  // kept in the loop (volatile)\n"
        "    float4 r;\n"
        '    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\\n"\n'
        '                 : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w) : "r"(addr));\n'
        "    return r;\n}\n\n// Adds one to a ticket counter",
    ),
    (
        "    float qf[G][8];\n#pragma unroll\n    for (int h = 0; h < G; ++h) {\n"
        "        widen(*reinterpret_cast<const uint4*>(q + (q_row + h) * D + c * 8), qf[h]);\n"
        "#pragma unroll\n        for (int j = 0; j < 8; ++j) qf[h][j] *= scale_log2;\n    }\n",
        "    __shared__ __align__(16) float q_s[G][D];\n"
        "    {\n"
        "        const int h = threadIdx.x / (D / 2), d2 = threadIdx.x % (D / 2);\n"
        "        const unsigned bits = *reinterpret_cast<const unsigned*>(q + (q_row + h) * D + 2 * d2);\n"
        "        q_s[h][2 * d2] = __uint_as_float(bits << 16) * scale_log2;\n"
        "        q_s[h][2 * d2 + 1] = __uint_as_float(bits & 0xffff0000u) * scale_log2;\n"
        "    }\n"
        "    __syncthreads();\n"
        "    const unsigned q_at = static_cast<unsigned>(__cvta_generic_to_shared(&q_s[0][c * 8]));\n",
    ),
    (
        "#pragma unroll\n        for (int u = 0; u < UNROLL; ++u) {\n            float kf[8];\n"
        "            widen(kr[u], kf);\n#pragma unroll\n            for (int h = 0; h < G; ++h) {\n"
        "                float dot = 0.0f;\n#pragma unroll\n"
        "                for (int j = 0; j < 8; ++j) dot = fmaf(qf[h][j], kf[j], dot);\n"
        "                s[u * G + h] = dot;\n            }\n        }\n"
        "        // kr is free: the next iteration's K loads fly during this one's softmax and P V.\n"
        "        const int t_next = t + CTA_TOKENS;\n        const bool more = t_next < t_end;\n"
        "        if (more) load_rows(kr, kh, t_next, half);\n",
        "        float kf[UNROLL][8];\n#pragma unroll\n"
        "        for (int u = 0; u < UNROLL; ++u) widen(kr[u], kf[u]);\n"
        "        const int t_next = t + CTA_TOKENS;\n        const bool more = t_next < t_end;\n"
        "        if (more) load_rows(kr, kh, t_next, half);\n"
        "#pragma unroll\n        for (int h = 0; h < G; ++h) {\n"
        "            const float4 qa = lds_f4(q_at + h * D * 4), qb = lds_f4(q_at + h * D * 4 + 16);\n"
        "            const float qv[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};\n"
        "#pragma unroll\n            for (int u = 0; u < UNROLL; ++u) {\n"
        "                float dot = 0.0f;\n#pragma unroll\n"
        "                for (int j = 0; j < 8; ++j) dot = fmaf(qv[j], kf[u][j], dot);\n"
        "                s[u * G + h] = dot;\n            }\n        }\n",
    ),
]
WARP_PREMERGE_EDITS = [
    (
        "    const int state = warp * TOKENS_PER_LOAD + half;\n"
        "    if (c < G) {  // lane c holds head c's state (c % 4 == c)\n",
        "    {  // the two halves of the warp hold the same heads and dims over different tokens\n"
        "        const float m_o = __shfl_xor_sync(0xffffffffu, m, 16);\n"
        "        const float l_o = __shfl_xor_sync(0xffffffffu, l, 16);\n"
        "        const float big = fmaxf(m, m_o);\n"
        "        const float w_me = fast_exp2(m - big), w_o = fast_exp2(m_o - big);\n"
        "        l = w_me * l + w_o * l_o;\n"
        "        m = big;\n"
        "#pragma unroll\n        for (int h = 0; h < G; ++h) {\n"
        "            const float a = __shfl_sync(0xffffffffu, w_me, half_base + h);\n"
        "            const float b = __shfl_sync(0xffffffffu, w_o, half_base + h);\n"
        "#pragma unroll\n            for (int j = 0; j < 8; ++j) {\n"
        "                acc[h][j] = a * acc[h][j] + b * __shfl_xor_sync(0xffffffffu, acc[h][j], 16);\n"
        "            }\n        }\n    }\n"
        "    const int state = warp;  // one state a warp now: rows WARPS..STATES-1 are unused\n"
        "    if (half == 0 && c < G) {  // lane c holds head c's state (c % 4 == c)\n",
    ),
    (
        "#pragma unroll\n    for (int h = 0; h < G; ++h) {\n"
        "        float4* dst = reinterpret_cast<float4*>(&red_acc[state][h][c * 8]);\n",
        "#pragma unroll\n    for (int h = 0; h < G; ++h) {\n"
        "        if (half != 0) break;\n"
        "        float4* dst = reinterpret_cast<float4*>(&red_acc[state][h][c * 8]);\n",
    ),
    (
        "        const float ms = red_m[st][h];\n",
        "        const float ms = st < WARPS ? red_m[st][h] : __int_as_float(0xff800000u);\n",
    ),
    (
        "        float sum = w * red_l[st][h];\n",
        "        float sum = st < WARPS ? w * red_l[st][h] : 0.0f;\n",
    ),
    (
        "#pragma unroll\n        for (int st = 0; st < STATES; ++st) {\n            const float w = red_w[st][h];\n",
        "#pragma unroll\n        for (int st = 0; st < WARPS; ++st) {\n            const float w = red_w[st][h];\n",
    ),
]


# "V a step ahead": each warp keeps two V buffers and issues the next step's V at the start of
# this step (a whole step of lead, where the recorded loop gives V about half of one), so ~4 KB a
# warp stay in flight, as in the loads-only diagnostic that streamed at the plain read's rate. The
# loop body becomes a lambda called with the two buffers in turn (no register copies). Needs the
# 32 registers that "q in shared memory" frees; without it ("V a step ahead, q in registers") the
# compiler has to spill.
# q read from shared memory inside the recorded order (token-major, one head at a time): two
# LDS.128 a (token, head), 32 a step, and no widened copy of the step's K held.
Q_PER_DOT_EDIT = (
    "#pragma unroll\n                for (int j = 0; j < 8; ++j) dot = fmaf(qf[h][j], kf[j], dot);\n",
    "                const float4 qa = lds_f4(q_at + h * D * 4), qb = lds_f4(q_at + h * D * 4 + 16);\n"
    "                const float qv[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};\n"
    "#pragma unroll\n                for (int j = 0; j < 8; ++j) dot = fmaf(qv[j], kf[j], dot);\n",
)


def _v_ahead_loop(q_smem: bool, before_pv: bool = False) -> str:
    if _LOOP == MISSING:
        return MISSING
    loop = _LOOP
    if q_smem:
        loop = rewrite(loop, [Q_PER_DOT_EDIT])
    issue = "        if (more) load_rows(vn, vh, t_next, half);  // ahead of this step's P V\n"
    where = (
        ("        // P V: every lane needs all 16 probabilities of its half.\n",
         issue + "        // P V: every lane needs all 16 probabilities of its half.\n")
        if before_pv
        else ("        const bool more = t_next < t_end;\n", "        const bool more = t_next < t_end;\n" + issue)
    )
    loop = rewrite(
        loop,
        [
            (
                "    while (true) {\n",
                "    uint4 vr2[UNROLL];\n"
                "    auto step = [&](uint4 (&vc)[UNROLL], uint4 (&vn)[UNROLL]) -> bool {\n",
            ),
            where,
            ("            widen(vr[u], vf);\n", "            widen(vc[u], vf);\n"),
            (
                "        if (!more) break;\n        load_rows(vr, vh, t_next, half);\n"
                "        t = t_next;\n    }\n",
                "        t = t_next;\n        return more;\n    };\n"
                "    while (step(vr, vr2) && step(vr2, vr)) {\n    }\n",
            ),
        ],
    )
    return loop


V_AHEAD_EDITS = Q_SMEM_EDITS[:2] + [(_LOOP, _v_ahead_loop(True))]
V_AHEAD_QREG_EDITS = [(_LOOP, _v_ahead_loop(False))]
# The next V issued later, just before this step's P V (V gets the P V's time more than now).
V_BEFORE_PV_EDITS = Q_SMEM_EDITS[:2] + [(_LOOP, _v_ahead_loop(True, before_pv=True))]
V_BEFORE_PV_QREG_EDITS = [(_LOOP, _v_ahead_loop(False, before_pv=True))]
# The same with q's shared-memory reads pinned in place (a memory clobber: the compiler may not
# gather a step's 32 reads at its top, which would hold as many registers as q did).
PINNED_LDS = (
    '                 : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w) : "r"(addr));\n',
    '                 : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w) : "r"(addr) : "memory");\n',
)
V_BEFORE_PV_PINNED_EDITS = [*V_BEFORE_PV_EDITS, PINNED_LDS]
V_AHEAD_PINNED_EDITS = [*V_AHEAD_EDITS, PINNED_LDS]


# The tensor-core loop (installed since the fifteenth round) with two V buffers: the next step's V goes out with the next K, a whole
# step ahead (the registers the FMA loop lacked for it are there: the mma loop needs 134 uncapped).
MMA_V_AHEAD_EDITS = [
    (
        "    while (true) {\n",
        "    uint4 vn[CHUNKS];\n"
        "    auto step = [&](uint4 (&vc)[CHUNKS], uint4 (&vx)[CHUNKS]) -> bool {\n",
    ),
    (
        "        if (more) load_chunks(kr, kh + static_cast<size_t>(t_next + g) * D);\n",
        "        if (more) {\n"
        "            load_chunks(kr, kh + static_cast<size_t>(t_next + g) * D);\n"
        "            load_chunks(vx, vh + static_cast<size_t>(t_next + g) * D);\n"
        "        }\n",
    ),
    (
        "            mma_k8(acc[2 * r], transpose8x8(vr[r].x), transpose8x8(vr[r].y), pb);\n"
        "            mma_k8(acc[2 * r + 1], transpose8x8(vr[r].z), transpose8x8(vr[r].w), pb);\n",
        "            mma_k8(acc[2 * r], transpose8x8(vc[r].x), transpose8x8(vc[r].y), pb);\n"
        "            mma_k8(acc[2 * r + 1], transpose8x8(vc[r].z), transpose8x8(vc[r].w), pb);\n",
    ),
    (
        "        if (!more) break;\n"
        "        load_chunks(vr, vh + static_cast<size_t>(t_next + g) * D);\n"
        "        t = t_next;\n    }\n",
        "        t = t_next;\n        return more;\n    };\n"
        "    while (step(vr, vn) && step(vn, vr)) {\n    }\n",
    ),
]

# q's A fragments read back from shared memory each step (4 LDS.128 a lane, each lane its own
# entries, so no barrier) instead of held in 16 registers: room for the second V buffer.
MMA_Q_SMEM_EDITS = [
    (
        "    // q as the A operand: row g = head g (lanes g < G), the dims in the order of K's chunks\n"
        "    unsigned qa[2 * CHUNKS][2];\n",
        "    // q as the A operand: row g = head g (lanes g < G), the dims in the order of K's chunks;\n"
        "    // kept in shared memory, each lane's own four chunks, read back every step\n"
        "    __shared__ uint4 q_s[THREADS][CHUNKS];\n"
        "    const unsigned q_at = static_cast<unsigned>(__cvta_generic_to_shared(&q_s[threadIdx.x][0]));\n"
        "    unsigned qa[2 * CHUNKS][2];\n",
    ),
    (
        "        qa[2 * r + 1][1] = w.w;\n    }\n",
        "        q_s[threadIdx.x][r] = w;\n    }\n",
    ),
    (
        "#pragma unroll\n        for (int r = 0; r < CHUNKS; ++r) {\n"
        "            mma_k16(sa, qa[2 * r][0], qa[2 * r][1], kr[r].x, kr[r].y);\n",
        "#pragma unroll\n        for (int r = 0; r < CHUNKS; ++r) {\n"
        "            uint4 w;\n"
        '            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\\n"\n'
        '                         : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w) : "r"(q_at + 16 * r));\n'
        "            qa[2 * r][0] = w.x;\n"
        "            qa[2 * r][1] = w.y;\n"
        "            qa[2 * r + 1][0] = w.z;\n"
        "            qa[2 * r + 1][1] = w.w;\n"
        "            mma_k16(sa, qa[2 * r][0], qa[2 * r][1], kr[r].x, kr[r].y);\n",
    ),
    (
        "        qa[2 * r][0] = w.x;\n        qa[2 * r][1] = w.y;\n        qa[2 * r + 1][0] = w.z;\n",
        "",
    ),
]

# The tensor-core loop with each chunk of the next step's V loaded as soon as this step's
# transposes have read that chunk (rather than all four after the last mma), and with the scores
# in four mma chains of two instead of two of four.
MMA_V_AS_USED_EDITS = [
    (
        "#pragma unroll\n        for (int r = 0; r < CHUNKS; ++r) {\n"
        "            mma_k8(acc[2 * r], transpose8x8(vr[r].x), transpose8x8(vr[r].y), pb);\n"
        "            mma_k8(acc[2 * r + 1], transpose8x8(vr[r].z), transpose8x8(vr[r].w), pb);\n"
        "        }\n"
        "        if (!more) break;\n"
        "        load_chunks(vr, vh + static_cast<size_t>(t_next + g) * D);\n",
        "        const uint4* v_next = reinterpret_cast<const uint4*>(vh + static_cast<size_t>(t_next + g) * D);\n"
        "#pragma unroll\n        for (int r = 0; r < CHUNKS; ++r) {\n"
        "            const unsigned v0 = transpose8x8(vr[r].x), v1 = transpose8x8(vr[r].y);\n"
        "            const unsigned v2 = transpose8x8(vr[r].z), v3 = transpose8x8(vr[r].w);\n"
        "            if (more) vr[r] = __ldg(v_next + 4 * r);  // chunk r is free: its next load goes out\n"
        "            mma_k8(acc[2 * r], v0, v1, pb);\n"
        "            mma_k8(acc[2 * r + 1], v2, v3, pb);\n"
        "        }\n"
        "        if (!more) break;\n",
    ),
]
MMA_FOUR_CHAINS_EDITS = [
    (
        "        float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"
        "#pragma unroll\n        for (int r = 0; r < CHUNKS; ++r) {\n"
        "            mma_k16(sa, qa[2 * r][0], qa[2 * r][1], kr[r].x, kr[r].y);\n"
        "            mma_k16(sb, qa[2 * r + 1][0], qa[2 * r + 1][1], kr[r].z, kr[r].w);\n"
        "        }\n",
        "        float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"
        "        float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sd[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"
        "#pragma unroll\n        for (int r = 0; r < CHUNKS; r += 2) {\n"
        "            mma_k16(sa, qa[2 * r][0], qa[2 * r][1], kr[r].x, kr[r].y);\n"
        "            mma_k16(sb, qa[2 * r + 1][0], qa[2 * r + 1][1], kr[r].z, kr[r].w);\n"
        "            mma_k16(sc, qa[2 * r + 2][0], qa[2 * r + 2][1], kr[r + 1].x, kr[r + 1].y);\n"
        "            mma_k16(sd, qa[2 * r + 3][0], qa[2 * r + 3][1], kr[r + 1].z, kr[r + 1].w);\n"
        "        }\n"
        "#pragma unroll\n        for (int e = 0; e < 2; ++e) sa[e] += sc[e], sb[e] += sd[e];\n",
    ),
]

# name -> (edits, CTAs an SM the plan aims at, fixed plan {T: (splits, tokens_per_split)} or None)
Variant = tuple[list[tuple[str, str]], int, dict[int, tuple[int, int]] | None]
VARIANTS: dict[str, Variant] = {
    "base": ([], 2, None),
    "L1::no_allocate": (hint_edits(".L1::no_allocate"), 2, None),
    "no_allocate+L2::256B": (hint_edits(".L1::no_allocate.L2::256B"), 2, None),
    "no_allocate+evict_first": (hint_edits(".L1::no_allocate", policy=True), 2, None),
    "rotated start": (ROTATE_EDITS, 2, None),
    "group-fastest numbering": (balance_edits(4, 4)[1:2], 2, None),
    "tail pool 4x1/4": (balance_edits(4, 4), 2, None),
    "tail pool 2x1/4": (balance_edits(2, 4), 2, None),
    "tail pool 4x1/8": (balance_edits(4, 8), 2, None),
    "tail pool 4x1/4+256B": (balance_edits(4, 4) + hint_edits(".L1::no_allocate.L2::256B"), 2, None),
    "3 CTAs/SM (spills)": (LB3_EDITS, 3, None),
    "plan 16x2048": ([], 2, {32768: (16, 2048)}),
    "plan 64x512": ([], 2, {32768: (64, 512)}),
    "plan 128x256": ([], 2, {32768: (128, 256)}),
    "base (second build)": ([], 2, None),
    "interleaved": (INTERLEAVE_EDITS, 2, None),
    "interleaved long ranges": (INTERLEAVE_LONG_EDITS, 2, None),
    "ring 4x8KB": (ring_edits(4, False, False), 2, None),
    "ring 5x8KB": (ring_edits(5, False, False), 2, None),
    "ring 5x8KB interleaved": (ring_edits(5, True, False), 2, None),
    "ring 12x8KB dynamic": (ring_edits(12, False, True), 2, None),
    "ring 12x8KB dyn interleaved": (ring_edits(12, True, True), 2, None),
    "merge by 2 CTAs": (mergers_edits(2), 2, None),
    "merge by 4 CTAs": (mergers_edits(4), 2, None),
    "fp16 partials": (FP16_EDITS, 2, None),
    "merge by 2, helper resets": (light_mergers_edits(), 2, None),
    "ticket first": (TICKET_FIRST_EDITS, 2, None),
    "warps deal chunks": (DEAL_EDITS, 2, None),
    "V loaded as used": (V_AS_USED_EDITS, 2, None),
    "deal + V as used": (DEAL_EDITS + V_AS_USED_EDITS, 2, None),
    "lane ring 2 slots": (lane_ring_edits(2), 2, None),
    "lane ring 3 slots": (lane_ring_edits(3), 2, None),
    "skew +1/128": (skew_edits(1), 2, None),
    "skew +2/128": (skew_edits(2), 2, None),
    "skew +3/128": (skew_edits(3), 2, None),
    "skew +4/128": (skew_edits(4), 2, None),
    "skew -2/128": (skew_edits(-2), 2, None),
    "skew code, zero skew": (skew_edits(2, control=True), 2, None),
    "balanced ranges on the suite plan": (BALANCED_EDITS, 2, None),
    "balanced ranges 33 splits": (BALANCED_EDITS, 2, {32768: (33, 0), 4096: (33, 0)}),
    "cluster of 16": ([], 1, {1024: (16, 0), 4096: (16, 0), 32768: (16, 0)}),
    "mma loop, V a step ahead": (MMA_V_AHEAD_EDITS, 2, None),
    "mma loop, V as used": (MMA_V_AS_USED_EDITS, 2, None),
    "mma loop, four score chains": (MMA_FOUR_CHAINS_EDITS, 2, None),
    "mma loop, V as used, four chains": (MMA_V_AS_USED_EDITS + MMA_FOUR_CHAINS_EDITS, 2, None),
    "mma loop, q in shared memory": (MMA_Q_SMEM_EDITS, 2, None),
    "mma loop, q in shared memory, V a step ahead": (MMA_Q_SMEM_EDITS + MMA_V_AHEAD_EDITS, 2, None),
    "cluster of 14": (
        [("constexpr int CLUSTER = 16;", "constexpr int CLUSTER = 14;")], 1,
        {1024: (14, 0), 4096: (14, 0), 32768: (14, 0)},
    ),
    "cluster of 12": (
        [("constexpr int CLUSTER = 16;", "constexpr int CLUSTER = 12;")], 1,
        {1024: (12, 0), 4096: (12, 0), 32768: (12, 0)},
    ),
    "diag loop only": (LOOP_ONLY_EDITS, 2, None),
    "diag loads only, loop only": ([(_LOOP, LOADS_ONLY_LOOP)] + LOOP_ONLY_EDITS, 2, None),
    "diag loads 2 deep, loop only": ([(_LOOP, LOADS_2DEEP_LOOP)] + LOOP_ONLY_EDITS, 2, None),
    "diag loads only, whole tail": ([(_LOOP, LOADS_ONLY_LOOP)], 2, None),
    "diag relaxed ticket": (RELAXED_TICKET_EDITS, 2, None),
    "diag stop before ticket": (STOP_BEFORE_TICKET_EDITS, 2, None),
    "diag stop after ticket": (STOP_AFTER_TICKET_EDITS, 2, None),
    "diag stop at CTA barrier": (STOP_AT_BARRIER_EDITS, 2, None),
    "diag CTA merge, no stores": (NO_PARTIAL_STORES_EDITS, 2, None),
    "q in shared memory": (Q_SMEM_EDITS, 2, None),
    "warp pre-merge": (WARP_PREMERGE_EDITS, 2, None),
    "V a step ahead": (V_AHEAD_EDITS, 2, None),
    "V a step ahead, q in registers": (V_AHEAD_QREG_EDITS, 2, None),
    "V before P V": (V_BEFORE_PV_EDITS, 2, None),
    "V before P V, q in registers": (V_BEFORE_PV_QREG_EDITS, 2, None),
    "V before P V, q pinned": (V_BEFORE_PV_PINNED_EDITS, 2, None),
    "V a step ahead, q pinned": (V_AHEAD_PINNED_EDITS, 2, None),
    "tagged partials": (TAGGED_EDITS, 2, None),
    "diag tagged, no re-reads": (TAGGED_EDITS + TAGGED_NO_CHECK_EDITS, 2, None),
    "diag early relaxed ticket": (EARLY_TICKET_EDITS, 2, None),
    "diag time tagged merge": (TAGGED_EDITS + TIMER_EDITS, 2, None),
    "diag time base merge": (TIMER_EDITS, 2, None),
    "tagged, strong reads": (TAGGED_EDITS + TAGGED_STRONG_EDITS, 2, None),
    "tagged, strong, ticket after stores": (
        TAGGED_EDITS + TAGGED_LATE_TICKET_EDITS + TAGGED_STRONG_EDITS,
        2,
        None,
    ),
    "tagged, ticket after stores": (TAGGED_EDITS + TAGGED_LATE_TICKET_EDITS, 2, None),
}
# The fourteenth round's third call: whole scratch files instead of rewrites of 04. "cluster of 16"
# (scratch/04_cluster.cu): one CTA of 16 warps an SM, 16 splits a (b, hk) group, each group one
# thread-block cluster of 16 CTAs (a non-portable size) whose CTA states meet in distributed
# shared memory behind the hardware cluster barrier: no partial states in device memory and no
# ticket, the round trips the eleventh round found to be the merge's cost.
# "cluster of 14" and "of 12": the same file with fewer splits a group, in case a GPC cannot hold 16
# of these one-an-SM CTAs (the time of "cluster of 16" suggests not all eight clusters fit at once).
CLUSTER_FILE = "scratch/04_cluster.cu"
WHOLE_FILES: dict[str, str] = {n: CLUSTER_FILE for n in ("cluster of 16", "cluster of 14", "cluster of 12")}
THREADS_OF: dict[str, int] = dict.fromkeys(WHOLE_FILES, 512)
NON_PORTABLE_CLUSTERS = set(WHOLE_FILES)
# The fifteenth round's tensor-core loop and its one-barrier block merge are the installed 04
# since that round (timed as scratch/04_mma.cu and as a rewrite of it). The variants below
# rewrite the installed file.
CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14


def allow_non_portable_cluster(fn: object) -> None:
    """Lets a kernel compiled with __cluster_dims__ above 8 launch (cuFuncSetAttribute)."""
    import ctypes

    ptr = fn.kernel.ptr  # type: ignore[attr-defined]
    try:
        from cupy.cuda import driver

        driver.funcSetAttribute(ptr, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
    except (ImportError, AttributeError):
        lib = ctypes.CDLL("libcuda.so.1")
        err = lib.cuFuncSetAttribute(
            ctypes.c_void_p(ptr), CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1
        )
        if err:
            raise RuntimeError(f"cuFuncSetAttribute failed: {err}") from None


# Dynamic shared memory a variant's launch passes (and raises the function's limit to).
DYNAMIC_SMEM: dict[str, int] = {
    "cluster of 16": (32 * 4 * 128 + 4 * 128) * 4,
    "cluster of 14": (32 * 4 * 128 + 4 * 128) * 4,
    "cluster of 12": (32 * 4 * 128 + 4 * 128) * 4,
    "ring 12x8KB dynamic": 12 * 8192,
    "ring 12x8KB dyn interleaved": 12 * 8192,
    "lane ring 2 slots": 2 * 8 * 2 * 4 * 32 * 16,
    "lane ring 3 slots": 3 * 8 * 2 * 4 * 32 * 16,
}
# The variants this round times when VARIANTS is not set (the earlier rounds' stay selectable).
DEFAULT_VARIANTS = (
    "base",
    "mma loop, V as used",
    "mma loop, four score chains",
    "base (second build)",
)


def plan_splits(t: int, groups: int, sm_count: int, per_sm: int) -> tuple[int, int]:
    """suite.py's plan_splits with the CTAs-an-SM target as a parameter."""
    want = min(max(1, -(-per_sm * sm_count // groups)), 256)
    per = -(-t // want)
    per = -(-per // 64) * 64
    per = min(max(per, 64), 4096)
    return -(-t // per), per


def sources() -> dict[str, str]:
    """Every variant's source; a variant whose anchors or file are missing is left out."""
    base = SOURCE_PATH.read_text()
    out: dict[str, str] = {}
    for name, (edits, _, _) in VARIANTS.items():
        try:
            text = Path(WHOLE_FILES[name]).read_text() if name in WHOLE_FILES else base
            out[name] = rewrite(text, edits)
        except (ValueError, OSError) as exc:
            print(f"SKIP {name}: {str(exc)[:80]}", file=sys.stderr)
    return out


# --- device part ----------------------------------------------------------------------------

# Variants with their own synchronisation (mbarriers) are first checked in a child process with a
# time limit, so that one that deadlocks is dropped instead of hanging the whole comparison.
PRECHECK = tuple(n for n in VARIANTS if n.startswith("ring"))
PRECHECK_SECONDS = 60


def precheck(name: str) -> bool:
    import subprocess

    env = dict(os.environ, VARIANTS=name)
    try:
        done = subprocess.run([sys.executable, __file__, "--check-only"], env=env,
                              timeout=PRECHECK_SECONDS, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        print(f"PRECHECK {name}: no answer in {PRECHECK_SECONDS} s (deadlock?), dropped", flush=True)
        return False
    sys.stdout.write(done.stdout)
    sys.stdout.write(done.stderr[-2000:])
    passed = done.returncode == 0 and "FAIL" not in done.stdout and "failed" not in done.stdout
    print(f"PRECHECK {name}: {'passed' if passed else 'dropped'}", flush=True)
    return passed



def main() -> None:  # noqa: C901, PLR0915
    import cupy as cp
    import numpy as np

    from curriculum.bench.ceilings import measure_ceiling
    from curriculum.bench.timing import CudaEventTimer, TimingPolicy, time_call

    profile = "--profile" in sys.argv
    dev = cp.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    l2 = dev.attributes["L2CacheSize"]
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))

    def bf16(shape: tuple[int, ...]) -> cp.ndarray:
        x = cp.asarray(rng.standard_normal(shape, dtype=np.float32))
        bits = x.view(cp.uint32)
        lsb = (bits >> 16) & 1
        return ((bits + 0x7FFF + lsb) >> 16).astype(cp.uint16)

    def to64(bits: cp.ndarray) -> cp.ndarray:
        return (bits.astype(cp.uint32) << 16).view(cp.float32).astype(cp.float64)

    def reference(q: cp.ndarray, k: cp.ndarray, v: cp.ndarray) -> cp.ndarray:
        q64 = to64(q).reshape(B, HKV, HQ // HKV, D)
        s = q64 @ cp.swapaxes(to64(k), -1, -2) / math.sqrt(D)
        s -= s.max(axis=-1, keepdims=True)
        w = cp.exp(s)
        w /= w.sum(axis=-1, keepdims=True)
        return (w @ to64(v)).reshape(B, HQ, D)

    # The bench's own timer (its L2 flush and events), for a fixed number of launches so that
    # every variant gets the same samples, and its copy ceiling, measured as a run measures it.
    timer = CudaEventTimer(l2, sms)
    flush = timer.flush_l2

    def timed(fn: Callable[[], None], reps: int = REPS) -> float:
        fixed = TimingPolicy(warmup_ms=0.0, warmup_launches=3, min_samples=reps, max_samples=reps)
        return time_call(fn, timer, fixed).median_ms * 1e3

    def copy_ceiling() -> float:
        gbps = measure_ceiling("copy", timer, TimingPolicy()).gbps
        assert gbps is not None
        return gbps  # GB/s

    only = os.environ.get("VARIANTS")
    names = [n for n in VARIANTS if n in only.split(",")] if only else list(DEFAULT_VARIANTS)
    check_only = "--check-only" in sys.argv
    if not check_only and not profile:
        names = [n for n in names if n not in PRECHECK or precheck(n)]
    if profile:
        names = [os.environ.get("PROFILE_VARIANT", "base")]
    srcs = sources()
    names = [n for n in names if n in srcs]
    modules: dict[str, object] = {}
    info: dict[str, dict[str, object]] = {}
    for name in list(names):
        try:
            fn = cp.RawKernel(srcs[name], "split_kv", options=("--std=c++17", "-arch=sm_90"),
                              backend="nvrtc")
            if name in DYNAMIC_SMEM:
                fn.max_dynamic_shared_size_bytes = DYNAMIC_SMEM[name]
            fn.compile()
            if name in NON_PORTABLE_CLUSTERS:
                allow_non_portable_cluster(fn)
        except Exception as exc:  # a variant that does not build is reported and dropped
            print(f"BUILD {name} failed: {exc}", flush=True)
            names.remove(name)
            continue
        modules[name] = fn
        regs, local = getattr(fn, "num_regs", -1), getattr(fn, "local_size_bytes", -1)
        static = getattr(fn, "shared_size_bytes", -1)
        info[name] = {"registers": regs, "local_bytes": local, "static_smem": static,
                      "dynamic_smem": DYNAMIC_SMEM.get(name, 0)}
        print(f"{name}: {regs} registers, {local} B local, {static} B static shared, "
              f"{DYNAMIC_SMEM.get(name, 0)} B dynamic", flush=True)

    def plan_for(name: str, t: int) -> tuple[int, int]:
        _, per_sm, fixed = VARIANTS[name]
        if fixed and t in fixed:
            return fixed[t]
        return plan_splits(t, B * HKV, sms, per_sm)

    def make_launch(name: str, t: int, q, k, v, out) -> Callable[[], None]:  # noqa: ANN001
        splits, per = plan_for(name, t)
        states = B * HQ * splits
        alloc = cp.zeros if name in EPOCH_VARIANTS else cp.empty
        pm = alloc(states, dtype=cp.float32)
        pl = alloc(states, dtype=cp.float32)
        pa = alloc(states * D, dtype=cp.float32)
        fn = modules[name]
        smem = DYNAMIC_SMEM.get(name, 0)
        args = (q, k, v, pm, pl, pa, out, np.int32(t), np.int32(per), np.float32(LOG2E / math.sqrt(D)))

        threads = THREADS_OF.get(name, 256)

        epoch = [0]

        def launch() -> None:
            if name in EPOCH_VARIANTS:
                epoch[0] += 1
                fn((splits, HKV, B), (threads,), (*args, np.uint32(epoch[0])), shared_mem=smem)
            else:
                fn((splits, HKV, B), (threads,), args, shared_mem=smem)

        return launch

    def inputs(t: int) -> tuple[cp.ndarray, cp.ndarray, cp.ndarray]:
        return bf16((B, HQ, D)), bf16((B, HKV, t, D)), bf16((B, HKV, t, D))

    if profile:
        chosen = names[0]
        q, k, v = inputs(HEADLINE)
        out = cp.empty((B, HQ, D), dtype=cp.uint16)
        launch = make_launch(chosen, HEADLINE, q, k, v, out)
        for _ in range(5):
            flush()
            launch()
        cp.cuda.Device().synchronize()
        print(f"profiled {chosen}", flush=True)
        return

    # Correctness: every variant at every context, fresh inputs, poisoned output, run twice
    # (the counters must be back at zero for the second launch).
    ok: dict[str, bool] = {}
    errors: dict[str, dict[int, float]] = {}
    for name in names:
        ok[name] = True
        for t in CONTEXTS:
            q, k, v = inputs(t)
            ref = reference(q, k, v)
            worst = 0.0
            for _ in range(2):
                out = cp.full((B, HQ, D), 0xFFFF, dtype=cp.uint16)  # NaN bit patterns
                try:
                    make_launch(name, t, q, k, v, out)()
                    cp.cuda.Device().synchronize()
                except Exception as exc:  # a variant that fails to launch is reported, not timed
                    print(f"CHECK {name} T={t}: launch failed: {exc}", flush=True)
                    ok[name] = False
                    break
                got = to64(out)
                rel = float(cp.linalg.norm(got - ref) / cp.linalg.norm(ref))
                if not math.isfinite(rel):
                    rel = float("inf")
                worst = max(worst, rel)
            errors.setdefault(name, {})[t] = worst
            diag = name.startswith("diag")  # not the attention: timed whatever the check says
            status = "ok" if worst < TOL else "(diagnostic)" if diag else "FAIL"
            if worst >= TOL and not diag:
                ok[name] = False
            print(f"CHECK {name:26s} T={t:6d} rel err {worst:.2e} {status}", flush=True)
            del q, k, v, ref

    if check_only:
        sys.exit(0 if all(ok.values()) and ok else 1)
    ceiling_before = copy_ceiling()
    print(f"copy ceiling {ceiling_before:.0f} GB/s", flush=True)
    data = {t: inputs(t) for t in CONTEXTS}
    outs = {t: cp.empty((B, HQ, D), dtype=cp.uint16) for t in CONTEXTS}
    launches = {
        (name, t): make_launch(name, t, *data[t], outs[t])
        for name in names
        if ok[name]
        for t in CONTEXTS
        if not (VARIANTS[name][2] and t not in VARIANTS[name][2])
    }
    results: dict[str, dict[int, list[float]]] = {}
    for rnd in range(2):
        order = list(launches) if rnd == 0 else list(reversed(launches))
        for key in order:
            us = timed(launches[key])
            results.setdefault(key[0], {}).setdefault(key[1], []).append(us)
            print(f"round {rnd} {key[0]:26s} T={key[1]:6d} {us:7.2f} us", flush=True)
    # Epoch variants: the same closure (buffers and epochs carried on from the timing) checked
    # again on every one of 40 more launches, so stale slots from earlier launches are exercised.
    # The timed-merge diagnostics run the same 40 launches, and their stamps are read off the last.
    for (name, t), launch in launches.items():
        if name not in EPOCH_VARIANTS and not name.startswith("diag time"):
            continue
        ref = reference(*data[t])
        worst = 0.0
        for _ in range(40):
            outs[t].fill(0xFFFF)
            launch()
            rel = float(cp.linalg.norm(to64(outs[t]) - ref) / cp.linalg.norm(ref))
            worst = max(worst, rel if math.isfinite(rel) else float("inf"))
        status = "ok" if worst < TOL else "FAIL"
        print(f"RECHECK {name} T={t}: 40 launches in sequence, worst rel err {worst:.2e} {status}")
        if name.startswith("diag time"):  # the merge's nanoseconds, written over the output
            words = cp.asnumpy(outs[t].view(cp.uint32).reshape(B * HQ, D // 2))
            ns = [(int(words[row, 0]), int(words[row, 4])) for row in range(0, B * HQ, HQ // HKV)]
            print(f"MERGE NS {name} T={t}: (thread 0, thread 255) per group {ns}")
    ceiling_after = copy_ceiling()
    ceiling = max(ceiling_before, ceiling_after)

    def floor_us(t: int) -> float:
        nbytes = 2 * B * HKV * t * D * 2 + 2 * B * HQ * D * 2
        return nbytes / (ceiling * 1e9) * 1e6

    table = []
    print(f"\ncopy ceiling {ceiling_before:.0f} / {ceiling_after:.0f} GB/s (floor uses the larger)")
    print(f"{'variant':26s} {'T':>6s} {'plan':>9s} {'round 0':>8s} {'round 1':>8s} {'%floor':>7s} {'vs base':>8s}")
    for name in names:
        for t, us in results.get(name, {}).items():
            med = statistics.mean(us)
            base = statistics.mean(results["base"][t]) if "base" in results else float("nan")
            splits, per = plan_for(name, t)
            row = {
                "variant": name, "t": t, "splits": splits, "tokens_per_split": per,
                "us": us, "pct_floor": 100 * floor_us(t) / med, "delta_vs_base_us": med - base,
                "rel_err": errors[name][t],
            }
            table.append(row)
            print(f"{name:26s} {t:6d} {splits:4d}x{per:<4d} {us[0]:8.2f} {us[1]:8.2f} "
                  f"{row['pct_floor']:6.1f}% {med - base:+8.2f}")
    on_plan = [r for r in table if r["t"] == HEADLINE and not VARIANTS[str(r["variant"])][2]]
    if on_plan:
        best = min(on_plan, key=lambda r: statistics.mean(r["us"]))  # type: ignore[arg-type]
        print(f"fastest at T={HEADLINE} on the suite's plan: {best['variant']}")
        (OUT / "best_variant.txt").write_text(str(best["variant"]))
    (OUT / "splitkv_ab.json").write_text(json.dumps({
        "copy_gbps": [ceiling_before, ceiling_after], "sms": sms, "reps": REPS,
        "build": info, "checks": {n: {str(t): e for t, e in es.items()} for n, es in errors.items()},
        "rows": table,
    }, indent=1))


if __name__ == "__main__":
    main()
