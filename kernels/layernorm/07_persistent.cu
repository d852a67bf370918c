// 07 tuned launch: wider threads, a persistent grid, gamma and beta kept in registers
//
// Idea against 06: the launch geometry. (a) At cols >= 4096 each thread holds VPT = 8 float4 (32
// floats) instead of 4, so a 4096-column row takes 128 threads, 4 warps: half the warps per
// reduction, and twice the loads in flight per thread. (b) The grid is sized to what fits on the
// GPU at once (the launch computes blocks per SM from the kernel's registers) and each block loops
// over rows r, r + gridDim.x, ... so that (c) gamma and beta, the same for every row, are loaded
// into registers once per block instead of once per row: 06 fetches 32 KiB of them from L1/L2 for
// every 16 KiB row of x. The statistics are 06's two passes over registers.
//
// Expected bound: 32768 x 4096 fp32 moves 1.07 GB by the work model, about 0.25 ms at the about
// 4.26 TB/s copy ceiling measured on this card (a lead). The DRAM traffic is 06's; what is removed
// is load traffic that hits in cache and per-row block start-up. The price is registers: 96 for x,
// gamma and beta, about 4 blocks of 128 threads per SM, each with 16 KiB of loads in flight at a
// row's start, still above the roughly 25 KiB per SM that Little's law asks. 06 was already close
// to the ceiling, so expect a few percent: about 0.27 ms, 92% of copy.
//
// Size constraints: cols a multiple of 512 with cols <= 2048 (VPT = 4, at most 128 threads), or a
// multiple of 1024 with 4096 <= cols <= 16384 (VPT = 8, at most 512 threads, the launch bound that
// leaves a thread the 128 registers it needs): the block, cols / (4 * VPT) threads, must be whole
// warps; 16-byte aligned tensors; rows < 2^31.

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Each call site passes its own scratch array. With two arrays used in turn, a warp can only
// write an array again after every warp has passed the barrier of the other reduction, that is,
// after every warp has finished reading it.
__device__ __forceinline__ float block_sum(float v, float* partials) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) partials[warp] = v;
    __syncthreads();
    return warp_sum(lane < (blockDim.x >> 5) ? partials[lane] : 0.0f);
}

// block = cols / (4 * VPT); grid = min(rows, resident blocks).
template <int VPT>
__device__ __forceinline__ void layernorm_rows(const float* __restrict__ x, const float* __restrict__ gamma,
                                               const float* __restrict__ beta, float* __restrict__ y, int rows,
                                               int cols, float eps) {
    static_assert(VPT >= 1, "each thread holds at least one float4");
    static_assert(VPT * 4 * 3 <= 96, "x, gamma and beta take 12 * VPT registers; past 96 the kernel no "
                                     "longer fits the 128 a thread gets at 512 threads a block");
    __shared__ float mean_partials[32];
    __shared__ float var_partials[32];
    const int stride = blockDim.x;
    const float4* g4 = reinterpret_cast<const float4*>(gamma);
    const float4* b4 = reinterpret_cast<const float4*>(beta);

    float4 g[VPT];
    float4 b[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        g[k] = g4[k * stride + threadIdx.x];
        b[k] = b4[k * stride + threadIdx.x];
    }

    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const size_t base = static_cast<size_t>(row) * cols;
        const float4* xr = reinterpret_cast<const float4*>(x + base);
        float4* yr = reinterpret_cast<float4*>(y + base);

        float4 v[VPT];
#pragma unroll
        for (int k = 0; k < VPT; ++k) v[k] = xr[k * stride + threadIdx.x];

        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; ++k) sum += (v[k].x + v[k].y) + (v[k].z + v[k].w);
        const float mean = block_sum(sum, mean_partials) / cols;

        float sq = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            v[k].x -= mean;
            v[k].y -= mean;
            v[k].z -= mean;
            v[k].w -= mean;
            sq += (v[k].x * v[k].x + v[k].y * v[k].y) + (v[k].z * v[k].z + v[k].w * v[k].w);
        }
        const float rstd = rsqrtf(block_sum(sq, var_partials) / cols + eps);

#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            yr[k * stride + threadIdx.x] =
                make_float4(v[k].x * rstd * g[k].x + b[k].x, v[k].y * rstd * g[k].y + b[k].y,
                            v[k].z * rstd * g[k].z + b[k].z, v[k].w * rstd * g[k].w + b[k].w);
        }
    }
}

// VPT = 4 for cols <= 2048: 64 threads at 1024, 128 at 2048. (With a 512-thread bound ptxas
// caps this entry at 64 registers and spills; 128 is all it is launched with.)
extern "C" __global__ void __launch_bounds__(128)
persistent_vpt4(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                          float* __restrict__ y, int rows, int cols, float eps) {
    layernorm_rows<4>(x, gamma, beta, y, rows, cols, eps);
}

// VPT = 8 for cols >= 4096: 128 threads at 4096, 256 at 8192, 512 at 16384.
extern "C" __global__ void __launch_bounds__(512)
persistent_vpt8(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                          float* __restrict__ y, int rows, int cols, float eps) {
    layernorm_rows<8>(x, gamma, beta, y, rows, cols, eps);
}
