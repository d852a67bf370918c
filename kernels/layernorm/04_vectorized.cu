// 04 16-byte loads and stores: four floats an instruction in all three loops
//
// Idea against 03: every access to x, y, gamma and beta moves a float4. A warp's load now covers
// 512 contiguous bytes in one instruction instead of 128, so each loop issues a quarter of the
// load, store and address instructions, and the same few loads a thread keeps in flight carry four
// times the bytes. The reductions and the three loops are 03's.
//
// Expected bound: 32768 x 4096 fp32 moves 1.07 GB by the work model, about 0.25 ms at the about
// 4.26 TB/s copy ceiling measured on this card (a lead). The re-reads still go to L2 (17 MiB of
// rows in flight, inside it), and each block still runs load loop, barrier, loop, barrier, loop;
// what grows is the bytes each thread has outstanding while it waits, which is what 02 and 03
// lacked. Expect about 0.31 ms, 80% of copy.
//
// Size constraints: cols a multiple of 4 and x, y, gamma, beta 16-byte aligned, so that each row
// starts on a float4 (CuPy allocations are 256-byte aligned); rows < 2^31 (one block a row).

constexpr int kThreads = 256;
static_assert(kThreads % 32 == 0, "the butterfly combines whole warps");
static_assert(kThreads / 32 <= 32, "one warp finishes the reduction, so at most 32 warp partials");
static_assert(sizeof(float4) == 16, "one 16-byte access carries four floats");

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
vectorized(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                     float* __restrict__ y, int rows, int cols, float eps) {
    __shared__ float mean_partials[32];
    __shared__ float var_partials[32];
    const size_t base = static_cast<size_t>(blockIdx.x) * cols;
    const float4* xr = reinterpret_cast<const float4*>(x + base);
    float4* yr = reinterpret_cast<float4*>(y + base);
    const float4* g4 = reinterpret_cast<const float4*>(gamma);
    const float4* b4 = reinterpret_cast<const float4*>(beta);
    const int n4 = cols >> 2;

    float sum = 0.0f;
    for (int j = threadIdx.x; j < n4; j += kThreads) {
        const float4 v = xr[j];
        sum += (v.x + v.y) + (v.z + v.w);
    }
    const float mean = block_sum(sum, mean_partials) / cols;

    float sq = 0.0f;
    for (int j = threadIdx.x; j < n4; j += kThreads) {
        const float4 v = xr[j];
        const float dx = v.x - mean, dy = v.y - mean, dz = v.z - mean, dw = v.w - mean;
        sq += (dx * dx + dy * dy) + (dz * dz + dw * dw);
    }
    const float rstd = rsqrtf(block_sum(sq, var_partials) / cols + eps);

    for (int j = threadIdx.x; j < n4; j += kThreads) {
        const float4 v = xr[j];
        const float4 g = g4[j];
        const float4 b = b4[j];
        yr[j] = make_float4((v.x - mean) * rstd * g.x + b.x, (v.y - mean) * rstd * g.y + b.y,
                            (v.z - mean) * rstd * g.z + b.z, (v.w - mean) * rstd * g.w + b.w);
    }
}
