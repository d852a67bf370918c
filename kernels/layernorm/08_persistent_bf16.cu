// 08 bf16 in, bf16 out, fp32 statistics: 07's kernel reading and writing half the bytes
//
// Idea against 07: x, y, gamma and beta are bf16 (carried as 16-bit words; a bf16 is the top half
// of an fp32, so widening is a 16-bit shift). A 16-byte load brings 8 values. Every value is
// widened to fp32 on arrival; the mean, the centred sum of squares and the normalisation are fp32,
// and only y is rounded to bf16 (round to nearest even, one cvt.rn.bf16x2.f32 for two values). This
// is the second half of 06's correctness argument: a sum of 4096 terms carried in bf16 keeps 8
// significant bits of the running total, so late terms fall below half an ulp of it and vanish;
// fp32 accumulation keeps the statistics' error far below the output's own bf16 rounding. gamma and
// beta stay packed in registers (8 values a 16-byte word), half 07's register cost for them.
//
// Expected bound: at 32768 x 4096 the work model counts 256 MiB read + 256 MiB written = 0.54 GB
// (gamma and beta included, 0.003% of it), about 0.126 ms at the about 4.26 TB/s copy ceiling
// measured on this card (a lead). Each row is now 8 KiB in and 8 KiB out for the same two
// reductions and barriers as 07, so the fixed cost per row weighs twice as much against the bytes.
// First expected about 0.15 ms, 85% of copy (measured 82.6%).
//
// Second version: the next row is loaded ahead. At 4096 columns a block is 128 threads at about
// 100 registers, so only 4-5 blocks fit an SM, and each had 8 KiB of loads in flight only between
// a row's start and its first barrier: by Little's law, ~4.3 TB/s over ~1 us of latency needs
// ~33 KiB in flight per SM, and 4 blocks x 8 KiB stalled at barriers half the time fall short.
// With the next row's 8 KiB issued before the current row's reductions, each block keeps a row
// in flight throughout (16 more registers: still 4 blocks an SM). Expect ~0.135-0.14 ms, 90-93%
// of copy, level with RMSNorm's bf16 kernel.
//
// Size constraints: cols a multiple of 512 with cols <= 2048 (VPT = 2, at most 128 threads), or a
// multiple of 1024 with 4096 <= cols <= 16384 (VPT = 4, at most 512 threads): the block, cols / (8
// * VPT) threads, must be whole warps; 16-byte aligned tensors; rows < 2^31.

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Two scratch arrays used in turn: see 07.
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
__device__ __forceinline__ void layernorm_rows_bf16(const unsigned short* __restrict__ x,
                                                    const unsigned short* __restrict__ gamma,
                                                    const unsigned short* __restrict__ beta,
                                                    unsigned short* __restrict__ y, int rows, int cols, float eps) {
    static_assert(VPT >= 1, "each thread holds at least one 16-byte vector");
    static_assert(VPT * 8 <= 32, "32 fp32 values of x a thread at most, plus gamma and beta packed: past "
                                 "that the kernel no longer fits the 128 registers a 512-thread block allows");
    static_assert(sizeof(uint4) == 8 * sizeof(unsigned short), "one 16-byte vector is 8 bf16");
    __shared__ float mean_partials[32];
    __shared__ float var_partials[32];
    const int stride = blockDim.x;
    const uint4* g4 = reinterpret_cast<const uint4*>(gamma);
    const uint4* b4 = reinterpret_cast<const uint4*>(beta);

    uint4 g[VPT];
    uint4 b[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        g[k] = g4[k * stride + threadIdx.x];
        b[k] = b4[k * stride + threadIdx.x];
    }

    // The next row's loads are issued before this row's reductions, so they stay in flight
    // through the two barriers (see the header: the block would otherwise idle its share of
    // the memory system between rows).
    uint4 ahead[VPT];
    if (blockIdx.x < rows) {
        const uint4* xr = reinterpret_cast<const uint4*>(x + static_cast<size_t>(blockIdx.x) * cols);
#pragma unroll
        for (int k = 0; k < VPT; ++k) ahead[k] = xr[k * stride + threadIdx.x];
    }

    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const size_t base = static_cast<size_t>(row) * cols;
        uint4* yr = reinterpret_cast<uint4*>(y + base);

        float v[VPT][8];
#pragma unroll
        for (int k = 0; k < VPT; ++k) widen(ahead[k], v[k]);
        const int next = row + gridDim.x;
        if (next < rows) {
            const uint4* xn = reinterpret_cast<const uint4*>(x + static_cast<size_t>(next) * cols);
#pragma unroll
            for (int k = 0; k < VPT; ++k) ahead[k] = xn[k * stride + threadIdx.x];
        }

        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
#pragma unroll
            for (int i = 0; i < 8; ++i) sum += v[k][i];
        }
        const float mean = block_sum(sum, mean_partials) / cols;

        float sq = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                v[k][i] -= mean;
                sq += v[k][i] * v[k][i];
            }
        }
        const float rstd = rsqrtf(block_sum(sq, var_partials) / cols + eps);

#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            float gk[8];
            float bk[8];
            widen(g[k], gk);
            widen(b[k], bk);
            float o[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) o[i] = v[k][i] * rstd * gk[i] + bk[i];
            yr[k * stride + threadIdx.x] =
                make_uint4(pack_bf16x2(o[0], o[1]), pack_bf16x2(o[2], o[3]), pack_bf16x2(o[4], o[5]),
                           pack_bf16x2(o[6], o[7]));
        }
    }
}

// VPT = 2 for cols <= 2048: 64 threads at 1024, 128 at 2048.
extern "C" __global__ void __launch_bounds__(128)
persistent_bf16_vpt2(const unsigned short* __restrict__ x, const unsigned short* __restrict__ gamma,
                               const unsigned short* __restrict__ beta, unsigned short* __restrict__ y, int rows,
                               int cols, float eps) {
    layernorm_rows_bf16<2>(x, gamma, beta, y, rows, cols, eps);
}

// VPT = 4 for cols >= 4096: 128 threads at 4096, 256 at 8192, 512 at 16384.
extern "C" __global__ void __launch_bounds__(512)
persistent_bf16_vpt4(const unsigned short* __restrict__ x, const unsigned short* __restrict__ gamma,
                               const unsigned short* __restrict__ beta, unsigned short* __restrict__ y, int rows,
                               int cols, float eps) {
    layernorm_rows_bf16<4>(x, gamma, beta, y, rows, cols, eps);
}
