// 02 tensor core: attention/04's mma.sync decode loop, with the draft rows filling its empty tile
//
// Idea against 01: 04 computes the scores of one decode as an m16n8k16 product whose 16 A rows
// are query heads, and uses 4 of them (the 4 query heads of a KV head); the other 12 rows are
// zeros the tensor core multiplies anyway. A verify step has R = 4k query rows a KV head, so at
// k = 2 the same instructions serve 8 rows and at k = 4 all 16: the scores cost per cache token
// does not change from k = 1 to k = 4. The P V product out^T = V^T P^T takes the query rows as
// its n = 8 columns, so rows 8-15 take a second m16n8k8 per dims tile (8 more a warp-step).
// Against 01's fp32 FMA loop, whose work grows with R, the arithmetic a token is nearly flat in k
// and stays under the memory time. k = 8 (32 rows) takes two CTAs a range, one a 16-row block,
// adjacent in the grid so the second reads the range mostly from the L2.
//
// The loop is 04's: a warp takes 8 tokens a step, lane (g, t) = (lane / 4, lane % 4) loads token
// g's 16-byte chunks t, t + 4, t + 8, t + 12 of K and V, q is the A operand (row g in a0/a2 and
// row g + 8 in a1/a3, dims in the order of K's chunks), S lands as S[row g][tokens 2t, 2t + 1] in
// c0/c1 (and row g + 8 in c2/c3), which is the B fragment of P V as it stands; V^T comes from V's
// chunks by movmatrix. The softmax reference m of a row moves only when a score would exceed it
// by more than 8 (log2 units). Draft token i sees the T cached positions and draft positions
// 0..i (the cache holds T + k positions); warp 0 of the last range's CTA takes the draft
// positions as one extra masked step of 8 tokens after its loop.
//
// A CTA merges its 8 warp states in three rounds through shared memory: warps 4-7 store their
// fragments, warps 0-3 fold them in (both warps hold the same (row, dim) in the same register of
// the same lane, so no layout changes); then 2-3 into 0-1; then 1 into 0. Warp 0 writes one
// unnormalised partial state per row (m, l, acc); a second launch merges each row's ranges,
// out = sum 2^(m_i - M) acc_i / sum 2^(m_i - M) l_i (01's merge).
//
// Expected bound (estimate), B = 1, 32 query / 8 KV heads, D = 128, T = 32768: the 134 MB of K
// and V read once take 31.3 us at the ~4.29 TB/s copy ceiling at every k. 04 measured ~37 us for
// one token with 4 rows; at k = 2 and 4 the warp-step grows by the second row-block's 8 mma and
// rescale (R > 8), so ~38-40 us is the target, plus the merge launch (~3 us: a launch gap and
// reading R x 33 states) and the three-round CTA merge (~1 us). k = 8 reads the range twice in
// adjacent CTAs; if the L2 catches the second read, ~45 us; if not, ~75 us.
//
// Size constraints: D = 128, 4 query heads a KV head, 1 <= k <= 8, T a multiple of 64;
// tokens_per_split a multiple of 64 and every split non-empty; rows a KV head R = 4k, row blocks
// of 16 (entry verify_mma16) or a single block of at most 8 rows (verify_mma8); values finite.

constexpr int D = 128;
constexpr int G = 4;                  // query heads per KV head
constexpr int WARPS = 8;
constexpr int THREADS = WARPS * 32;
constexpr int WARP_TOKENS = 8;        // tokens a warp takes a step: one n8 tile of scores
constexpr int CTA_TOKENS = WARPS * WARP_TOKENS;
constexpr int CHUNKS = 4;             // 16-byte loads a lane a row: chunks t, t + 4, t + 8, t + 12
constexpr int TILES = 8;              // m16 tiles of dimensions in the P V product
constexpr int BLOCK_ROWS = 16;        // query rows a CTA (one m16 tile of scores)
constexpr int MERGE_THREADS = D / 2;
constexpr float RESCALE_SLACK = 8.0f;

static_assert(D == 128 && CHUNKS * 4 * 8 == D, "4 lanes x 4 chunks of 8 dims cover a row");
static_assert(CTA_TOKENS == 64, "the launcher checks T % 64 == 0 and tokens_per_split % 64 == 0");
static_assert(WARP_TOKENS == 8, "the draft positions (k <= 8) fit one masked warp-step");
static_assert(WARPS == 8, "the CTA merge folds 8 warp states in three rounds");

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

// Grid (row blocks, splits, B * Hkv). q and out are [B, Hq, k, D]: the R = 4k rows of a KV head
// are contiguous, row r = (query head 4 hk + r / k, draft r % k); block rb holds rows 16 rb ..
// 16 rb + 15 (NB = 2) or rows 0..7 (NB = 1). The cache is [B, Hkv, T + k, D].
// Partial state p = (group * R + row) * splits + split.
template <int NB>
__device__ __forceinline__ void verify_mma(const unsigned short* __restrict__ q,
                                           const unsigned short* __restrict__ kc,
                                           const unsigned short* __restrict__ vc,
                                           float* __restrict__ part_m, float* __restrict__ part_l,
                                           float* __restrict__ part_acc, int T, int draft,
                                           int tokens_per_split, float scale_log2) {
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
    if (threadIdx.x >= 32) return;

    // Warp 0 writes the block's states (indices recomputed from the parameters).
    const int left = G * draft - BLOCK_ROWS * static_cast<int>(blockIdx.x);  // rows from row0 on
    const size_t base = static_cast<size_t>(blockIdx.z) * G * draft + BLOCK_ROWS * blockIdx.x;
    const size_t n_splits = gridDim.y, at_split = blockIdx.y;
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

// At most 8 rows a KV head (k <= 2): one block of 8 rows, rows 8-15 of the tiles zero.
extern "C" __global__ void __launch_bounds__(THREADS, 2)
verify_mma8(const unsigned short* __restrict__ q, const unsigned short* __restrict__ kc,
            const unsigned short* __restrict__ vc, float* __restrict__ part_m,
            float* __restrict__ part_l, float* __restrict__ part_acc, int T, int draft,
            int tokens_per_split, float scale_log2) {
    verify_mma<1>(q, kc, vc, part_m, part_l, part_acc, T, draft, tokens_per_split, scale_log2);
}

// Blocks of 16 rows (k >= 3). The second block's state takes 168 registers a thread, so one CTA
// an SM (at two, ptxas keeps 128 and spills 164 bytes a thread); the launcher plans for one.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
verify_mma16(const unsigned short* __restrict__ q, const unsigned short* __restrict__ kc,
             const unsigned short* __restrict__ vc, float* __restrict__ part_m,
             float* __restrict__ part_l, float* __restrict__ part_acc, int T, int draft,
             int tokens_per_split, float scale_log2) {
    verify_mma<2>(q, kc, vc, part_m, part_l, part_acc, T, draft, tokens_per_split, scale_log2);
}

// Grid (B * Hq * k): one CTA a query row, thread d2 owns dims 2 d2 and 2 d2 + 1.
extern "C" __global__ void __launch_bounds__(MERGE_THREADS)
verify_merge(const float* __restrict__ part_m, const float* __restrict__ part_l,
             const float* __restrict__ part_acc, unsigned short* __restrict__ out, int splits) {
    const size_t row = blockIdx.x;
    const int d2 = threadIdx.x;
    const float* pm = part_m + row * splits;
    const float* pl = part_l + row * splits;
    float big = __int_as_float(0xff800000u);
    for (int i = 0; i < splits; ++i) big = fmaxf(big, pm[i]);
    float sum = 0.0f;
    float2 val = make_float2(0.0f, 0.0f);
    for (int i = 0; i < splits; ++i) {
        const float w = fast_exp2(pm[i] - big);
        sum = fmaf(w, pl[i], sum);
        const float2 a = reinterpret_cast<const float2*>(part_acc + (row * splits + i) * D)[d2];
        val.x = fmaf(w, a.x, val.x);
        val.y = fmaf(w, a.y, val.y);
    }
    const float inv = 1.0f / sum;
    const unsigned packed =
        to_bf16(val.x * inv) | (static_cast<unsigned>(to_bf16(val.y * inv)) << 16);
    reinterpret_cast<unsigned*>(out + row * D)[d2] = packed;
}
