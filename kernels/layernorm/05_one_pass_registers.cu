// 05 one pass: the row read once into registers, sum(x) and sum(x^2) reduced together
//
// Idea against 04: nothing is read twice. Each thread loads its VPT = 4 float4 of the row into
// registers up front (all four loads in flight at once), and the block is sized to the row, cols /
// 16 threads, so the registers hold the whole row. The statistics come out of that one pass: each
// thread forms sum(x) and sum(x^2), one reduction combines the pair (one barrier instead of two),
// and var = E[x^2] - E[x]^2. The output is computed from the same registers. That variance formula
// is the textbook shortcut, and it is exactly what a reviewer should stop here: in fp32 it cancels
// catastrophically when the mean is large against the spread (06).
//
// Expected bound: 32768 x 4096 fp32 moves 1.07 GB by the work model, about 0.25 ms at the about
// 4.26 TB/s copy ceiling measured on this card (a lead). DRAM and L2 now see only the work model's
// bytes, plus gamma and beta (32 KiB a row, from L1 or L2). A block of 256 threads has 16 KiB of
// loads in flight as soon as it starts, and about 5 blocks share an SM (44 registers a thread), 80
// KiB, far above the roughly 25 KiB per SM that Little's law asks (4.26 TB/s * ~0.8 us / 132 SMs).
// Expect about 0.28 ms, 90% of copy.
//
// Size constraints: cols a multiple of 512 (the block, cols / 16 threads, must be whole warps) and
// 512 <= cols <= 16384 (at most 1024 threads); x, y, gamma, beta 16-byte aligned; rows < 2^31.

constexpr int kVecPerThread = 4;
static_assert(kVecPerThread * 4 <= 32, "32 floats a thread at most: a 1024-thread block leaves each "
                                       "thread 64 registers, and the row must fit without spilling");

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Both sums in one reduction: one barrier for the pair.
__device__ __forceinline__ float2 block_sum2(float2 v, float* partials_a, float* partials_b) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v.x = warp_sum(v.x);
    v.y = warp_sum(v.y);
    if (lane == 0) {
        partials_a[warp] = v.x;
        partials_b[warp] = v.y;
    }
    __syncthreads();
    const bool live = lane < (blockDim.x >> 5);
    return make_float2(warp_sum(live ? partials_a[lane] : 0.0f), warp_sum(live ? partials_b[lane] : 0.0f));
}

// grid = rows, block = cols / (4 * kVecPerThread).
extern "C" __global__ void __launch_bounds__(1024)
one_pass_registers(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                   float* __restrict__ y, int rows, int cols, float eps) {
    __shared__ float sum_partials[32];
    __shared__ float sq_partials[32];
    const size_t base = static_cast<size_t>(blockIdx.x) * cols;
    const float4* xr = reinterpret_cast<const float4*>(x + base);
    float4* yr = reinterpret_cast<float4*>(y + base);
    const float4* g4 = reinterpret_cast<const float4*>(gamma);
    const float4* b4 = reinterpret_cast<const float4*>(beta);
    const int stride = blockDim.x;

    float4 v[kVecPerThread];
#pragma unroll
    for (int k = 0; k < kVecPerThread; ++k) v[k] = xr[k * stride + threadIdx.x];

    float2 s = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int k = 0; k < kVecPerThread; ++k) {
        s.x += (v[k].x + v[k].y) + (v[k].z + v[k].w);
        s.y += (v[k].x * v[k].x + v[k].y * v[k].y) + (v[k].z * v[k].z + v[k].w * v[k].w);
    }
    s = block_sum2(s, sum_partials, sq_partials);
    const float mean = s.x / cols;
    const float var = fmaxf(s.y / cols - mean * mean, 0.0f);  // the clamp hides a NaN, not the error
    const float rstd = rsqrtf(var + eps);

#pragma unroll
    for (int k = 0; k < kVecPerThread; ++k) {
        const int j = k * stride + threadIdx.x;
        const float4 g = g4[j];
        const float4 b = b4[j];
        yr[j] = make_float4((v[k].x - mean) * rstd * g.x + b.x, (v[k].y - mean) * rstd * g.y + b.y,
                            (v[k].z - mean) * rstd * g.z + b.z, (v[k].w - mean) * rstd * g.w + b.w);
    }
}
