// 05 one range, both blocks: at k = 5 to 8, one CTA holds both 16-row blocks of a range
//
// Idea against 04: from k = 5 a KV head has more than 16 query rows, and 04 gives each 16-row
// block its own CTA, so every range is streamed by two CTAs on two SMs: the SMs together pull
// the cache from the L2 twice, and each SM has twice the tokens to get through. Here one CTA
// takes both blocks of a range, four warps a block, each block's warps stepping 32 tokens at a
// time over the same range: the two warps that load a token's K and V run on the same SM, so the
// second load finds the line in L1 (or joins the first's miss), and the range crosses from the
// L2 to the SM once. Each block's 4 warps merge in two rounds through their own shared slots; the
// last CTA of a (KV head, range) merges both blocks. k <= 4 runs 04's kernels unchanged.
//
// Expected bound (estimate), B = 1, 32 query / 8 KV heads, D = 128, T = 32768: k = 6 and 8 from
// 04's ~55-60 us toward the ~40-43 us of k = 4, if the per-SM stream was the limit; 31.3 us is
// the copy floor. Each CTA now takes 2048 tokens (16 ranges) instead of 4096.
//
// Size constraints: 04's (D = 128, 4 query heads a KV head, 1 <= k <= 8, T a multiple of 64,
// tokens_per_split a multiple of 64, every split non-empty, B * Hkv * CTAs a range <= 4096, at
// most 64 ranges); launches must not overlap (they share the counters), and a launch cut short
// leaves its counters non-zero.

constexpr int D = 128;
constexpr int G = 4;                  // query heads per KV head
constexpr int WARPS = 8;
constexpr int THREADS = WARPS * 32;
constexpr int WARP_TOKENS = 8;        // tokens a warp takes a step: one n8 tile of scores
constexpr int CTA_TOKENS = WARPS * WARP_TOKENS;
constexpr int CHUNKS = 4;             // 16-byte loads a lane a row: chunks t, t + 4, t + 8, t + 12
constexpr int TILES = 8;              // m16 tiles of dimensions in the P V product
constexpr int BLOCK_ROWS = 16;        // query rows a CTA (one m16 tile of scores)
constexpr int MAX_COUNTERS = 4096;
constexpr int MERGE_SPAN = 8;         // output dims a thread of the last CTA's merge writes
constexpr int MERGE_BATCH = 8;        // ranges whose partial loads the merge issues together
constexpr int MERGE_MAX_SPLITS = 64;  // ranges a row block's merge weighs (shared memory)
constexpr float RESCALE_SLACK = 8.0f;

static_assert(D == 128 && CHUNKS * 4 * 8 == D, "4 lanes x 4 chunks of 8 dims cover a row");
static_assert(CTA_TOKENS == 64, "the launcher checks T % 64 == 0 and tokens_per_split % 64 == 0");
static_assert(WARP_TOKENS == 8, "the draft positions (k <= 8) fit one masked warp-step");
static_assert(WARPS == 8, "the CTA merge folds 8 warp states in three rounds");
static_assert(BLOCK_ROWS * MERGE_MAX_SPLITS <= (WARPS / 2) * TILES * 4 * 32,
              "the merge weights fit in the 8-row fold buffer, free once the CTA merge is done");
static_assert(BLOCK_ROWS * D / MERGE_SPAN == THREADS,
              "the last CTA's merge gives a thread 8 dims of a row");

// One ticket counter per (B * Hkv, row block); zero at module load and put back to zero by the
// last CTA of each.
__device__ unsigned int block_tickets[MAX_COUNTERS] = {};

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

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
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

// The merge of one row block's ranges, run by every thread of the CTA that drew the last ticket:
// thread (r, c) = (threadIdx.x / 16, threadIdx.x % 16) writes dims 8c..8c+7 of block row r. First
// the 16 threads of a row take its ranges c, c + 16, ..., reduce M and L with shuffles and store
// the weights 2^(m_i - M) in shared memory; then each sums its 8 dims over the ranges with the
// loads of 8 ranges issued before any is used, so 32 ranges cost 4 L2 round trips, not 32 (03's
// loop waits on each range's load in turn). Out of line, so that its registers are allocated
// apart from the main loop's. The partials were written by other CTAs during this launch: __ldcg
// reads them from the L2, never from L1.
__device__ __noinline__ void merge_block(const float* __restrict__ part_m,
                                         const float* __restrict__ part_l,
                                         const float* __restrict__ part_acc,
                                         unsigned short* __restrict__ out, float* weight,
                                         int left, size_t base, int splits) {
    const int r = threadIdx.x / (D / MERGE_SPAN), c = threadIdx.x % (D / MERGE_SPAN);
    const bool live = r < left;
    const size_t row = base + r;
    const float* pm = part_m + row * splits;
    const float* pl = part_l + row * splits;
    float big = __int_as_float(0xff800000u);
    for (int i = c; i < splits; i += D / MERGE_SPAN) {
        if (live) big = fmaxf(big, __ldcg(pm + i));
    }
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) big = fmaxf(big, __shfl_xor_sync(0xffffffffu, big, off));
    float sum = 0.0f;
    for (int i = c; i < splits; i += D / MERGE_SPAN) {
        if (live) {
            const float w = fast_exp2(__ldcg(pm + i) - big);
            sum = fmaf(w, __ldcg(pl + i), sum);
            weight[r * MERGE_MAX_SPLITS + i] = w;
        }
    }
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    __syncthreads();
    if (!live) return;

    float acc[MERGE_SPAN] = {};
    const float4* src =
        reinterpret_cast<const float4*>(part_acc + row * splits * D + MERGE_SPAN * c);
    for (int i0 = 0; i0 < splits; i0 += MERGE_BATCH) {
        float4 a[MERGE_BATCH], b[MERGE_BATCH];
#pragma unroll
        for (int j = 0; j < MERGE_BATCH; ++j) {
            if (i0 + j < splits) {
                a[j] = __ldcg(src + static_cast<size_t>(i0 + j) * (D / 4));
                b[j] = __ldcg(src + static_cast<size_t>(i0 + j) * (D / 4) + 1);
            }
        }
#pragma unroll
        for (int j = 0; j < MERGE_BATCH; ++j) {
            if (i0 + j < splits) {
                const float w = weight[r * MERGE_MAX_SPLITS + i0 + j];
                acc[0] = fmaf(w, a[j].x, acc[0]);
                acc[1] = fmaf(w, a[j].y, acc[1]);
                acc[2] = fmaf(w, a[j].z, acc[2]);
                acc[3] = fmaf(w, a[j].w, acc[3]);
                acc[4] = fmaf(w, b[j].x, acc[4]);
                acc[5] = fmaf(w, b[j].y, acc[5]);
                acc[6] = fmaf(w, b[j].z, acc[6]);
                acc[7] = fmaf(w, b[j].w, acc[7]);
            }
        }
    }
    const float inv = 1.0f / sum;
    const uint4 packed = make_uint4(pack_bf16x2(acc[0] * inv, acc[1] * inv),
                                    pack_bf16x2(acc[2] * inv, acc[3] * inv),
                                    pack_bf16x2(acc[4] * inv, acc[5] * inv),
                                    pack_bf16x2(acc[6] * inv, acc[7] * inv));
    *reinterpret_cast<uint4*>(out + row * D + MERGE_SPAN * c) = packed;
}

__device__ __forceinline__ void load_chunks(uint4 (&r)[CHUNKS], const unsigned short* row) {
#pragma unroll
    for (int i = 0; i < CHUNKS; ++i) r[i] = __ldg(reinterpret_cast<const uint4*>(row + 32 * i));
}

// m16n8k16, bf16 in, fp32 accumulate.
__device__ __forceinline__ void mma_k16(float (&c)[4], unsigned a0, unsigned a1, unsigned a2,
                                        unsigned a3, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
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

// A warp's softmax state for NB blocks of 8 query rows: block b holds row g + 8 b in lanes
// (g, *) for m and l; its accumulator tile i = 2r + s of lane (g, t) holds out^T rows (dims)
// 32 r + 8 (g / 2) + 4 s + g % 2 (c0, c1) and the same + 2 (c2, c3), columns (rows of the block)
// 2t and 2t + 1.
template <int NB>
struct State {
    float m[NB], l[NB];
    float acc[NB][TILES][4];
};

// S = q K^T for the warp's 8 tokens: s[b][j] = row g + 8 b, token 2t + j, log2 units.
template <int NB>
__device__ __forceinline__ void scores(float (&s)[NB][2], const unsigned (&qa)[2 * CHUNKS][4],
                                       const uint4 (&kr)[CHUNKS], float scale_log2) {
    // two accumulators, so the 8 mma form two chains of 4
    float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < CHUNKS; ++r) {
        mma_k16(sa, qa[2 * r][0], qa[2 * r][1], qa[2 * r][2], qa[2 * r][3], kr[r].x, kr[r].y);
        mma_k16(sb, qa[2 * r + 1][0], qa[2 * r + 1][1], qa[2 * r + 1][2], qa[2 * r + 1][3],
                kr[r].z, kr[r].w);
    }
#pragma unroll
    for (int b = 0; b < NB; ++b) {
        s[b][0] = (sa[2 * b] + sb[2 * b]) * scale_log2;
        s[b][1] = (sa[2 * b + 1] + sb[2 * b + 1]) * scale_log2;
    }
}

// The online softmax of one warp-step and its P V product.
template <int NB>
__device__ __forceinline__ void softmax_pv(State<NB>& st, const float (&s)[NB][2],
                                           const uint4 (&vr)[CHUNKS], int tq) {
    float mx[NB];
    bool move = false;
#pragma unroll
    for (int b = 0; b < NB; ++b) {
        mx[b] = fmaxf(s[b][0], s[b][1]);
        mx[b] = fmaxf(mx[b], __shfl_xor_sync(0xffffffffu, mx[b], 1));
        mx[b] = fmaxf(mx[b], __shfl_xor_sync(0xffffffffu, mx[b], 2));
        move = move || mx[b] > st.m[b] + RESCALE_SLACK;
    }
    // m need not be the running maximum, only close to it: it moves (and l and acc are rescaled)
    // when a score would exceed it by more than RESCALE_SLACK
    if (__any_sync(0xffffffffu, move)) {
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            const float m_new = fmaxf(st.m[b], mx[b]);
            const float alpha = fast_exp2(st.m[b] - m_new);
            st.l[b] *= alpha;
            st.m[b] = m_new;
            const float a_lo = __shfl_sync(0xffffffffu, alpha, 8 * tq);      // row 2t of block b
            const float a_hi = __shfl_sync(0xffffffffu, alpha, 8 * tq + 4);  // row 2t + 1
#pragma unroll
            for (int i = 0; i < TILES; ++i) {
                st.acc[b][i][0] *= a_lo;
                st.acc[b][i][1] *= a_hi;
                st.acc[b][i][2] *= a_lo;
                st.acc[b][i][3] *= a_hi;
            }
        }
    }
    unsigned pb[NB];  // P^T: k = tokens 2t, 2t + 1; n = row g of block b
#pragma unroll
    for (int b = 0; b < NB; ++b) {
        const float p0 = fast_exp2(s[b][0] - st.m[b]), p1 = fast_exp2(s[b][1] - st.m[b]);
        float psum = p0 + p1;
        psum += __shfl_xor_sync(0xffffffffu, psum, 1);
        psum += __shfl_xor_sync(0xffffffffu, psum, 2);
        st.l[b] += psum;
        pb[b] = pack_bf16x2(p0, p1);
    }
#pragma unroll
    for (int r = 0; r < CHUNKS; ++r) {
        const unsigned v0 = transpose8x8(vr[r].x), v1 = transpose8x8(vr[r].y);
        const unsigned v2 = transpose8x8(vr[r].z), v3 = transpose8x8(vr[r].w);
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            mma_k8(st.acc[b][2 * r], v0, v1, pb[b]);
            mma_k8(st.acc[b][2 * r + 1], v2, v3, pb[b]);
        }
    }
}

// Folds the state a partner warp left in shared memory into this warp's (same layout).
template <int NB>
__device__ __forceinline__ void fold(State<NB>& st, const float* buf_acc, const float* buf_m,
                                     const float* buf_l, int lane) {
    const int g = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int b = 0; b < NB; ++b) {
        const float mb = buf_m[8 * b + g], lb = buf_l[8 * b + g];
        const float big = fmaxf(st.m[b], mb);
        const float wa = fast_exp2(st.m[b] - big), wb = fast_exp2(mb - big);
        st.l[b] = st.l[b] * wa + lb * wb;
        st.m[b] = big;
        const float wa_lo = __shfl_sync(0xffffffffu, wa, 8 * tq);
        const float wa_hi = __shfl_sync(0xffffffffu, wa, 8 * tq + 4);
        const float wb_lo = __shfl_sync(0xffffffffu, wb, 8 * tq);
        const float wb_hi = __shfl_sync(0xffffffffu, wb, 8 * tq + 4);
#pragma unroll
        for (int i = 0; i < TILES; ++i) {
            const float* src = buf_acc + ((b * TILES + i) * 4) * 32 + lane;
            st.acc[b][i][0] = st.acc[b][i][0] * wa_lo + src[0] * wb_lo;
            st.acc[b][i][1] = st.acc[b][i][1] * wa_hi + src[32] * wb_hi;
            st.acc[b][i][2] = st.acc[b][i][2] * wa_lo + src[64] * wb_lo;
            st.acc[b][i][3] = st.acc[b][i][3] * wa_hi + src[96] * wb_hi;
        }
    }
}

template <int NB>
__device__ __forceinline__ void stash(const State<NB>& st, float* buf_acc, float* buf_m,
                                      float* buf_l, int lane) {
    const int g = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int b = 0; b < NB; ++b) {
        if (tq == 0) {
            buf_m[8 * b + g] = st.m[b];
            buf_l[8 * b + g] = st.l[b];
        }
#pragma unroll
        for (int i = 0; i < TILES; ++i) {
            float* dst = buf_acc + ((b * TILES + i) * 4) * 32 + lane;
#pragma unroll
            for (int c = 0; c < 4; ++c) dst[32 * c] = st.acc[b][i][c];
        }
    }
}

// One warp-step on a register stage: scores, then the stage's K reloaded for the step
// `ahead` tokens on (if the warp has one), softmax and P V, then its V reloaded; the warp's next
// step is `step` tokens on. Returns whether the warp has one.
template <int NB>
__device__ __forceinline__ bool stage_step(State<NB>& st, const unsigned (&qa)[2 * CHUNKS][4],
                                           uint4 (&kr)[CHUNKS], uint4 (&vr)[CHUNKS],
                                           const unsigned short* kh, const unsigned short* vh,
                                           int& t, int t_end, int ahead, int step, int g,
                                           int tq, float scale_log2) {
    float s[NB][2];
    scores<NB>(s, qa, kr, scale_log2);
    const int t_ahead = t + ahead;
    const bool load = t_ahead < t_end;
    if (load) load_chunks(kr, kh + static_cast<size_t>(t_ahead + g) * D);
    softmax_pv<NB>(st, s, vr, tq);
    if (load) load_chunks(vr, vh + static_cast<size_t>(t_ahead + g) * D);
    t += step;
    return t < t_end;
}

__device__ __forceinline__ void prefetch_l2(const unsigned short* p) {
    asm volatile("prefetch.global.L2 [%0];\n" : : "l"(p));
}

// Grid (CTAs of row blocks, splits, B * Hkv). q and out are
// [B, Hq, k, D]: the R = 4k rows of a KV head are contiguous, row r = (query head 4 hk + r / k,
// draft r % k); block rb holds rows 16 rb .. 16 rb + 15 (NB = 2) or rows 0..7 (NB = 1). The cache
// is [B, Hkv, T + k, D].
// Partial state p = (group * R + row) * splits + split.
template <int NB, int STAGES, int GROUPS>
__device__ __forceinline__ void verify_mma(const unsigned short* __restrict__ q,
                                           const unsigned short* __restrict__ kc,
                                           const unsigned short* __restrict__ vc,
                                           float* __restrict__ part_m, float* __restrict__ part_l,
                                           float* __restrict__ part_acc,
                                           unsigned short* __restrict__ out, int T, int draft,
                                           int tokens_per_split, float scale_log2) {
    __shared__ unsigned int ticket;
    __shared__ float buf_acc[WARPS / 2][NB * TILES * 4 * 32];
    __shared__ float buf_m[WARPS / 2][8 * NB], buf_l[WARPS / 2][8 * NB];

    constexpr int GROUP_WARPS = WARPS / GROUPS;          // warps a row block
    constexpr int STEP = GROUP_WARPS * WARP_TOKENS;      // tokens a row block takes a step
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane >> 2, tq = lane & 3;
    const int slot = warp % GROUP_WARPS;                 // the warp's place in its row block
    const int rb = blockIdx.x * GROUPS + warp / GROUP_WARPS, split = blockIdx.y, group = blockIdx.z;
    const int rows = G * draft, tc = T + draft;
    const int row0 = rb * BLOCK_ROWS;  // first row of the block within the KV head's rows
    const int t_begin = split * tokens_per_split;
    const int t_end = min(T, t_begin + tokens_per_split);
    const unsigned short* kh = kc + static_cast<size_t>(group) * tc * D + tq * 8;
    const unsigned short* vh = vc + static_cast<size_t>(group) * tc * D + tq * 8;

    // The range is a non-empty multiple of 64 tokens (of STEP), so every warp has at least one
    // step; its first loads go out before q is read, so the two latencies overlap.
    int t = t_begin + slot * WARP_TOKENS;
    uint4 kr[CHUNKS], vr[CHUNKS], kr2[CHUNKS], vr2[CHUNKS];
    load_chunks(kr, kh + static_cast<size_t>(t + g) * D);
    load_chunks(vr, vh + static_cast<size_t>(t + g) * D);
    if (STAGES == 2 && t + STEP < t_end) {
        load_chunks(kr2, kh + static_cast<size_t>(t + STEP + g) * D);
        load_chunks(vr2, vh + static_cast<size_t>(t + STEP + g) * D);
    }
    // The draft positions' rows, which warp 0 of the last range reads after its loop.
    if (blockIdx.y == gridDim.y - 1 && warp == 0 && g < draft) {
        const size_t at = (static_cast<size_t>(group) * tc + T + g) * D + tq * 8;
        prefetch_l2(kc + at);
        prefetch_l2(vc + at);
    }

    // q as the A operand: a0/a2 row g, a1/a3 row g + 8 (zero past the rows), dims in the order
    // of K's chunks
    unsigned qa[2 * CHUNKS][4];
#pragma unroll
    for (int r = 0; r < CHUNKS; ++r) {
        uint4 lo = make_uint4(0u, 0u, 0u, 0u), hi = make_uint4(0u, 0u, 0u, 0u);
        const unsigned short* qr =
            q + (static_cast<size_t>(group) * rows + row0) * D + 32 * r + tq * 8;
        if (row0 + g < rows) lo = *reinterpret_cast<const uint4*>(qr + g * D);
        if (NB == 2 && row0 + g + 8 < rows) hi = *reinterpret_cast<const uint4*>(qr + (g + 8) * D);
        qa[2 * r][0] = lo.x;
        qa[2 * r][1] = hi.x;
        qa[2 * r][2] = lo.y;
        qa[2 * r][3] = hi.y;
        qa[2 * r + 1][0] = lo.z;
        qa[2 * r + 1][1] = hi.z;
        qa[2 * r + 1][2] = lo.w;
        qa[2 * r + 1][3] = hi.w;
    }

    State<NB> st;
#pragma unroll
    for (int b = 0; b < NB; ++b) {
        st.m[b] = __int_as_float(0xff800000u);
        st.l[b] = 0.0f;
#pragma unroll
        for (int i = 0; i < TILES; ++i) {
            st.acc[b][i][0] = st.acc[b][i][1] = st.acc[b][i][2] = st.acc[b][i][3] = 0.0f;
        }
    }

    if (STAGES == 2) {  // steps alternate between the stages; each reloads two steps ahead
        const int ahead = 2 * STEP;
        while (stage_step<NB>(st, qa, kr, vr, kh, vh, t, t_end, ahead, STEP, g, tq, scale_log2) &&
               stage_step<NB>(st, qa, kr2, vr2, kh, vh, t, t_end, ahead, STEP, g, tq, scale_log2)) {
        }
    } else {
        while (stage_step<NB>(st, qa, kr, vr, kh, vh, t, t_end, STEP, STEP, g, tq, scale_log2)) {
        }
    }

    // The draft positions T..T+k-1: one masked step of each row block's first warp in the last
    // range. Token T + g exists for g < k; draft i (row r, i = r % k) sees T + j for j <= i.
    if (blockIdx.y == gridDim.y - 1 && threadIdx.x / 32 % GROUP_WARPS == 0) {
        // addresses recomputed from the parameters: nothing of this step stays live in the loop
        const size_t at = (static_cast<size_t>(blockIdx.z) * (T + draft) + T + g) * D + tq * 8;
        if (g < draft) {
            load_chunks(kr, kc + at);
            load_chunks(vr, vc + at);
        } else {
#pragma unroll
            for (int i = 0; i < CHUNKS; ++i) kr[i] = vr[i] = make_uint4(0u, 0u, 0u, 0u);
        }
        float s[NB][2];
        scores<NB>(s, qa, kr, scale_log2);
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            const int block = blockIdx.x * GROUPS + threadIdx.x / 32 / GROUP_WARPS;
            const int i = (BLOCK_ROWS * block + g + 8 * b) % draft;  // this lane's row's draft
            if (2 * tq > i) s[b][0] = __int_as_float(0xff800000u);
            if (2 * tq + 1 > i) s[b][1] = __int_as_float(0xff800000u);
        }
        softmax_pv<NB>(st, s, vr, tq);
    }

    // Rounds within each row block's warps (8 warps: 4-7 into 0-3, 2-3 into 0-1, 1 into 0; two
    // blocks of 4: 2-3 into 0-1 and 1 into 0 in each), through shared slots of its own.
    {
        const int w = threadIdx.x / 32, sl = w % GROUP_WARPS;
        const int own = w / GROUP_WARPS * (GROUP_WARPS / 2);  // the block's first slot
#pragma unroll
        for (int half = GROUP_WARPS / 2; half >= 1; half /= 2) {
            if (sl >= half && sl < 2 * half) {
                const int at = own + sl - half;
                stash<NB>(st, buf_acc[at], buf_m[at], buf_l[at], lane);
            }
            __syncthreads();
            if (sl < half) fold<NB>(st, buf_acc[own + sl], buf_m[own + sl], buf_l[own + sl], lane);
            __syncthreads();
        }
    }

    // Each block's first warp writes its states (indices recomputed from the parameters).
    const int block = blockIdx.x * GROUPS + threadIdx.x / 32 / GROUP_WARPS;
    const int left = G * draft - BLOCK_ROWS * block;  // rows from the block's first on
    const size_t base = static_cast<size_t>(blockIdx.z) * G * draft + BLOCK_ROWS * block;
    const size_t n_splits = gridDim.y, at_split = blockIdx.y;
    if (threadIdx.x / 32 % GROUP_WARPS == 0) {
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            const int r = 8 * b + g;
            if (tq == 0 && r < left) {
                part_m[(base + r) * n_splits + at_split] = st.m[b];
                part_l[(base + r) * n_splits + at_split] = st.l[b];
            }
            const int c_lo = 8 * b + 2 * tq, c_hi = c_lo + 1;  // block rows of columns 2t, 2t + 1
#pragma unroll
            for (int i = 0; i < TILES; ++i) {
                const int dim = 32 * (i / 2) + 8 * (g / 2) + 4 * (i % 2) + g % 2;
                if (c_lo < left) {
                    float* dst = part_acc + ((base + c_lo) * n_splits + at_split) * D;
                    dst[dim] = st.acc[b][i][0];
                    dst[dim + 2] = st.acc[b][i][2];
                }
                if (c_hi < left) {
                    float* dst = part_acc + ((base + c_hi) * n_splits + at_split) * D;
                    dst[dim] = st.acc[b][i][1];
                    dst[dim + 2] = st.acc[b][i][3];
                }
            }
        }
    }

    // Publish the partials and take a ticket in one step: after the barrier, thread 0's
    // acquire-release add orders warp 0's partial stores before the ticket (and, in the CTA that
    // draws the last ticket, every other CTA's stores before the merge's reads).
    __syncthreads();
    const unsigned counter = blockIdx.z * gridDim.x + blockIdx.x;
    if (threadIdx.x == 0) ticket = take_ticket(&block_tickets[counter]);
    __syncthreads();
    if (ticket != gridDim.y - 1) return;

#pragma unroll
    for (int b = 0; b < GROUPS; ++b) {
        if (b > 0) __syncthreads();  // the first block's readers are done with the weights
        const int mb = blockIdx.x * GROUPS + b;
        merge_block(part_m, part_l, part_acc, out, &buf_acc[0][0],
                    min(G * draft - BLOCK_ROWS * mb, BLOCK_ROWS),
                    static_cast<size_t>(blockIdx.z) * G * draft + BLOCK_ROWS * mb,
                    static_cast<int>(n_splits));
    }
    if (threadIdx.x == 0) block_tickets[counter] = 0;  // ready for the next launch
}

// At most 8 rows a KV head (k <= 2): one block of 8 rows, rows 8-15 of the tiles zero.
extern "C" __global__ void __launch_bounds__(THREADS, 2)
verify_span8(const unsigned short* __restrict__ q, const unsigned short* __restrict__ kc,
             const unsigned short* __restrict__ vc, float* __restrict__ part_m,
             float* __restrict__ part_l, float* __restrict__ part_acc,
             unsigned short* __restrict__ out, int T, int draft, int tokens_per_split,
             float scale_log2) {
    verify_mma<1, 1, 1>(q, kc, vc, part_m, part_l, part_acc, out, T, draft, tokens_per_split,
                        scale_log2);
}

// One block of 16 rows (k = 3, 4), two register stages: one CTA an SM.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
verify_span16(const unsigned short* __restrict__ q, const unsigned short* __restrict__ kc,
              const unsigned short* __restrict__ vc, float* __restrict__ part_m,
              float* __restrict__ part_l, float* __restrict__ part_acc,
              unsigned short* __restrict__ out, int T, int draft, int tokens_per_split,
              float scale_log2) {
    verify_mma<2, 2, 1>(q, kc, vc, part_m, part_l, part_acc, out, T, draft, tokens_per_split,
                        scale_log2);
}

// Two blocks of 16 rows (k = 5 to 8) in one CTA, four warps each, both over the CTA's range.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
verify_span32(const unsigned short* __restrict__ q, const unsigned short* __restrict__ kc,
              const unsigned short* __restrict__ vc, float* __restrict__ part_m,
              float* __restrict__ part_l, float* __restrict__ part_acc,
              unsigned short* __restrict__ out, int T, int draft, int tokens_per_split,
              float scale_log2) {
    verify_mma<2, 2, 2>(q, kc, vc, part_m, part_l, part_acc, out, T, draft, tokens_per_split,
                        scale_log2);
}
