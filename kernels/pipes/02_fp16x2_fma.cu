// 02 FP16x2 FMA throughput: packed half2 chains, two FMAs per lane per instruction
//
// Idea against 01: HFMA2 does two half-precision FMAs per lane (4 FLOPs), issued like FFMA,
// one warp instruction per sub-partition per clock, so the FLOP rate doubles if the pipe
// keeps up. Same structure as 01: 8 independent chains per thread, 2048 threads per SM,
// a = hfma2(a, B, c) with B = 0.75 in both halves and c per thread.
//
// Check: the map a -> 0.75 a + c converges to the fixed point 4c (the error shrinks by 0.75
// per step: after 8192 steps it is gone), and 0.75 * 4c + c = 4c is exact in fp16, so every
// half of every chain ends at 4c (c the fp16-rounded input) or, where the last roundings
// stall next to it, at most two fp16 ulps away: 2 x 2^-10 = 2e-3 relative, tolerance 3e-3. The
// reference is the same closed form in float64 from the fp16-rounded inputs; the chains start
// from different values, so the compiler cannot merge them.
//
// Expected bound: the FP16 (non-tensor) pipe. FLOPs = 4 x threads x 8 x iters = 4 x 270336 x
// 8 x 8192 = 70.9 GFLOP. Estimate: 132 SMs x 1.98 GHz x 128 lanes x 4 = 133.8 TFLOP/s (twice
// 01), so 0.53 ms.
//
// Size constraints: grid = 1056 blocks of 256 threads; x holds 2 floats per thread (the two
// halves of c), out 8 half2 per thread (as 32-bit words). Registers (nvcc 13.0, sm_90a,
// -Xptxas -v): 20 per thread, no spills, no shared memory.

constexpr int THREADS = 256;
constexpr int CHAINS = 8;
static_assert(THREADS % 32 == 0, "a block is a whole number of warps");

// Two floats to a half2 (low half first), each rounded to nearest even: PTX, so the kernel
// needs no header (NVRTC does not always find cuda_fp16.h).
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
    unsigned short l, h;
    asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(l) : "f"(lo));
    asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(h) : "f"(hi));
    return static_cast<unsigned>(l) | (static_cast<unsigned>(h) << 16);
}

// d = a * b + c on both halves, one rounding each (HFMA2).
__device__ __forceinline__ unsigned hfma2(unsigned a, unsigned b, unsigned c) {
    unsigned d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

extern "C" __global__ void __launch_bounds__(THREADS)
fp16x2_fma(const float2* __restrict__ x, unsigned* __restrict__ out, int iters) {
    const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
    const float2 xi = x[i];
    const unsigned c = pack_half2(xi.x, xi.y);
    const unsigned b = pack_half2(0.75f, 0.75f);
    unsigned a[CHAINS];
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) a[j] = pack_half2(0.0625f * j, 0.0625f * (j + 1));
#pragma unroll 16
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) a[j] = hfma2(a[j], b, c);
    }
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) out[i * CHAINS + j] = a[j];
}
