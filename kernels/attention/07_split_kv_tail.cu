// 07 split-KV with a pool for the ragged end: the last steps of a context go to whichever warp is free
//
// Idea against 06: 06 pushed bytes ahead of the stream and lost; the stream itself was never the
// gap. Timestamps (globaltimer) of 04's CTAs in a scratch run put the gap elsewhere: every CTA
// starts within a fraction of a microsecond, but the loops end over about four microseconds, the
// first CTAs far ahead of the median and the last well behind it, and the group merge adds more
// after the last one. 04's ranges are equal, so a CTA on an SM that gets less of the memory
// system ends late and the bandwidth of the ones done early goes unused. Here each CTA's fixed
// range gives up POOL 64-token steps; what the shortened ranges leave at the end of each
// (batch, KV head) context is that group's pool. A warp whose fixed range is done claims the
// pool's next 8-token step with an atomic add, so a fast CTA takes more of it and the group's
// CTAs end closer together. Warp slot w (w = 0..7) claims only slots w of the pool's 64-token
// blocks, from its own counter on its own 128-byte line. The first scratch version kept the
// eight groups' counters in adjacent words, one 128-byte line for all of them, and lost more the
// larger the pool: atomics on one line are served one at a time (over 4000 claims a launch at
// one pool step). One counter a group on a line of its own timed close to the eight. The claim
// for the step after next goes out with the next step's K loads and is read a step later, so its
// round trip hides behind the loads.
// The claimed steps belong to the same KV head, so the softmax state simply continues: no
// partial states are added. After the loop everything is 04's (CTA merge, ticket, last CTA's
// merge of the splits).
//
// Expected bound (estimate), headline B = 1, 32 query / 8 KV heads, D = 128, T = 32768 on an
// H200: 134 MB, 31.3 us at the ~4.29 TB/s copy ceiling. 04 in the same scratch run as the
// timestamps (estimates from those timings): about 3.5 us outside the CTAs (launch and the
// timing events: a plain read of the same bytes pays it too), the last loop ending about 30.4 us
// after the first CTA starts, and about 2.7 us from there to the last merge. Balancing can bring
// the last loop end towards the median (about 28.9 us) plus what the pool's claims cost; if it
// gains 1-1.5 us, 35-35.5 us: 88-89% of copy, a little short of 90%, still ahead of cuDNN SDPA.
// At POOL = 2 (the measured setting) each split keeps 896 of its 1024 tokens at 32K and the pool
// is 4096 tokens a group. A split gives up at most a quarter of its steps, so at 4K (32 splits of
// two steps) and 1K (16 splits of one) there is no pool and 07 runs 04's ranges.
//
// Outcome (scratch, direction only; the measured figures are the suite's): the pool did what it
// was meant to and gained next to nothing. Timestamps showed the loop ends pulled together, the
// first ones later and the last one where it was: while some CTAs end early the others take
// their bandwidth, so the ragged end was never idle bandwidth. POOL 1, 2 and 4 timed within the
// run-to-run spread of each other and of 04, 2 and 4 a shade ahead. The time after the last loop
// (publish, ticket, merge) stays, and a diagnostic with it cut off (every CTA stores its partial
// and leaves) sat at the 90% line: 90% needs a tail the cross-CTA merge cannot fit in (at least
// two dependent L2 round trips after the last byte). A merger chosen on an arrival ticket,
// polling a published count, lost to 04's ticket in scratch and was dropped.
//
// Size constraints: as 04 (D = 128, G = 4, T a multiple of 64; tokens_per_split a multiple of 64;
// splits = ceil(T / tokens_per_split) <= 256 (MAX_SPLITS); B * Hkv <= 4096 (MAX_GROUPS) ticket
// counters and 8 claim counters a group); the fixed range of a split is tokens_per_split less
// 64 min(POOL, tokens_per_split / 256) tokens, never empty, so every warp has a fixed step, and
// the pool may be empty. Launches
// must not overlap (they share the counters), and a launch that is cut short leaves its counters
// non-zero.
//
// Resources (nvcc 13.0, -gencode arch=compute_90a,code=sm_90a --resource-usage): 128 registers
// (the launch bound's cap for two CTAs an SM), no spills, 20740 bytes of static shared memory, one
// barrier; 4.2 MB of device counters (16 KB of tickets, 4 MB of claim counters a line each). The
// same registers and no spills with POOL_STEPS 0, 1 and 4.

#ifndef POOL_STEPS
#define POOL_STEPS 2  // 64-token steps a split gives up to its group's pool
#endif

constexpr int D = 128;
constexpr int G = 4;                  // query heads per KV head
constexpr int WARPS = 8;
constexpr int THREADS = WARPS * 32;
constexpr int WARP_TOKENS = 8;        // tokens a warp takes a step: one n8 tile of scores
constexpr int CTA_TOKENS = WARPS * WARP_TOKENS;
constexpr int CHUNKS = 4;             // 16-byte loads a lane per row: chunks t, t + 4, t + 8, t + 12
constexpr int TILES = 8;              // m16 tiles of dimensions in the P V product
constexpr int STATES = WARPS;         // one softmax state per warp and head
constexpr int MAX_SPLITS = 256;
constexpr int MAX_GROUPS = 4096;
constexpr int MERGE_CHUNK = 32;
constexpr float RESCALE_SLACK = 8.0f;
constexpr int POOL = POOL_STEPS;
constexpr int LINE_WORDS = 32;      // a counter a 128-byte line
constexpr int CLAIMED = -1;        // a warp's next step while its pool claim is in flight

static_assert(D == 128 && CHUNKS * 4 * 8 == D, "4 lanes x 4 chunks of 8 dims cover a row");
static_assert(G * D == 2 * THREADS, "the last CTA's merge gives each thread two adjacent outputs");
static_assert(2 * WARPS == 4 * G, "two warps a query head compute the merge weights");
static_assert(STATES == WARPS, "the CTA merge takes one state a warp (a head each)");
static_assert(CTA_TOKENS == 64, "the launcher checks T % 64 == 0 and tokens_per_split % 64 == 0");
static_assert(POOL >= 0, "a split cannot give up a negative number of steps");
static_assert(MAX_SPLITS % 32 == 0, "each lane of a weight warp holds MAX_SPLITS / 32 (m, l) pairs");

// One ticket counter per (b, hk) group; zero at module load and put back to zero by the last CTA.
__device__ unsigned int group_tickets[MAX_GROUPS] = {};
// The pool's claim counters: one per (group, warp slot), each on its own 128-byte line, so the
// claims of a group queue at eight L2 addresses instead of one (see the idea above). Zero at
// module load and put back to zero by the last CTA.
__device__ unsigned int pool_claims[MAX_GROUPS * WARPS * LINE_WORDS] = {};

__device__ __forceinline__ float fast_exp2(float x) {  // exp2(-inf) = 0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ unsigned short to_bf16(float x) {
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
    return r;
}

// Adds one to a ticket counter with acquire-release semantics at GPU scope; returns the old value.
__device__ __forceinline__ unsigned take_ticket(unsigned* counter) {
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n"
                 : "=r"(old)
                 : "l"(counter)
                 : "memory");
    return old;
}

// The merge of one group's splits, run by the CTA that drew the last ticket (all its threads).
// Out of line, so that the compiler allocates its registers apart from the main loop's: inlined,
// the main loop of 05 spilled.
__device__ __noinline__ void merge_splits(const float* __restrict__ part_m,
                                          const float* __restrict__ part_l,
                                          const float* __restrict__ part_acc,
                                          unsigned short* __restrict__ out,
                                          float (*weight)[MAX_SPLITS], int q_row, int splits) {
    // Thread (h, d2) owns dimensions 2 d2 and 2 d2 + 1 of query head h. Its accumulator loads (up
    // to MERGE_CHUNK splits) go out first, before the weights are known, so they, the (m, l) loads
    // and the weight arithmetic share one L2 round trip. The partials were written by other CTAs
    // during this launch: __ldcg reads them from the L2, never from L1.
    const int h = threadIdx.x / (D / 2), d2 = threadIdx.x % (D / 2);
    const float2* acc_src =
        reinterpret_cast<const float2*>(part_acc + static_cast<size_t>(q_row + h) * splits * D) + d2;
    float2 a[MERGE_CHUNK];
#pragma unroll
    for (int i = 0; i < MERGE_CHUNK; ++i) {
        if (i < splits) a[i] = __ldcg(acc_src + static_cast<size_t>(i) * (D / 2));
    }

    // Weights 2^(m_i - M) / L of every split; warps 2h and 2h + 1 both reduce head h, the first
    // of them stores the weights.
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
            wm[r] = fast_exp2(wm[r] - big);  // 0 for the padding (m = -inf)
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

    float2 val = make_float2(0.0f, 0.0f);
    for (int base = 0; base < splits; base += MERGE_CHUNK) {
        if (base > 0) {  // more than MERGE_CHUNK splits (contexts over 32 K tokens)
#pragma unroll
            for (int i = 0; i < MERGE_CHUNK; ++i) {
                if (base + i < splits) {
                    a[i] = __ldcg(acc_src + static_cast<size_t>(base + i) * (D / 2));
                }
            }
        }
#pragma unroll
        for (int i = 0; i < MERGE_CHUNK; ++i) {
            if (base + i < splits) {
                const float w = weight[h][base + i];
                val.x = fmaf(w, a[i].x, val.x);
                val.y = fmaf(w, a[i].y, val.y);
            }
        }
    }
    const unsigned packed = to_bf16(val.x) | (static_cast<unsigned>(to_bf16(val.y)) << 16);
    reinterpret_cast<unsigned*>(out + static_cast<size_t>(q_row + h) * D)[d2] = packed;
}


__device__ __forceinline__ void load_chunks(uint4 (&r)[CHUNKS], const unsigned short* row) {
#pragma unroll
    for (int i = 0; i < CHUNKS; ++i) r[i] = __ldg(reinterpret_cast<const uint4*>(row + 32 * i));
}

// m16n8k16, bf16 in, fp32 accumulate; rows 8-15 of A are zero.
__device__ __forceinline__ void mma_k16(float (&c)[4], unsigned a0, unsigned a2, unsigned b0,
                                        unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}

// m16n8k8, bf16 in, fp32 accumulate.
__device__ __forceinline__ void mma_k8(float (&c)[4], unsigned a0, unsigned a1, unsigned b0) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(b0));
}

__device__ __forceinline__ unsigned transpose8x8(unsigned a) {
    unsigned d;
    asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
    return d;
}

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}


// The warp's next step when it comes from the pool: claim i of warp slot w is token
// pool_begin + 64 i + 8 w, the slot's place in the pool's i-th 64-token block, as in a fixed range.
// Lane 0 holds the raw claim from its atomic, read only here (a step after it went out).
__device__ __forceinline__ int pool_token(unsigned raw, int pool_begin, int warp, int T) {
    // (claims per launch stay below B * T / 64 + B * Hkv * splits, so the product does not wrap)
    const unsigned t =
        pool_begin + CTA_TOKENS * __shfl_sync(0xffffffffu, raw, 0) + WARP_TOKENS * warp;
    return t < static_cast<unsigned>(T) ? static_cast<int>(t) : T;
}

// Grid (splits, Hkv, B). Partial state p = (b * Hq + query head) * splits + split.
// Accumulator tile i = 2r + s of lane (g, t) holds out^T rows (dims) 32 r + 8 (g / 2) + 4 s + g % 2
// (c0, c1) and the same + 2 (c2, c3), columns (heads) 2t and 2t + 1: lanes t < 2 hold the result.
extern "C" __global__ void __launch_bounds__(THREADS, 2)
split_kv_tail(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
              const unsigned short* __restrict__ v, float* __restrict__ part_m,
              float* __restrict__ part_l, float* __restrict__ part_acc,
              unsigned short* __restrict__ out, int T, int tokens_per_split, float scale_log2) {
    __shared__ float red_m[STATES][G];
    __shared__ float red_l[STATES][G];
    __shared__ __align__(16) float red_acc[STATES][G][D];
    __shared__ float weight[G][MAX_SPLITS];
    __shared__ unsigned int ticket;

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane >> 2, tq = lane & 3;
    const int split = blockIdx.x, splits = gridDim.x;
    const int hk = blockIdx.y, kv_heads = gridDim.y, b = blockIdx.z;
    const int group = b * kv_heads + hk;
    const int q_row = group * G;
    // The fixed range: tokens_per_split less POOL steps, but less at most a quarter of its steps
    // (so short contexts, whose ranges are one or two steps, keep 04's ranges and no pool); what
    // the fixed ranges leave at the end of the context is the group's pool.
    const int given = min(POOL, tokens_per_split / CTA_TOKENS / 4);
    const int static_tokens = tokens_per_split - given * CTA_TOKENS;
    const int t_begin = split * static_tokens;
    const int s_end = min(T, t_begin + static_tokens);
    const int pool_begin = min(T, splits * static_tokens);
    unsigned* const claims = &pool_claims[(group * WARPS + warp) * LINE_WORDS];
    const unsigned short* kh = k + static_cast<size_t>(group) * T * D + tq * 8;
    const unsigned short* vh = v + static_cast<size_t>(group) * T * D + tq * 8;

    // The range is a non-empty multiple of CTA_TOKENS, so every warp has at least one fixed step;
    // its first loads go out before q is read, so the two latencies overlap.
    int t = t_begin + warp * WARP_TOKENS;
    uint4 kr[CHUNKS], vr[CHUNKS];
    load_chunks(kr, kh + static_cast<size_t>(t + g) * D);
    load_chunks(vr, vh + static_cast<size_t>(t + g) * D);
    // The next step: fixed while the range lasts, then claimed from the pool one warp-step at a
    // time; next = CLAIMED while lane 0's claim (next_raw) is in flight, T when there is none.
    int next = T;
    unsigned next_raw = 0;
    if (t + CTA_TOKENS < s_end) {
        next = t + CTA_TOKENS;
    } else if (POOL > 0 && pool_begin < T) {
        if (lane == 0) next_raw = atomicAdd(claims, 1u);
        next = CLAIMED;
    }

    // q as the A operand: row g = head g (lanes g < G), the dims in the order of K's chunks
    unsigned qa[2 * CHUNKS][2];
#pragma unroll
    for (int r = 0; r < CHUNKS; ++r) {
        uint4 w = make_uint4(0u, 0u, 0u, 0u);
        if (g < G) w = *reinterpret_cast<const uint4*>(q + (q_row + g) * D + 32 * r + tq * 8);
        qa[2 * r][0] = w.x;
        qa[2 * r][1] = w.y;
        qa[2 * r + 1][0] = w.z;
        qa[2 * r + 1][1] = w.w;
    }

    float m = __int_as_float(0xff800000u), l = 0.0f, acc[TILES][4];
#pragma unroll
    for (int i = 0; i < TILES; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;

    while (true) {
        // two accumulators, so the 8 mma form two chains of 4
        float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int r = 0; r < CHUNKS; ++r) {
            mma_k16(sa, qa[2 * r][0], qa[2 * r][1], kr[r].x, kr[r].y);
            mma_k16(sb, qa[2 * r + 1][0], qa[2 * r + 1][1], kr[r].z, kr[r].w);
        }
        // kr is free: the next step's K loads fly during this one's softmax and P V; the claim
        // for the step after goes out with them
        if (POOL > 0 && next == CLAIMED) next = pool_token(next_raw, pool_begin, warp, T);
        const bool more = next < T;
        int after = T;
        if (more) {
            load_chunks(kr, kh + static_cast<size_t>(next + g) * D);
            if (next + CTA_TOKENS < s_end) {
                after = next + CTA_TOKENS;
            } else if (POOL > 0 && pool_begin < T) {
                if (lane == 0) next_raw = atomicAdd(claims, 1u);
                after = CLAIMED;
            }
        }

        // lanes g < G: head g, tokens 2t and 2t + 1 (the other lanes hold zeros: rows 4-15 of A)
        const float s0 = (sa[0] + sb[0]) * scale_log2, s1 = (sa[1] + sb[1]) * scale_log2;
        float mx = fmaxf(s0, s1);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // m need not be the running maximum, only close to it: it moves (and l and acc are
        // rescaled) when a score of a real head would exceed it by more than RESCALE_SLACK
        if (__any_sync(0xffffffffu, g < G && mx > m + RESCALE_SLACK)) {
            const float m_new = fmaxf(m, mx);
            const float alpha = fast_exp2(m - m_new);
            l *= alpha;
            m = m_new;
            const float a_lo = __shfl_sync(0xffffffffu, alpha, 8 * tq);      // head 2t
            const float a_hi = __shfl_sync(0xffffffffu, alpha, 8 * tq + 4);  // head 2t + 1
#pragma unroll
            for (int i = 0; i < TILES; ++i) {
                acc[i][0] *= a_lo;
                acc[i][1] *= a_hi;
                acc[i][2] *= a_lo;
                acc[i][3] *= a_hi;
            }
        }
        const float p0 = fast_exp2(s0 - m), p1 = fast_exp2(s1 - m);
        float psum = p0 + p1;
        psum += __shfl_xor_sync(0xffffffffu, psum, 1);
        psum += __shfl_xor_sync(0xffffffffu, psum, 2);
        l += psum;
        const unsigned pb = pack_bf16x2(p0, p1);  // P^T: k = tokens 2t, 2t + 1; n = head g

#pragma unroll
        for (int r = 0; r < CHUNKS; ++r) {
            mma_k8(acc[2 * r], transpose8x8(vr[r].x), transpose8x8(vr[r].y), pb);
            mma_k8(acc[2 * r + 1], transpose8x8(vr[r].z), transpose8x8(vr[r].w), pb);
        }
        if (!more) break;
        load_chunks(vr, vh + static_cast<size_t>(next + g) * D);
        next = after;
    }

    // Merge the CTA's 8 warp states (one a head); keep the result unnormalised for the split
    // merge. Lanes g < G hold head g's m and l; lanes t < 2 the accumulators, dims permuted as
    // the tiles hold them (see above the kernel).
    if (g < G && tq == 0) {
        red_m[warp][g] = m;
        red_l[warp][g] = l;
    }
    if (tq < 2) {
#pragma unroll
        for (int i = 0; i < TILES; ++i) {
            const int dim = 32 * (i / 2) + 8 * (g / 2) + 4 * (i % 2) + g % 2;
            red_acc[warp][2 * tq][dim] = acc[i][0];
            red_acc[warp][2 * tq + 1][dim] = acc[i][1];
            red_acc[warp][2 * tq][dim + 2] = acc[i][2];
            red_acc[warp][2 * tq + 1][dim + 2] = acc[i][3];
        }
    }
    __syncthreads();
    {  // thread (h, d2): head h's 8 weights 2^(m_st - M_h), then dims 2 d2 and 2 d2 + 1
        const int h = threadIdx.x / (D / 2), d2 = threadIdx.x % (D / 2);
        float ms[STATES], big = __int_as_float(0xff800000u);
#pragma unroll
        for (int st = 0; st < STATES; ++st) {
            ms[st] = red_m[st][h];
            big = fmaxf(big, ms[st]);
        }
        float sum = 0.0f;
        float2 val = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int st = 0; st < STATES; ++st) {
            const float w = fast_exp2(ms[st] - big);
            sum = fmaf(w, red_l[st][h], sum);
            const float2 a = *reinterpret_cast<const float2*>(&red_acc[st][h][2 * d2]);
            val.x = fmaf(w, a.x, val.x);
            val.y = fmaf(w, a.y, val.y);
        }
        const size_t p = static_cast<size_t>(q_row + h) * splits + split;
        if (d2 == 0) {
            part_m[p] = big;
            part_l[p] = sum;
        }
        reinterpret_cast<float2*>(part_acc + p * D)[d2] = val;
    }

    // As 04: publish the partials and take a ticket in one step; the last ticket merges.
    __syncthreads();
    if (threadIdx.x == 0) ticket = take_ticket(&group_tickets[group]);
    __syncthreads();
    if (ticket != static_cast<unsigned>(splits - 1)) return;

    merge_splits(part_m, part_l, part_acc, out, weight, q_row, splits);
    // ready for the next launch: every other CTA's claims came before its ticket
    if (threadIdx.x == 0) group_tickets[group] = 0;
    if (threadIdx.x < WARPS) pool_claims[(group * WARPS + threadIdx.x) * LINE_WORDS] = 0;
}
