// 02 RMSNorm with bf16 in and out, fp32 inside: 01 reading and writing half the bytes
//
// Idea against 01: x, y and gamma are bf16 (carried as 16-bit words; a bf16 is the top half of an
// fp32, so widening is a 16-bit shift), 8 values a 16-byte load. Values are widened to fp32 on
// arrival, sum(x^2) and the scaling are fp32, and only y is rounded to bf16 (round to nearest even,
// one cvt.rn.bf16x2.f32 for two values). gamma stays packed in registers.
//
// Expected bound: at 32768 x 4096 the work model counts 256 MiB read + 256 MiB written = 0.54 GB
// (gamma included), about 0.126 ms at the about 4.26 TB/s copy ceiling measured on this card (a
// lead). Half 01's bytes a row for the same reduction and barrier, so the fixed cost a row weighs
// twice as much. Expect about 0.15 ms, 85% of copy.
//
// Size constraints: cols a multiple of 512 with cols <= 2048 (VPT = 2, at most 128 threads), or a
// multiple of 1024 with 4096 <= cols <= 16384 (VPT = 4, at most 512 threads): the block, cols / (8
// * VPT) threads, must be whole warps; 16-byte aligned tensors; rows < 2^31.

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// One reduction a row: two scratch arrays on alternate rows, as in 01.
__device__ __forceinline__ float block_sum(float v, float* partials) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) partials[warp] = v;
    __syncthreads();
    return warp_sum(lane < (blockDim.x >> 5) ? partials[lane] : 0.0f);
}

// A 32-bit word holds two bf16: the element at the lower address in the low half.
__device__ __forceinline__ float bf16_lo(unsigned int w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(unsigned int w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ unsigned int pack_bf16x2(float lo, float hi) {
    unsigned int w;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
    return w;
}

__device__ __forceinline__ void widen(uint4 w, float* v) {
    v[0] = bf16_lo(w.x);
    v[1] = bf16_hi(w.x);
    v[2] = bf16_lo(w.y);
    v[3] = bf16_hi(w.y);
    v[4] = bf16_lo(w.z);
    v[5] = bf16_hi(w.z);
    v[6] = bf16_lo(w.w);
    v[7] = bf16_hi(w.w);
}

// block = cols / (8 * VPT); grid = min(rows, resident blocks).
template <int VPT>
__device__ __forceinline__ void rmsnorm_rows_bf16(const unsigned short* __restrict__ x,
                                                  const unsigned short* __restrict__ gamma,
                                                  unsigned short* __restrict__ y, int rows, int cols, float eps) {
    static_assert(VPT >= 1, "each thread holds at least one 16-byte vector");
    static_assert(VPT * 8 <= 32, "32 fp32 values of x a thread at most, plus gamma packed: past that the "
                                 "kernel no longer fits the 128 registers a 512-thread block allows");
    static_assert(sizeof(uint4) == 8 * sizeof(unsigned short), "one 16-byte vector is 8 bf16");
    __shared__ float partials[2][32];
    const int stride = blockDim.x;
    const uint4* g4 = reinterpret_cast<const uint4*>(gamma);

    uint4 g[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) g[k] = g4[k * stride + threadIdx.x];

    int parity = 0;
    for (int row = blockIdx.x; row < rows; row += gridDim.x, parity ^= 1) {
        const size_t base = static_cast<size_t>(row) * cols;
        const uint4* xr = reinterpret_cast<const uint4*>(x + base);
        uint4* yr = reinterpret_cast<uint4*>(y + base);

        float v[VPT][8];
#pragma unroll
        for (int k = 0; k < VPT; ++k) widen(xr[k * stride + threadIdx.x], v[k]);

        float sq = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
#pragma unroll
            for (int i = 0; i < 8; ++i) sq += v[k][i] * v[k][i];
        }
        const float rrms = rsqrtf(block_sum(sq, partials[parity]) / cols + eps);

#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            float gk[8];
            widen(g[k], gk);
            float o[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) o[i] = v[k][i] * rrms * gk[i];
            yr[k * stride + threadIdx.x] =
                make_uint4(pack_bf16x2(o[0], o[1]), pack_bf16x2(o[2], o[3]), pack_bf16x2(o[4], o[5]),
                           pack_bf16x2(o[6], o[7]));
        }
    }
}

// VPT = 2 for cols <= 2048: 64 threads at 1024, 128 at 2048.
extern "C" __global__ void __launch_bounds__(128)
persistent_bf16_vpt2(const unsigned short* __restrict__ x, const unsigned short* __restrict__ gamma,
                             unsigned short* __restrict__ y, int rows, int cols, float eps) {
    rmsnorm_rows_bf16<2>(x, gamma, y, rows, cols, eps);
}

// VPT = 4 for cols >= 4096: 128 threads at 4096, 256 at 8192, 512 at 16384.
extern "C" __global__ void __launch_bounds__(512)
persistent_bf16_vpt4(const unsigned short* __restrict__ x, const unsigned short* __restrict__ gamma,
                             unsigned short* __restrict__ y, int rows, int cols, float eps) {
    rmsnorm_rows_bf16<4>(x, gamma, y, rows, cols, eps);
}
