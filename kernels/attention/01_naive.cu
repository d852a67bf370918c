// 01 naive: the formula as written, S = Q K^T stored in device memory, softmax, then P V
//
// Idea: attention as three separate steps, one kernel each, fp32 arithmetic on the CUDA cores.
// naive_scores: one thread per (query i, key j) computes S[i][j] = q_i . k_j / sqrt(D) straight
// from device memory (bf16 widened to fp32) into an fp32 scratch matrix of B * H * S * S values;
// naive_softmax: one warp per row reads that row three times (max, sum, scale) and overwrites it
// with P; naive_pv: one thread per (row i, dimension d) walks row i of P and column d of V.
//
// Expected bound (estimate), at its headline B = 1, H = 16, S = 2048, D = 128 on an H200 (it runs
// at small shapes only: the scratch is B*H*S^2*4 bytes, 268 MB here but 8.6 GB at 02's headline).
// Two things make it slow, and both can be counted:
// - bytes: S goes to device memory and back. Written once (268 MB), read and written by the
//   softmax (537 MB: its three reads of an 8 KB row mostly hit in cache), read by the PV kernel
//   (268 MB): 1.07 GB, against 34 MB for Q, K, V and O themselves, 32x the minimum; at the ~4.26
//   TB/s copy ceiling measured on this card that alone is 0.25 ms;
// - arithmetic: 4*B*H*S^2*D = 34 GFLOP in fp32 FMAs fed by loads, no data reuse in registers. The
//   score kernel's K loads hit 32 different rows a warp instruction (32 L1 wavefronts each):
//   ~1.1 G wavefronts over 132 SMs, ~4 ms; the PV kernel issues 2 loads per FMA, ~1.3 ms.
// Expect ~5-6 ms against a 0.04 ms floor (34 GFLOP at ~800 TFLOP/s bf16): ~1% of the roofline,
// 2-3% of SDPA's speed.
//
// Size constraints: D = 128 exactly; S a multiple of 32 (the score kernel's 32x8 thread tiles and
// the softmax's 8 rows a CTA); Q, K, V, O contiguous [B, H, S, D] bf16 carried as 16-bit words;
// the fp32 scratch [B, H, S, S] allocated by the launcher; B*H*S*S < 2^31.

constexpr int D = 128;
constexpr int TILE_J = 32;  // keys per score CTA (threadIdx.x)
constexpr int TILE_I = 8;   // queries per score CTA (threadIdx.y)
constexpr int SOFTMAX_ROWS = 8;  // rows per softmax CTA, one warp each

static_assert(D % 8 == 0, "rows are read as 16-byte chunks of 8 bf16 values");
static_assert(D <= 1024, "the PV kernel runs one thread per output dimension");
static_assert(TILE_J == 32, "one warp spans the 32 keys of a score tile");

__device__ __forceinline__ void widen(const uint4& w, float (&f)[8]) {
    const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = __uint_as_float(words[i] << 16);
        f[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
}

__device__ __forceinline__ unsigned short to_bf16(float x) {
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
    return r;
}

// Grid (S / 32, S / 8, B * H), block (32, 8).
extern "C" __global__ void __launch_bounds__(TILE_J * TILE_I)
naive_scores(const unsigned short* __restrict__ Q, const unsigned short* __restrict__ K,
             float* __restrict__ scores, int S, float scale) {
    const int j = blockIdx.x * TILE_J + threadIdx.x;
    const int i = blockIdx.y * TILE_I + threadIdx.y;
    const size_t head = blockIdx.z;
    const uint4* q = reinterpret_cast<const uint4*>(Q + (head * S + i) * D);
    const uint4* k = reinterpret_cast<const uint4*>(K + (head * S + j) * D);
    float dot = 0.0f;
    for (int c = 0; c < D / 8; ++c) {
        float qf[8], kf[8];
        widen(q[c], qf);
        widen(k[c], kf);
#pragma unroll
        for (int e = 0; e < 8; ++e) dot = fmaf(qf[e], kf[e], dot);
    }
    scores[(head * S + i) * S + j] = dot * scale;
}

// Grid (B * H * S / 8), block 256: warp w of CTA r owns row 8 r + w of S, in place.
extern "C" __global__ void __launch_bounds__(32 * SOFTMAX_ROWS)
naive_softmax(float* __restrict__ scores, int S) {
    const int lane = threadIdx.x % 32;
    const size_t row = static_cast<size_t>(blockIdx.x) * SOFTMAX_ROWS + threadIdx.x / 32;
    float* p = scores + row * S;
    float mx = p[lane];
    for (int j = lane + 32; j < S; j += 32) mx = fmaxf(mx, p[j]);
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    float sum = 0.0f;
    for (int j = lane; j < S; j += 32) sum += expf(p[j] - mx);
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const float inv = 1.0f / sum;
    for (int j = lane; j < S; j += 32) p[j] = expf(p[j] - mx) * inv;
}

// Grid (S, B * H), block D: thread d of CTA (i, head) writes O[head][i][d].
extern "C" __global__ void __launch_bounds__(D)
naive_pv(const float* __restrict__ probs, const unsigned short* __restrict__ V,
         unsigned short* __restrict__ O, int S) {
    const int i = blockIdx.x, d = threadIdx.x;
    const size_t head = blockIdx.y;
    const float* p = probs + (head * S + i) * S;
    const unsigned short* v = V + head * S * D + d;
    float acc = 0.0f;
    for (int j = 0; j < S; ++j) acc = fmaf(p[j], __uint_as_float(static_cast<unsigned>(v[j * D]) << 16), acc);
    O[(head * S + i) * D + d] = to_bf16(acc);
}
