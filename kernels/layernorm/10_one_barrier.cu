// 10 LayerNorm, one CTA a row, one barrier: the variance combined across warps, full occupancy
//
// Idea against 09: 09 (the row in registers, 256 threads of 4 float4, 56 registers) runs
// 4 CTAs, 1024 threads, an SM and reduces twice: the mean, then the mean of (x - mean)^2, each a
// warp butterfly, a shared-memory exchange and a __syncthreads, so a CTA passes two barriers with
// no load in flight. torch.compile's generated kernel for this op (kernels/inductor/artifacts/
// layernorm_f32: one program a row, 16 warps, 32 registers, 4 floats a thread a step) runs 2048
// threads an SM and one block-wide combine. This version takes both:
//   - one barrier: each warp computes its own mean and sum of squared deviations from it over
//     its registers (two warp butterflies, an exact two-pass within the warp); the warps'
//     (mean, M2) pairs meet in shared memory once, and every warp combines them with Chan's
//     formula for equal counts n: mean = sum(mean_w) / W, M2 = sum(M2_w) + n sum((mean_w -
//     mean)^2). The deviations stay small at any mean, so the large-mean shape stays accurate;
//   - VPT float4 a thread, and a 32-register cap (__launch_bounds__(1024, 2)) where VPT <= 2
//     fits in it: at 4096 columns v2 runs 512 threads a row and 4 CTAs, 2048 threads, an SM.
// Loads and stores are plain (09's cache hints lost); gamma and beta are read after the
// combine, from the L2.
//
// Expected bound: 32768 x 4096 fp32 moves 1.07 GB by the work model, about 0.25 ms at the about
// 4.26 TB/s copy ceiling measured on this card (estimate). Little's law with a loaded HBM
// latency near 0.7 us asks about 23 KB of reads in flight an SM (estimate: 4.26 TB/s / 132 x 0.7
// us); v2 holds up to 2048 x 32 B = 64 KB, as 09's v4 did, but in CTAs half as long between
// their first load and their exit, with one barrier instead of two. Estimate: 0.250-0.253 ms,
// 99-100% of copy, level with torch.compile; v4 (256 threads, one barrier, 09's occupancy)
// between 09 and v2.
//
// Size constraints: cols a multiple of 4 * VPT * 32 giving at most 1024 threads (the suite
// doubles VPT from the measured variant's until the block fits); 16-byte aligned tensors;
// rows < 2^31; every warp of a CTA holds the same number of values (Chan's formula above
// assumes equal counts).
//
// Resources (nvcc 13.0, -arch=sm_90, no spills): one_barrier_v1 24 registers, v2 32, v4 63,
// v8 64; 256 bytes of static shared memory each.
//
// Measured variant: v2 (the entry the suite times; the others are built for comparison)

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// grid = rows, block = cols / (4 * VPT); CTA b normalises row b.
template <int VPT>
__device__ __forceinline__ void layernorm_row(const float* __restrict__ x, const float* __restrict__ gamma,
                                              const float* __restrict__ beta, float* __restrict__ y, int cols,
                                              float eps) {
    static_assert(VPT >= 1 && VPT <= 8, "1 to 8 float4 a thread: 32 floats of the row at most in registers");
    __shared__ float2 partials[32];  // (mean, M2) of each warp
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    const size_t base = static_cast<size_t>(blockIdx.x) * cols;
    const float4* x4 = reinterpret_cast<const float4*>(x + base);
    const int stride = blockDim.x;

    float4 v[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) v[k] = x4[k * stride + threadIdx.x];

    // The warp's own two-pass: its mean, then the sum of squares about that mean.
    constexpr float per_warp = 32.0f * 4.0f * VPT;
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    const float warp_mean = warp_sum(s) * (1.0f / per_warp);
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const float a = v[k].x - warp_mean, b = v[k].y - warp_mean;
        const float c = v[k].z - warp_mean, d = v[k].w - warp_mean;
        q += (a * a + b * b) + (c * c + d * d);
    }
    const float warp_m2 = warp_sum(q);
    if (lane == 0) partials[warp] = make_float2(warp_mean, warp_m2);
    __syncthreads();

    // Chan's combine for equal counts, in every warp: no second barrier.
    const float2 p = lane < warps ? partials[lane] : make_float2(0.0f, 0.0f);
    const float mean = warp_sum(p.x) / warps;
    const float dm = p.x - mean;
    const float m2 = warp_sum(lane < warps ? p.y + per_warp * dm * dm : 0.0f);
    const float rstd = rsqrtf(m2 / cols + eps);

    const float4* g4 = reinterpret_cast<const float4*>(gamma);
    const float4* b4 = reinterpret_cast<const float4*>(beta);
    float4* y4 = reinterpret_cast<float4*>(y + base);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int j = k * stride + threadIdx.x;
        const float4 g = __ldg(g4 + j);
        const float4 b = __ldg(b4 + j);
        y4[j] = make_float4((v[k].x - mean) * rstd * g.x + b.x, (v[k].y - mean) * rstd * g.y + b.y,
                            (v[k].z - mean) * rstd * g.z + b.z, (v[k].w - mean) * rstd * g.w + b.w);
    }
}

// one_barrier_v<VPT>: VPT float4 a thread; v1 and v2 capped at 32 registers (2 CTAs of 1024
// threads, 4 of 512), v4 and v8 uncapped (16 and 32 floats a thread do not fit in 32).
extern "C" __global__ void __launch_bounds__(1024, 2)
one_barrier_v1(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
               float* __restrict__ y, int rows, int cols, float eps) {
    layernorm_row<1>(x, gamma, beta, y, cols, eps);
}
extern "C" __global__ void __launch_bounds__(1024, 2)
one_barrier_v2(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
               float* __restrict__ y, int rows, int cols, float eps) {
    layernorm_row<2>(x, gamma, beta, y, cols, eps);
}
extern "C" __global__ void __launch_bounds__(1024, 1)
one_barrier_v4(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
               float* __restrict__ y, int rows, int cols, float eps) {
    layernorm_row<4>(x, gamma, beta, y, cols, eps);
}
extern "C" __global__ void __launch_bounds__(1024, 1)
one_barrier_v8(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
               float* __restrict__ y, int rows, int cols, float eps) {
    layernorm_row<8>(x, gamma, beta, y, cols, eps);
}
