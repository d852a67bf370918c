// 01 RMSNorm, one pass over registers: LayerNorm's tuned kernel without the mean and without beta
//
// Idea against layernorm/07: RMSNorm scales each row by the reciprocal of its root mean square, y =
// x / sqrt(mean(x^2) + eps) * gamma, eps = 1e-5: no centring, no bias. It starts from the tuned
// LayerNorm (layernorm/07): the row read once into registers with 16-byte loads, VPT = 8 float4 a
// thread at cols >= 4096 (128 threads a 4096-column row), a persistent grid, gamma held in
// registers for all the rows a block does. One block reduction a row instead of two. There is no
// cancellation to fix: sum(x^2) adds non-negative terms, so its relative error stays at a few fp32
// ulps whatever the mean (LayerNorm's E[x^2] - E[x]^2 problem was the subtraction, not the sum).
//
// Expected bound: the work model counts x read once and y written once, gamma included (0.0015%):
// at 32768 x 4096 fp32, 1.07 GB, about 0.25 ms at the about 4.26 TB/s copy ceiling measured on this
// card (a lead). Same traffic as layernorm/07 and one barrier fewer a row; without beta it needs
// 102 registers to 07's 121, still 4 blocks of 128 threads an SM at cols = 4096. Expect about 0.27
// ms, 92% of copy.
//
// Size constraints: cols a multiple of 512 with cols <= 2048 (VPT = 4, at most 128 threads), or a
// multiple of 1024 with 4096 <= cols <= 16384 (VPT = 8, at most 512 threads): the block, cols / (4
// * VPT) threads, must be whole warps; 16-byte aligned tensors; rows < 2^31.

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// One reduction a row, so one scratch array would race: a fast warp could write row r + 1's
// partial before a slow one has read row r's. Two arrays, used on alternate rows, cannot: writing
// an array again needs every warp past the barrier of the row in between.
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
__device__ __forceinline__ void rmsnorm_rows(const float* __restrict__ x, const float* __restrict__ gamma,
                                             float* __restrict__ y, int rows, int cols, float eps) {
    static_assert(VPT >= 1, "each thread holds at least one float4");
    static_assert(VPT * 4 * 2 <= 64, "x and gamma take 8 * VPT registers; past 64 the kernel no longer "
                                     "fits the 128 a thread gets at 512 threads a block");
    __shared__ float partials[2][32];
    const int stride = blockDim.x;
    const float4* g4 = reinterpret_cast<const float4*>(gamma);

    float4 g[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) g[k] = g4[k * stride + threadIdx.x];

    int parity = 0;
    for (int row = blockIdx.x; row < rows; row += gridDim.x, parity ^= 1) {
        const size_t base = static_cast<size_t>(row) * cols;
        const float4* xr = reinterpret_cast<const float4*>(x + base);
        float4* yr = reinterpret_cast<float4*>(y + base);

        float4 v[VPT];
#pragma unroll
        for (int k = 0; k < VPT; ++k) v[k] = xr[k * stride + threadIdx.x];

        float sq = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; ++k) sq += (v[k].x * v[k].x + v[k].y * v[k].y) + (v[k].z * v[k].z + v[k].w * v[k].w);
        const float rrms = rsqrtf(block_sum(sq, partials[parity]) / cols + eps);

#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            yr[k * stride + threadIdx.x] = make_float4(v[k].x * rrms * g[k].x, v[k].y * rrms * g[k].y,
                                                       v[k].z * rrms * g[k].z, v[k].w * rrms * g[k].w);
        }
    }
}

// VPT = 4 for cols <= 2048: 64 threads at 1024, 128 at 2048.
extern "C" __global__ void __launch_bounds__(128)
persistent_vpt4(const float* __restrict__ x, const float* __restrict__ gamma, float* __restrict__ y, int rows,
                        int cols, float eps) {
    rmsnorm_rows<4>(x, gamma, y, rows, cols, eps);
}

// VPT = 8 for cols >= 4096: 128 threads at 4096, 256 at 8192, 512 at 16384.
extern "C" __global__ void __launch_bounds__(512)
persistent_vpt8(const float* __restrict__ x, const float* __restrict__ gamma, float* __restrict__ y, int rows,
                        int cols, float eps) {
    rmsnorm_rows<8>(x, gamma, y, rows, cols, eps);
}
