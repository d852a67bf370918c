// 04 split-KV: Flash-Decoding, the context split over many CTAs, then a log-sum-exp merge launch
//
// Idea against 03: 03 had B * Hkv = 8 CTAs for a 132-SM chip. Here the context is also cut into
// `splits` ranges of `tokens_per_split` tokens, and CTA (split, hk, b) runs 03's loop over its
// range only, so the grid is splits * Hkv * B CTAs. Each CTA merges its 16 half-warp states as
// before but stops short of normalising: it writes a partial state per query head, (m, l, acc):
// m the max score of its range (log2 units), l = sum 2^(s - m), acc = sum 2^(s - m) v (fp32, D
// values). A second, small launch (one CTA of D threads per query head) merges the splits with
// the same rule, M = max m_i, out = sum 2^(m_i - M) acc_i / sum 2^(m_i - M) l_i, and writes bf16.
// The launcher picks tokens_per_split so that the grid is about two CTAs per SM: at T = 32768,
// 32 splits of 1024 tokens = 256 CTAs, one wave at two resident CTAs per SM; at T = 1024, 16
// splits of 64 tokens = 128 CTAs.
//
// Expected bound (estimate), headline B = 1, 32 query / 8 KV heads, D = 128, T = 32768 on an
// H200: bytes = K + V read once = 134 MB (+ q and output), 31.5 us at the ~4.26 TB/s copy ceiling
// measured on this card. The partial states add 32 splits x 32 heads x 520 B = 0.53 MB written and
// read back, 0.8% of the bytes, plus the second launch on the critical path: its start (~2 us)
// and three rounds of L2 loads, each issued whole (the (m, l) pairs, then the accumulators 16
// splits at a time), ~1-2 us. The arithmetic per SM is ~115 k warp-instructions (2 CTAs x 128
// warp iterations x ~450, the loop of 03), about 19 us at ~3 instructions a clock: below the
// memory time, but not by much, so issue rate is the thing to watch. Expect ~36 us (85-90% of the
// floor) at 32K; at T = 1024 the 4 MB read takes ~1 us and the two launches' latency dominates:
// ~6 us, against ~17 us for 03.
//
// Size constraints: as 03 (D = 128, G = 4, T a multiple of 64); tokens_per_split a multiple of 64;
// splits = ceil(T / tokens_per_split) <= 256 (MAX_SPLITS), every split non-empty; the partial
// buffers hold B * Hq * splits states of D + 2 floats; values finite.

constexpr int D = 128;
constexpr int G = 4;                                   // query heads per KV head
constexpr int WARPS = 8;
constexpr int THREADS = WARPS * 32;
constexpr int LANES_PER_TOKEN = D / 8;                 // one 16-byte chunk a lane
constexpr int TOKENS_PER_LOAD = 32 / LANES_PER_TOKEN;  // rows one warp-wide load covers
constexpr int UNROLL = 4;                              // K (and V) loads in flight a lane
constexpr int WARP_TOKENS = TOKENS_PER_LOAD * UNROLL;  // tokens a warp takes per iteration
constexpr int CTA_TOKENS = WARPS * WARP_TOKENS;        // T and tokens_per_split multiples of this
constexpr int STATES = WARPS * TOKENS_PER_LOAD;        // independent softmax states per CTA

static_assert(D == 128 && LANES_PER_TOKEN == 16,
              "a half-warp holds one 256-byte row; the xor shuffles 8, 4, 2, 1 stay inside it");
static_assert(G * D % THREADS == 0, "the CTA merge gives every thread the same number of outputs");
static_assert(CTA_TOKENS == 64, "the launcher checks T % 64 == 0 and tokens_per_split % 64 == 0");
static_assert(STATES * G * D * 4 <= 40 * 1024, "the merge scratch stays under the 48 KB static limit");
constexpr int MAX_SPLITS = 256;                        // the launcher keeps splits <= this
constexpr int MERGE_WARPS = D / 32;
static_assert(MAX_SPLITS % D == 0, "each merge thread holds MAX_SPLITS / D (m, l) pairs");

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

// 8 bf16 values (one 16-byte chunk, first value in the low half of .x) widened to fp32.
__device__ __forceinline__ void widen(const uint4& w, float (&f)[8]) {
    const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = __uint_as_float(words[i] << 16);
        f[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
}

// Grid (splits, Hkv, B). Partial state p = (b * Hq + query head) * splits + split.
extern "C" __global__ void __launch_bounds__(THREADS, 2)
split_kv(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
         const unsigned short* __restrict__ v, float* __restrict__ part_m,
         float* __restrict__ part_l, float* __restrict__ part_acc, int T, int tokens_per_split,
         float scale_log2) {
    __shared__ float red_m[STATES][G];
    __shared__ float red_l[STATES][G];
    __shared__ __align__(16) float red_acc[STATES][G][D];

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int half = lane / LANES_PER_TOKEN, c = lane % LANES_PER_TOKEN;
    const int split = blockIdx.x, splits = gridDim.x;
    const int hk = blockIdx.y, kv_heads = gridDim.y, b = blockIdx.z;
    const int q_row = b * kv_heads * G + hk * G;  // first of the G query heads of this KV head
    const int t_begin = split * tokens_per_split;
    const int t_end = min(T, t_begin + tokens_per_split);
    const unsigned short* kh = k + static_cast<size_t>(b * kv_heads + hk) * T * D + c * 8;
    const unsigned short* vh = v + static_cast<size_t>(b * kv_heads + hk) * T * D + c * 8;

    float qf[G][8];
#pragma unroll
    for (int h = 0; h < G; ++h) {
        widen(*reinterpret_cast<const uint4*>(q + (q_row + h) * D + c * 8), qf[h]);
#pragma unroll
        for (int j = 0; j < 8; ++j) qf[h][j] *= scale_log2;
    }

    // Softmax state: a lane tracks m and l of one head, own_head = c % 4 (the same in every lane
    // of its half that shares c % 4); the accumulators cover all G heads for the lane's chunk.
    float m = __int_as_float(0xff800000u), l = 0.0f, acc[G][8];
#pragma unroll
    for (int h = 0; h < G; ++h) {
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[h][j] = 0.0f;
    }
    const int half_base = half * LANES_PER_TOKEN;  // lane 0 of this half-warp

    for (int t = t_begin + warp * WARP_TOKENS; t < t_end; t += CTA_TOKENS) {
        uint4 kr[UNROLL], vr[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const size_t row = static_cast<size_t>(t + u * TOKENS_PER_LOAD + half) * D;
            kr[u] = __ldg(reinterpret_cast<const uint4*>(kh + row));
            vr[u] = __ldg(reinterpret_cast<const uint4*>(vh + row));
        }
        float s[UNROLL * G];  // partial dot products over this lane's 8 dims, index u * G + h
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            float kf[8];
            widen(kr[u], kf);
#pragma unroll
            for (int h = 0; h < G; ++h) {
                float dot = 0.0f;
#pragma unroll
                for (int j = 0; j < 8; ++j) dot = fmaf(qf[h][j], kf[j], dot);
                s[u * G + h] = dot;
            }
        }
        // Transposing reduction over the half-warp: at each xor step a lane keeps half of its
        // values and sends the other half, so 16 sums take 8 + 4 + 2 + 1 = 15 shuffles, not 64.
        // Lane c ends with the whole score of token u = c / 4 for head c % 4.
        float r8[8], r4[4], r2[2];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const bool hi = c & 8;
            r8[i] = (hi ? s[i + 8] : s[i]) + __shfl_xor_sync(0xffffffffu, hi ? s[i] : s[i + 8], 8);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const bool hi = c & 4;
            r4[i] = (hi ? r8[i + 4] : r8[i]) + __shfl_xor_sync(0xffffffffu, hi ? r8[i] : r8[i + 4], 4);
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const bool hi = c & 2;
            r2[i] = (hi ? r4[i + 2] : r4[i]) + __shfl_xor_sync(0xffffffffu, hi ? r4[i] : r4[i + 2], 2);
        }
        const bool odd = c & 1;
        const float score = (odd ? r2[1] : r2[0]) + __shfl_xor_sync(0xffffffffu, odd ? r2[0] : r2[1], 1);

        // Online softmax of head c % 4 over its 4 new tokens (lanes c, c ^ 4, c ^ 8, c ^ 12).
        float mx = fmaxf(score, __shfl_xor_sync(0xffffffffu, score, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
        const float m_new = fmaxf(m, mx);
        const float alpha = fast_exp2(m - m_new);  // 0 on the first iteration (m = -inf)
        const float p = fast_exp2(score - m_new);
        float psum = p + __shfl_xor_sync(0xffffffffu, p, 4);
        psum += __shfl_xor_sync(0xffffffffu, psum, 8);
        l = l * alpha + psum;
        m = m_new;

        // P V: every lane needs the 4 heads' alphas and all 16 probabilities of its half.
#pragma unroll
        for (int h = 0; h < G; ++h) {
            const float a = __shfl_sync(0xffffffffu, alpha, half_base + h);
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[h][j] *= a;
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            float vf[8];
            widen(vr[u], vf);
#pragma unroll
            for (int h = 0; h < G; ++h) {
                const float pu = __shfl_sync(0xffffffffu, p, half_base + u * G + h);
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[h][j] = fmaf(pu, vf[j], acc[h][j]);
            }
        }
    }

    // Merge the CTA's 16 half-warp states; keep the result unnormalised for the second launch.
    const int state = warp * TOKENS_PER_LOAD + half;
    if (c < G) {  // lane c holds head c's state (c % 4 == c)
        red_m[state][c] = m;
        red_l[state][c] = l;
    }
#pragma unroll
    for (int h = 0; h < G; ++h) {
        float4* dst = reinterpret_cast<float4*>(&red_acc[state][h][c * 8]);
        dst[0] = make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
        dst[1] = make_float4(acc[h][4], acc[h][5], acc[h][6], acc[h][7]);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * D; i += THREADS) {
        const int h = i / D, d = i % D;
        float big = red_m[0][h];
#pragma unroll
        for (int st = 1; st < STATES; ++st) big = fmaxf(big, red_m[st][h]);
        float sum = 0.0f, val = 0.0f;
#pragma unroll
        for (int st = 0; st < STATES; ++st) {
            const float w = fast_exp2(red_m[st][h] - big);
            sum = fmaf(w, red_l[st][h], sum);
            val = fmaf(w, red_acc[st][h][d], val);
        }
        const size_t p = static_cast<size_t>(q_row + h) * splits + split;
        if (d == 0) {
            part_m[p] = big;
            part_l[p] = sum;
        }
        part_acc[p * D + d] = val;
    }
}

// Grid (Hq, B), one thread per output dimension: the splits of one query head merged. Every load
// of a round is issued before any is used (the partials were just written, so they come from the
// L2): the (m, l) pairs one per thread, then the weights 2^(m_i - M) / L through shared memory,
// then the accumulators 16 splits at a time.
extern "C" __global__ void __launch_bounds__(D)
split_kv_merge(const float* __restrict__ part_m, const float* __restrict__ part_l,
               const float* __restrict__ part_acc, unsigned short* __restrict__ out, int splits) {
    __shared__ float weight[MAX_SPLITS];
    __shared__ float scratch[MERGE_WARPS];
    const int row = blockIdx.y * gridDim.x + blockIdx.x;  // b * Hq + query head
    const int d = threadIdx.x, lane = d % 32, warp = d / 32;
    const float* pm = part_m + static_cast<size_t>(row) * splits;
    const float* pl = part_l + static_cast<size_t>(row) * splits;
    const float* pa = part_acc + static_cast<size_t>(row) * splits * D + d;

    float mine_m[MAX_SPLITS / D], mine_l[MAX_SPLITS / D];
    float big = __int_as_float(0xff800000u);
#pragma unroll
    for (int r = 0; r < MAX_SPLITS / D; ++r) {
        const int i = d + r * D;
        mine_m[r] = i < splits ? pm[i] : __int_as_float(0xff800000u);
        mine_l[r] = i < splits ? pl[i] : 0.0f;
        big = fmaxf(big, mine_m[r]);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) big = fmaxf(big, __shfl_xor_sync(0xffffffffu, big, off));
    if (lane == 0) scratch[warp] = big;
    __syncthreads();
    big = scratch[0];
#pragma unroll
    for (int w = 1; w < MERGE_WARPS; ++w) big = fmaxf(big, scratch[w]);
    float sum = 0.0f;
#pragma unroll
    for (int r = 0; r < MAX_SPLITS / D; ++r) {
        mine_m[r] = fast_exp2(mine_m[r] - big);  // 0 for the padding (m = -inf)
        sum = fmaf(mine_m[r], mine_l[r], sum);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    __syncthreads();  // every thread has read the maxima
    if (lane == 0) scratch[warp] = sum;
    __syncthreads();
    sum = scratch[0];
#pragma unroll
    for (int w = 1; w < MERGE_WARPS; ++w) sum += scratch[w];
    const float inv = 1.0f / sum;
#pragma unroll
    for (int r = 0; r < MAX_SPLITS / D; ++r) {
        if (d + r * D < splits) weight[d + r * D] = mine_m[r] * inv;
    }
    __syncthreads();
    float val = 0.0f;
#pragma unroll 16
    for (int i = 0; i < splits; ++i) val = fmaf(weight[i], pa[static_cast<size_t>(i) * D], val);
    out[static_cast<size_t>(row) * D + d] = to_bf16(val);
}
