// 03 warp-shuffle reductions: sums combined in registers, one barrier per reduction
//
// Idea against 02: only the reductions change. A warp sums its 32 values with five __shfl_xor_sync
// butterfly steps (registers to registers, no shared memory, no barrier), lane 0 of each of the 8
// warps writes one partial, one barrier, and every warp then adds the 8 partials with the same
// butterfly. Each reduction goes from 10 barriers and 8 shared-memory round trips to 1 barrier, and
// each owns its 32-float scratch array, so no barrier is needed to reuse it.
//
// Expected bound: 32768 x 4096 fp32 moves 1.07 GB by the work model, about 0.25 ms at the about
// 4.26 TB/s copy ceiling measured on this card (a lead). The memory traffic is 02's exactly, and 02
// was waiting on memory far more than on its barriers: the other resident blocks (about 8 an SM)
// keep loading while one block reduces. So this is the change a reviewer asks for first and the
// clock barely notices. Expect about 0.38 ms, 65% of copy, within 10% of 02.
//
// Size constraints: any cols >= 1 and rows < 2^31 (one block a row); block size below.

constexpr int kThreads = 256;
static_assert(kThreads % 32 == 0, "the butterfly combines whole warps");
static_assert(kThreads / 32 <= 32, "one warp finishes the reduction, so at most 32 warp partials");

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
    return warp_sum(lane < kThreads / 32 ? partials[lane] : 0.0f);
}

// grid = rows, block = kThreads.
extern "C" __global__ void __launch_bounds__(kThreads)
warp_shuffle(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                       float* __restrict__ y, int rows, int cols, float eps) {
    __shared__ float mean_partials[32];
    __shared__ float var_partials[32];
    const size_t base = static_cast<size_t>(blockIdx.x) * cols;
    const float* xr = x + base;
    float* yr = y + base;

    float sum = 0.0f;
    for (int j = threadIdx.x; j < cols; j += kThreads) sum += xr[j];
    const float mean = block_sum(sum, mean_partials) / cols;

    float sq = 0.0f;
    for (int j = threadIdx.x; j < cols; j += kThreads) {
        const float d = xr[j] - mean;
        sq += d * d;
    }
    const float rstd = rsqrtf(block_sum(sq, var_partials) / cols + eps);

    for (int j = threadIdx.x; j < cols; j += kThreads) yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
}
