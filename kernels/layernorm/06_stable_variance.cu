// 06 stable variance: the mean first, then the mean of (x - mean)^2, both over registers
//
// Idea against 05: one line of arithmetic and one reduction. E[x^2] - E[x]^2 subtracts two numbers
// of size mean^2 to get one of size var. In fp32 each carries a relative error of a few 1e-8 after
// a 4096-term sum, so at mean 1000, var 1 the absolute error is a few 1e-8 * 1e6 = a few 1e-2,
// several percent of the variance, and it grows as mean^2 until the variance comes out zero or
// negative. Here the mean is reduced first, then each thread sums (x - mean)^2 from the registers
// it already holds: the subtraction happens before the squaring, on numbers of the row's own
// spread, and what error is left comes from rounding the mean itself. The row is still read once
// from DRAM; the fix costs one more block reduction (a barrier and ten shuffles), not a memory
// pass. Before 05 this two-pass form was what 01-04 did, paying a second read of the row for it;
// once the row sits in registers the second pass is free, so there is no reason to keep the
// shortcut. (Welford's update would also be stable, at a divide per element; two passes over
// registers are simpler and cheaper.)
//
// Expected bound: 32768 x 4096 fp32 moves 1.07 GB by the work model, about 0.25 ms at the about
// 4.26 TB/s copy ceiling measured on this card (a lead). Same traffic as 05; one more barrier per
// row, which the other resident blocks hide, and 51 registers a thread to 05's 44, so 4 blocks of
// 256 share an SM instead of 5 (64 KiB of loads in flight, still enough). Expect 05's time within a
// few percent: about 0.28 ms, 90% of copy. What this version is for is the error at mean 1000:
// about 3e-2 for 05 against about 3e-5 here, estimated from a float32 simulation of the same
// reduction order.
//
// Size constraints: as 05: cols a multiple of 512 and 512 <= cols <= 16384; 16-byte aligned
// tensors.

constexpr int kVecPerThread = 4;
static_assert(kVecPerThread * 4 <= 32, "32 floats a thread at most: a 1024-thread block leaves each "
                                       "thread 64 registers, and the row must fit without spilling");

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float block_sum(float v, float* partials) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) partials[warp] = v;
    __syncthreads();
    return warp_sum(lane < (blockDim.x >> 5) ? partials[lane] : 0.0f);
}

// grid = rows, block = cols / (4 * kVecPerThread).
extern "C" __global__ void __launch_bounds__(1024)
stable_variance(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                   float* __restrict__ y, int rows, int cols, float eps) {
    __shared__ float mean_partials[32];
    __shared__ float var_partials[32];
    const size_t base = static_cast<size_t>(blockIdx.x) * cols;
    const float4* xr = reinterpret_cast<const float4*>(x + base);
    float4* yr = reinterpret_cast<float4*>(y + base);
    const float4* g4 = reinterpret_cast<const float4*>(gamma);
    const float4* b4 = reinterpret_cast<const float4*>(beta);
    const int stride = blockDim.x;

    float4 v[kVecPerThread];
#pragma unroll
    for (int k = 0; k < kVecPerThread; ++k) v[k] = xr[k * stride + threadIdx.x];

    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kVecPerThread; ++k) sum += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    const float mean = block_sum(sum, mean_partials) / cols;

    float sq = 0.0f;
#pragma unroll
    for (int k = 0; k < kVecPerThread; ++k) {
        v[k].x -= mean;
        v[k].y -= mean;
        v[k].z -= mean;
        v[k].w -= mean;
        sq += (v[k].x * v[k].x + v[k].y * v[k].y) + (v[k].z * v[k].z + v[k].w * v[k].w);
    }
    const float rstd = rsqrtf(block_sum(sq, var_partials) / cols + eps);

#pragma unroll
    for (int k = 0; k < kVecPerThread; ++k) {
        const int j = k * stride + threadIdx.x;
        const float4 g = g4[j];
        const float4 b = b4[j];
        yr[j] = make_float4(v[k].x * rstd * g.x + b.x, v[k].y * rstd * g.y + b.y, v[k].z * rstd * g.z + b.z,
                            v[k].w * rstd * g.w + b.w);
    }
}
