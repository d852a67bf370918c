// 03 INT32 multiply-add throughput: 8 independent 32-bit IMAD chains per thread
//
// Idea: the same structure as 01 with a = a * M + K (mod 2^32), the linear congruential step.
// The multiplier and addend come in as kernel arguments and the step is written as PTX
// mad.lo.u32, so the compiler cannot fold two steps into one (with constants it could: the
// integer recurrence is exact, so a*M*M + (K*M + K) is a legal rewrite).
//
// Check: exact. K steps of the affine map compose to one affine map a -> M_K a + K_K (mod
// 2^32), computed on the host with Python integers; the reference applies it to each chain's
// start in 64-bit integers. Any lost step changes every bit pattern.
//
// Expected bound: the integer multiply pipe. Ops = 2 x threads x 8 x iters = 2 x 270336 x 8
// x 4096 = 17.7 G integer ops (a multiply-add counted as 2, like an FMA). Estimate: the CUDA
// programming guide lists 64 32-bit integer multiply-adds per SM per clock on compute
// capability 9.0, half the FP32 rate: 132 x 1.98 GHz x 64 x 2 = 33.5 Tops/s, so 0.53 ms.
//
// Size constraints: grid = 1056 blocks of 256 threads; x holds one uint32 per thread, out 8
// per thread. Registers (nvcc 13.0, sm_90a, -Xptxas -v): 24 per thread, no spills, no shared
// memory.

constexpr int THREADS = 256;
constexpr int CHAINS = 8;
static_assert(THREADS % 32 == 0, "a block is a whole number of warps");

extern "C" __global__ void __launch_bounds__(THREADS)
int32_mad(const unsigned* __restrict__ x, unsigned* __restrict__ out, int iters, unsigned m,
          unsigned k) {
    const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
    unsigned a[CHAINS];
    const unsigned x0 = x[i];
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) a[j] = x0 + 0x9E3779B9u * j;
#pragma unroll 16
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) {
            asm volatile("mad.lo.u32 %0, %0, %1, %2;\n" : "+r"(a[j]) : "r"(m), "r"(k));
        }
    }
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) out[i * CHAINS + j] = a[j];
}
