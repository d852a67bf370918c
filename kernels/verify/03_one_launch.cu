// 03 one launch: 02 with the split merge done by the last CTA of each row block to finish
//
// Idea against 02: 02 ends with a second launch that merges each row's ranges; a dependent launch
// costs its gap and its own start (a few us against a ~40 us step). Here, as in attention/04,
// each CTA writes its partial states and then takes a ticket from a per-(KV head, row block)
// counter in device memory with an acquire-release atomic (which publishes the CTA's stores);
// the CTA that draws ticket splits - 1 reads the block's partials back from the L2 and writes the
// bf16 output, then puts the counter back to zero for the next launch. The loop, the draft step
// and the three-round CTA merge are 02's, unchanged.
//
// Expected bound (estimate), B = 1, 32 query / 8 KV heads, D = 128, T = 32768: 02's time less the
// second launch, ~2-3 us; the last CTA's merge reads 16 rows x up to 32 ranges x 520 B = 266 KB
// from the L2 in one round trip, well under 1 us. So ~37-40 us for k = 1 to 4 against the 31.3 us
// copy floor of the 134 MB cache.
//
// Size constraints: 02's (D = 128, 4 query heads a KV head, 1 <= k <= 8, T a multiple of 64,
// tokens_per_split a multiple of 64, every split non-empty); B * Hkv * row blocks <= 4096
// (MAX_COUNTERS); launches must not overlap (they share the counters), and a launch cut short
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
constexpr float RESCALE_SLACK = 8.0f;

static_assert(D == 128 && CHUNKS * 4 * 8 == D, "4 lanes x 4 chunks of 8 dims cover a row");
static_assert(CTA_TOKENS == 64, "the launcher checks T % 64 == 0 and tokens_per_split % 64 == 0");
static_assert(WARP_TOKENS == 8, "the draft positions (k <= 8) fit one masked warp-step");
static_assert(WARPS == 8, "the CTA merge folds 8 warp states in three rounds");
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

// The merge of one row block's ranges, run by the CTA that drew the last ticket: thread
// (r, c) = (threadIdx.x / 16, threadIdx.x % 16) writes dims 8c..8c+7 of block row r. Out of
// line, so that its registers are allocated apart from the main loop's. The partials were
// written by other CTAs during this launch: __ldcg reads them from the L2, never from L1.
__device__ __noinline__ void merge_block(const float* __restrict__ part_m,
                                         const float* __restrict__ part_l,
                                         const float* __restrict__ part_acc,
                                         unsigned short* __restrict__ out, int left, size_t base,
                                         int splits) {
    const int r = threadIdx.x / (D / MERGE_SPAN), c = threadIdx.x % (D / MERGE_SPAN);
    if (r >= left) return;
    const size_t row = base + r;
    const float* pm = part_m + row * splits;
    const float* pl = part_l + row * splits;
    float big = __int_as_float(0xff800000u);
    for (int i = 0; i < splits; ++i) big = fmaxf(big, __ldcg(pm + i));
    float sum = 0.0f, acc[MERGE_SPAN] = {};
    for (int i = 0; i < splits; ++i) {
        const float w = fast_exp2(__ldcg(pm + i) - big);
        sum = fmaf(w, __ldcg(pl + i), sum);
        const float4* src =
            reinterpret_cast<const float4*>(part_acc + (row * splits + i) * D + MERGE_SPAN * c);
        const float4 a = __ldcg(src), b = __ldcg(src + 1);
        acc[0] = fmaf(w, a.x, acc[0]);
        acc[1] = fmaf(w, a.y, acc[1]);
        acc[2] = fmaf(w, a.z, acc[2]);
        acc[3] = fmaf(w, a.w, acc[3]);
        acc[4] = fmaf(w, b.x, acc[4]);
        acc[5] = fmaf(w, b.y, acc[5]);
        acc[6] = fmaf(w, b.z, acc[6]);
        acc[7] = fmaf(w, b.w, acc[7]);
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

// Grid (row blocks, splits, B * Hkv): the row blocks of a range adjacent. q and out are
// [B, Hq, k, D]: the R = 4k rows of a KV head are contiguous, row r = (query head 4 hk + r / k,
// draft r % k); block rb holds rows 16 rb .. 16 rb + 15 (NB = 2) or rows 0..7 (NB = 1). The cache
// is [B, Hkv, T + k, D].
// Partial state p = (group * R + row) * splits + split.
template <int NB>
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

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane >> 2, tq = lane & 3;
    const int rb = blockIdx.x, split = blockIdx.y, group = blockIdx.z;
    const int rows = G * draft, tc = T + draft;
    const int row0 = rb * BLOCK_ROWS;  // first row of the block within the KV head's rows
    const int t_begin = split * tokens_per_split;
    const int t_end = min(T, t_begin + tokens_per_split);
    const unsigned short* kh = kc + static_cast<size_t>(group) * tc * D + tq * 8;
    const unsigned short* vh = vc + static_cast<size_t>(group) * tc * D + tq * 8;

    // The range is a non-empty multiple of CTA_TOKENS, so every warp has at least one step; its
    // first loads go out before q is read, so the two latencies overlap.
    int t = t_begin + warp * WARP_TOKENS;
    uint4 kr[CHUNKS], vr[CHUNKS];
    load_chunks(kr, kh + static_cast<size_t>(t + g) * D);
    load_chunks(vr, vh + static_cast<size_t>(t + g) * D);

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

    while (true) {
        float s[NB][2];
        scores<NB>(s, qa, kr, scale_log2);
        // kr is free: the next step's K loads fly during this one's softmax and P V
        const int t_next = t + CTA_TOKENS;
        const bool more = t_next < t_end;
        if (more) load_chunks(kr, kh + static_cast<size_t>(t_next + g) * D);
        softmax_pv<NB>(st, s, vr, tq);
        if (!more) break;
        load_chunks(vr, vh + static_cast<size_t>(t_next + g) * D);
        t = t_next;
    }

    // The draft positions T..T+k-1: one masked step of warp 0 in the last range. Token T + g
    // exists for g < k; draft i (row r, i = r % k) sees T + j for j <= i.
    if (blockIdx.y == gridDim.y - 1 && warp == 0) {
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
            const int i = (BLOCK_ROWS * blockIdx.x + g + 8 * b) % draft;  // this lane's row's draft
            if (2 * tq > i) s[b][0] = __int_as_float(0xff800000u);
            if (2 * tq + 1 > i) s[b][1] = __int_as_float(0xff800000u);
        }
        softmax_pv<NB>(st, s, vr, tq);
    }

    // Three rounds: warps 4-7 into 0-3, 2-3 into 0-1, 1 into 0.
#pragma unroll
    for (int half = WARPS / 2; half >= 1; half /= 2) {
        if (warp >= half && warp < 2 * half) {
            stash<NB>(st, buf_acc[warp - half], buf_m[warp - half], buf_l[warp - half], lane);
        }
        __syncthreads();
        if (warp < half) fold<NB>(st, buf_acc[warp], buf_m[warp], buf_l[warp], lane);
        __syncthreads();
    }

    // Warp 0 writes the block's states (indices recomputed from the parameters).
    const int left = G * draft - BLOCK_ROWS * static_cast<int>(blockIdx.x);  // rows from row0 on
    const size_t base = static_cast<size_t>(blockIdx.z) * G * draft + BLOCK_ROWS * blockIdx.x;
    const size_t n_splits = gridDim.y, at_split = blockIdx.y;
    if (threadIdx.x < 32) {
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

    merge_block(part_m, part_l, part_acc, out, min(left, BLOCK_ROWS), base,
                static_cast<int>(n_splits));
    if (threadIdx.x == 0) block_tickets[counter] = 0;  // ready for the next launch
}

// At most 8 rows a KV head (k <= 2): one block of 8 rows, rows 8-15 of the tiles zero.
extern "C" __global__ void __launch_bounds__(THREADS, 2)
verify_fused8(const unsigned short* __restrict__ q, const unsigned short* __restrict__ kc,
              const unsigned short* __restrict__ vc, float* __restrict__ part_m,
              float* __restrict__ part_l, float* __restrict__ part_acc,
              unsigned short* __restrict__ out, int T, int draft, int tokens_per_split,
              float scale_log2) {
    verify_mma<1>(q, kc, vc, part_m, part_l, part_acc, out, T, draft, tokens_per_split,
                  scale_log2);
}

// Blocks of 16 rows (k >= 3). The second block's state takes 168 registers a thread, so one CTA
// an SM (at two, ptxas keeps 128 and spills 164 bytes a thread); the launcher plans for one.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
verify_fused16(const unsigned short* __restrict__ q, const unsigned short* __restrict__ kc,
               const unsigned short* __restrict__ vc, float* __restrict__ part_m,
               float* __restrict__ part_l, float* __restrict__ part_acc,
               unsigned short* __restrict__ out, int T, int draft, int tokens_per_split,
               float scale_log2) {
    verify_mma<2>(q, kc, vc, part_m, part_l, part_acc, out, T, draft, tokens_per_split,
                  scale_log2);
}
