// 03 decode: one query token against the KV cache, one CTA per KV head serving its 4 query heads
//
// Idea against 02: at decode time each sequence brings one new query token per head, so there is
// no Q tile to reuse K and V against: every K and V byte is used for a handful of multiply-adds
// and the bound moves from the tensor cores to memory. What can still be shared is the KV head of
// grouped-query attention: the G = 4 query heads that read the same K and V rows do so together
// in one CTA, so the cache is read from DRAM exactly once. Inside the CTA, a token row of 128
// bf16 values is 16 chunks of 16 bytes: each half-warp owns one token at a time, lane c holds chunk
// c, so a warp-wide load moves two whole rows (512 contiguous bytes). Each lane keeps the 4 query
// heads' 8 values of its chunk in fp32 (pre-multiplied by log2(e)/sqrt(D)) and issues 4 K and 4
// V loads before using any. The 4 tokens x 4 heads partial dot products are summed over the
// half-warp by a transposing xor reduction: at each step a lane keeps half of its values and sends
// the other half, so the 16 sums take 8 + 4 + 2 + 1 = 15 shuffles (not 4 x 16 = 64), and lane c
// ends with the whole score of token c / 4 for head c % 4. Lane c then runs the online softmax
// (log2 domain) of head c % 4: max and sum over its 4 tokens by two more xor shuffles each, one
// exp2 for the probability and one for the rescale factor. The probabilities and factors go back
// to every lane of the half by shuffles for the P V update of its 4 x 8 fp32 accumulators. At the
// end the CTA's 16 half-warp states meet in shared memory and are merged with the log-sum-exp rule
// into the normalised output.
//
// Expected bound (estimate), headline B = 1, 32 query / 8 KV heads, D = 128, context T = 32768 on
// an H200: bytes = K + V read once = 2 * 8 * 32768 * 128 * 2 = 134 MB (+ 16 KB of q and output),
// 31.5 us at the ~4.26 TB/s copy ceiling measured on this card. FLOPs 4 * 32 * T * D = 0.54 GFLOP,
// 4 FLOP per byte: memory-bound by far. But this version launches B * 8 = 8 CTAs: 8 of 132 SMs do
// all the work. Per SM, each warp iteration (8 tokens, 4 KB of K and V) costs ~450 instructions a
// lane (256 FMAs, 64 widenings, 41 shuffles, 45 adds and selects of the reduction, 32 rescales, a
// dozen for the softmax), so an SM needs ~1.8 M warp-instructions for its 32768 tokens, ~0.45 ms
// at ~2 instructions a clock with 8 warps: issue-bound on 8 SMs, ~7% of the floor (T = 1024:
// ~17 us against a 1 us floor).
//
// Size constraints: D = 128 and G = Hq / Hkv = 4 exactly (compile-time); T a multiple of 64 (the
// CTA's token step: 8 warps x 8 tokens, no masking); q [B, Hq, D], K and V [B, Hkv, T, D], out
// [B, Hq, D], bf16 carried as 16-bit words; B * Hkv * T * D < 2^31 not required (64-bit row
// offsets); values finite.

constexpr int D = 128;
constexpr int G = 4;                                   // query heads per KV head
constexpr int WARPS = 8;
constexpr int THREADS = WARPS * 32;
constexpr int LANES_PER_TOKEN = D / 8;                 // one 16-byte chunk a lane
constexpr int TOKENS_PER_LOAD = 32 / LANES_PER_TOKEN;  // rows one warp-wide load covers
constexpr int UNROLL = 4;                              // K (and V) loads in flight a lane
constexpr int WARP_TOKENS = TOKENS_PER_LOAD * UNROLL;  // tokens a warp takes per iteration
constexpr int CTA_TOKENS = WARPS * WARP_TOKENS;        // T must be a multiple of this
constexpr int STATES = WARPS * TOKENS_PER_LOAD;        // independent softmax states per CTA

static_assert(D == 128 && LANES_PER_TOKEN == 16,
              "a half-warp holds one 256-byte row; the xor shuffles 8, 4, 2, 1 stay inside it");
static_assert(G * D % THREADS == 0, "the final merge gives every thread the same number of outputs");
static_assert(CTA_TOKENS == 64, "the launcher checks T % 64 == 0");
static_assert(STATES * G * D * 4 <= 40 * 1024, "the merge scratch stays under the 48 KB static limit");

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

extern "C" __global__ void __launch_bounds__(THREADS, 2)
decode(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
       const unsigned short* __restrict__ v, unsigned short* __restrict__ out, int T,
       float scale_log2) {
    __shared__ float red_m[STATES][G];
    __shared__ float red_l[STATES][G];
    __shared__ __align__(16) float red_acc[STATES][G][D];

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int half = lane / LANES_PER_TOKEN, c = lane % LANES_PER_TOKEN;
    const int hk = blockIdx.x, b = blockIdx.y, kv_heads = gridDim.x;
    const int q_row = b * kv_heads * G + hk * G;  // first of the G query heads of this KV head
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

    for (int t = warp * WARP_TOKENS; t < T; t += CTA_TOKENS) {
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

    // The 16 half-warp states of the CTA, merged: M = max m_i, L = sum 2^(m_i - M) l_i, and the
    // same weights on the accumulators.
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
        out[(q_row + h) * D + d] = to_bf16(val / sum);
    }
}
