// 01 one pass: k draft tokens verified in one pass over the KV cache, fp32 FMA from shared memory
//
// Idea against 00: k draft tokens of one sequence attend over the same cache, so a CTA that owns
// a (KV head, token range) stages each K and V tile in shared memory once and computes every one
// of the R = 4 heads x k drafts query rows against it. The cache is read once, not k times.
// Draft token i sees the T cached positions and draft positions 0..i: its K and V are already in
// the cache at positions T..T+k-1 (cache length Tc = T + k), and the CTA of the last range also
// takes those k positions, masking position T + j for draft i when j > i.
//
// The CTA (256 threads) steps through its range 32 tokens at a time: the next tile's K and V are
// loaded into registers while the current one is computed (2 x 16-byte loads a thread a tensor),
// then stored to shared memory. Scores: thread e computes row e / 32 against token e % 32 (R x 32
// dot products of 128 dims, q kept in fp32 in shared memory, K rows padded by one word so the 32
// lanes of a warp read 32 different banks). Softmax: a warp a row, one lane a token, running max
// m and sum l per row (log2 units). P V: thread e owns row e / 64, dims 2(e % 64) and 2(e % 64)+1,
// and sums the 32 tokens. Each CTA writes an unnormalised partial state (m, l, acc) per row; a
// second launch merges the splits of each row, out = sum 2^(m_i - M) acc_i / sum 2^(m_i - M) l_i.
//
// Expected bound (estimate), B = 1, 32 query / 8 KV heads, D = 128, T = 32768: the bytes are those
// of one decode, 134 MB of K and V, 31.3 us at the ~4.29 TB/s copy ceiling, whatever k is. The
// arithmetic is not free here: per token and row, a 128-dim dot (64 iterations of 2 FMA, a shared
// load of K and a broadcast load of q) and 128 FMA of P V, about 700 warp instructions per 32
// tokens and row. At k = 8 (R = 32) a CTA of 1024 tokens issues ~0.7 M warp instructions; two CTAs
// an SM at ~4 a cycle is ~0.36 M cycles, ~190 us at 1.98 GHz: compute-bound, and growing with k.
// At k = 1 (R = 4) the same arithmetic is ~24 us, under the memory time, so 01 should track the
// copy floor at k = 1 and fall off it from k = 2 or 4: the lesson of 02.
//
// Size constraints: D = 128, 4 query heads a KV head, 1 <= k <= 8 (MAX_DRAFT), T a multiple of
// 64; tokens_per_split a multiple of 64 and every split non-empty (the launcher's plan); the
// partial buffers hold B * Hq * k * splits states of D + 2 floats; values finite.

constexpr int D = 128;
constexpr int G = 4;                     // query heads per KV head
constexpr int MAX_DRAFT = 8;
constexpr int MAX_ROWS = G * MAX_DRAFT;  // query rows a CTA serves
constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;
constexpr int TILE = 32;                 // tokens staged in shared memory a step
constexpr int KROW = D / 2 + 1;          // words a staged K row: 64 + one of padding
constexpr int VROW = D / 2;              // words a staged V row
constexpr int ROW_CHUNKS = D / 8;        // 16-byte chunks a cache row
constexpr int LOADS = TILE * ROW_CHUNKS / THREADS;  // 16-byte loads a thread a tile and tensor
constexpr int ACC = MAX_ROWS * (D / 2) / THREADS;   // (row, dim pair) accumulators a thread
constexpr int MERGE_THREADS = D / 2;

static_assert(TILE == 32, "the softmax gives one lane a token of the tile");
static_assert(TILE * ROW_CHUNKS % THREADS == 0, "a tile's loads divide evenly among the threads");
static_assert(MAX_ROWS * (D / 2) % THREADS == 0, "the P V accumulators divide evenly");
static_assert(64 % TILE == 0, "a split (a multiple of 64 tokens) is whole tiles");

__device__ __forceinline__ float fast_exp2(float x) {  // exp2(-inf) = 0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float lo_bf16(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_bf16(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ unsigned short to_bf16(float x) {
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
    return r;
}

// Thread `threadIdx.x` loads chunks c = threadIdx.x + THREADS * j of the tile at t0: token
// c / ROW_CHUNKS, 16-byte chunk c % ROW_CHUNKS; tokens at or past t_end read as zeros.
__device__ __forceinline__ void fetch_tile(uint4 (&r)[LOADS], const unsigned short* head, int t0,
                                           int t_end) {
#pragma unroll
    for (int j = 0; j < LOADS; ++j) {
        const int c = threadIdx.x + THREADS * j;
        const int pos = t0 + c / ROW_CHUNKS;
        r[j] = pos < t_end
                   ? __ldg(reinterpret_cast<const uint4*>(head + static_cast<size_t>(pos) * D) +
                           c % ROW_CHUNKS)
                   : make_uint4(0u, 0u, 0u, 0u);
    }
}

// Grid (splits, Hkv, B). q and out are [B, Hq, k, D], so the R = 4k rows of KV head hk are
// contiguous: row r = (query head 4 hk + r / k, draft r % k). The cache is [B, Hkv, T + k, D].
// Partial state p = (global row) * splits + split.
extern "C" __global__ void __launch_bounds__(THREADS)
verify_partial(const unsigned short* __restrict__ q, const unsigned short* __restrict__ kc,
               const unsigned short* __restrict__ vc, float* __restrict__ part_m,
               float* __restrict__ part_l, float* __restrict__ part_acc, int T, int draft,
               int tokens_per_split, float scale_log2) {
    __shared__ __align__(16) float qs[MAX_ROWS][D];
    __shared__ unsigned ks[TILE][KROW];
    __shared__ __align__(16) unsigned vs[TILE][VROW];
    __shared__ float ps[MAX_ROWS][TILE];
    __shared__ float row_m[MAX_ROWS], row_l[MAX_ROWS], row_alpha[MAX_ROWS];

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int split = blockIdx.x, splits = gridDim.x;
    const int group = blockIdx.z * gridDim.y + blockIdx.y;
    const int rows = G * draft;
    const int tc = T + draft;
    const int t_begin = split * tokens_per_split;
    // The last range also takes the k draft positions; the causal mask below trims them per row.
    const int t_end = split == splits - 1 ? tc : min(T, t_begin + tokens_per_split);
    const unsigned short* kh = kc + static_cast<size_t>(group) * tc * D;
    const unsigned short* vh = vc + static_cast<size_t>(group) * tc * D;
    const unsigned short* qg = q + static_cast<size_t>(group) * rows * D;

    uint4 kn[LOADS], vn[LOADS];
    fetch_tile(kn, kh, t_begin, t_end);
    fetch_tile(vn, vh, t_begin, t_end);

    for (int i = threadIdx.x; i < rows * D; i += THREADS) {
        qs[i / D][i % D] = __uint_as_float(static_cast<unsigned>(qg[i]) << 16);
    }
    if (threadIdx.x < MAX_ROWS) {
        row_m[threadIdx.x] = __int_as_float(0xff800000u);
        row_l[threadIdx.x] = 0.0f;
    }

    float2 acc[ACC];
#pragma unroll
    for (int j = 0; j < ACC; ++j) acc[j] = make_float2(0.0f, 0.0f);

    for (int t0 = t_begin; t0 < t_end; t0 += TILE) {
        __syncthreads();  // the previous tile's readers are done (and q and the rows are set)
#pragma unroll
        for (int j = 0; j < LOADS; ++j) {
            const int c = threadIdx.x + THREADS * j;
            const int tok = c / ROW_CHUNKS, w = 4 * (c % ROW_CHUNKS);
            ks[tok][w] = kn[j].x;
            ks[tok][w + 1] = kn[j].y;
            ks[tok][w + 2] = kn[j].z;
            ks[tok][w + 3] = kn[j].w;
            *reinterpret_cast<uint4*>(&vs[tok][w]) = vn[j];
        }
        __syncthreads();
        if (t0 + TILE < t_end) {  // the next tile's loads fly while this one is computed
            fetch_tile(kn, kh, t0 + TILE, t_end);
            fetch_tile(vn, vh, t0 + TILE, t_end);
        }

        // Scores, log2 units; -inf past the range and, for draft i, past position T + i.
        for (int e = threadIdx.x; e < rows * TILE; e += THREADS) {
            const int r = e / TILE, j = e % TILE, pos = t0 + j;
            float s = __int_as_float(0xff800000u);
            if (pos < t_end && pos <= T + r % draft) {
                const float2* qr = reinterpret_cast<const float2*>(qs[r]);
                float dot0 = 0.0f, dot1 = 0.0f;
#pragma unroll 16
                for (int d2 = 0; d2 < D / 2; ++d2) {
                    const unsigned w = ks[j][d2];
                    const float2 qq = qr[d2];
                    dot0 = fmaf(qq.x, lo_bf16(w), dot0);
                    dot1 = fmaf(qq.y, hi_bf16(w), dot1);
                }
                s = (dot0 + dot1) * scale_log2;
            }
            ps[r][j] = s;
        }
        __syncthreads();

        // Online softmax: a warp a row, a lane a token.
        for (int r = warp; r < rows; r += WARPS) {
            const float s = ps[r][lane];
            float mx = s;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) {
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            }
            const float m_old = row_m[r];
            const float m_new = fmaxf(m_old, mx);
            const bool none = m_new == __int_as_float(0xff800000u);  // no visible token yet
            const float p = none ? 0.0f : fast_exp2(s - m_new);
            const float alpha = none ? 1.0f : fast_exp2(m_old - m_new);
            float psum = p;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, off);
            ps[r][lane] = p;
            if (lane == 0) {
                row_m[r] = m_new;
                row_l[r] = row_l[r] * alpha + psum;
                row_alpha[r] = alpha;
            }
        }
        __syncthreads();

        // P V: thread e owns row e / 64, dims 2 (e % 64) and 2 (e % 64) + 1.
#pragma unroll
        for (int j = 0; j < ACC; ++j) {
            const int e = threadIdx.x + THREADS * j;
            const int r = e / (D / 2), d2 = e % (D / 2);
            if (r < rows) {
                const float alpha = row_alpha[r];
                float2 a = make_float2(acc[j].x * alpha, acc[j].y * alpha);
#pragma unroll 8
                for (int tok = 0; tok < TILE; ++tok) {
                    const float p = ps[r][tok];
                    const unsigned w = vs[tok][d2];
                    a.x = fmaf(p, lo_bf16(w), a.x);
                    a.y = fmaf(p, hi_bf16(w), a.y);
                }
                acc[j] = a;
            }
        }
    }

    // The last barrier of the loop ordered the row statistics before these reads.
    const size_t row0 = static_cast<size_t>(group) * rows;
    if (threadIdx.x < rows) {
        const size_t p = (row0 + threadIdx.x) * splits + split;
        part_m[p] = row_m[threadIdx.x];
        part_l[p] = row_l[threadIdx.x];
    }
#pragma unroll
    for (int j = 0; j < ACC; ++j) {
        const int e = threadIdx.x + THREADS * j;
        const int r = e / (D / 2), d2 = e % (D / 2);
        if (r < rows) {
            const size_t p = (row0 + r) * splits + split;
            reinterpret_cast<float2*>(part_acc + p * D)[d2] = acc[j];
        }
    }
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
