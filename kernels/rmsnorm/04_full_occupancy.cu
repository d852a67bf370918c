// 04 RMSNorm, one CTA a row at full occupancy: half the values a thread, 2048 threads an SM
//
// Idea against 03: 03 (the row in registers, 256 threads of 4 float4 at 4096 columns, 48
// registers) runs 5 CTAs, 1280 threads, an SM. torch.compile's generated kernel for this op
// (kernels/inductor/artifacts/rmsnorm_bf16: one program a row, 16 warps, under 32 registers)
// runs 2048 threads an SM. This version keeps 03's arithmetic and its one reduction (a warp
// butterfly, one shared-memory exchange, one __syncthreads, then every warp sums the partials
// itself, so no second barrier) and halves what each thread holds: VPT = 2 float4 a thread,
// 512 threads a 4096-column row, under a 32-register cap (__launch_bounds__(1024, 2)), so 4 CTAs
// of 512 threads, 2048 threads, an SM. Loads and stores are plain (03's cache hints lost).
// Each CTA is half as long from its first load to its exit, so the SM's loads in flight dip
// for a shorter time at each CTA's reduction, and twice as many CTAs stagger those dips.
//
// Expected bound: 32768 x 4096 fp32 moves 1.07 GB by the work model, about 0.25 ms at the about
// 4.26 TB/s copy ceiling measured on this card (estimate). Reads in flight an SM are 2048 x
// 32 B = 64 KB (03's 1280 x 64 B = 80 KB), both above the about 23 KB Little's law asks
// (4.26 TB/s / 132 x 0.7 us, an estimate). Estimate: 0.250-0.253 ms, 99-100% of copy, level with torch.compile.
//
// Size constraints: cols a multiple of 4 * VPT * 32 giving at most 1024 threads (the suite
// doubles VPT from the measured variant's until the block fits: v4 at 16384 columns); 16-byte
// aligned tensors; rows < 2^31.
//
// Resources (nvcc 13.0, -arch=sm_90, no spills): full_occupancy_v1 20 registers, v2 28, v4 32,
// v8 64; 128 bytes of static shared memory each.
//
// Measured variant: v2 (the entry the suite times; the others are built for comparison)

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// grid = rows, block = cols / (4 * VPT); CTA b normalises row b.
template <int VPT>
__device__ __forceinline__ void rmsnorm_row(const float* __restrict__ x, const float* __restrict__ gamma,
                                            float* __restrict__ y, int cols, float eps) {
    static_assert(VPT >= 1 && VPT <= 8, "1 to 8 float4 a thread: 32 floats of the row at most in registers");
    __shared__ float partials[32];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const size_t base = static_cast<size_t>(blockIdx.x) * cols;
    const float4* x4 = reinterpret_cast<const float4*>(x + base);
    const int stride = blockDim.x;

    float4 v[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) v[k] = x4[k * stride + threadIdx.x];

    float sq = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) sq += (v[k].x * v[k].x + v[k].y * v[k].y) + (v[k].z * v[k].z + v[k].w * v[k].w);
    sq = warp_sum(sq);
    if (lane == 0) partials[warp] = sq;
    __syncthreads();
    sq = warp_sum(lane < (blockDim.x >> 5) ? partials[lane] : 0.0f);
    const float rrms = rsqrtf(sq / cols + eps);

    const float4* g4 = reinterpret_cast<const float4*>(gamma);
    float4* y4 = reinterpret_cast<float4*>(y + base);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int j = k * stride + threadIdx.x;
        const float4 g = __ldg(g4 + j);
        y4[j] = make_float4(v[k].x * rrms * g.x, v[k].y * rrms * g.y, v[k].z * rrms * g.z, v[k].w * rrms * g.w);
    }
}

// full_occupancy_v<VPT>: VPT float4 a thread; v1, v2 and v4 capped at 32 registers (2 CTAs of
// 1024 threads), v8 uncapped (32 floats a thread do not fit in 32).
extern "C" __global__ void __launch_bounds__(1024, 2)
full_occupancy_v1(const float* __restrict__ x, const float* __restrict__ gamma, float* __restrict__ y, int rows,
                  int cols, float eps) {
    rmsnorm_row<1>(x, gamma, y, cols, eps);
}
extern "C" __global__ void __launch_bounds__(1024, 2)
full_occupancy_v2(const float* __restrict__ x, const float* __restrict__ gamma, float* __restrict__ y, int rows,
                  int cols, float eps) {
    rmsnorm_row<2>(x, gamma, y, cols, eps);
}
extern "C" __global__ void __launch_bounds__(1024, 2)
full_occupancy_v4(const float* __restrict__ x, const float* __restrict__ gamma, float* __restrict__ y, int rows,
                  int cols, float eps) {
    rmsnorm_row<4>(x, gamma, y, cols, eps);
}
extern "C" __global__ void __launch_bounds__(1024, 1)
full_occupancy_v8(const float* __restrict__ x, const float* __restrict__ gamma, float* __restrict__ y, int rows,
                  int cols, float eps) {
    rmsnorm_row<8>(x, gamma, y, cols, eps);
}
