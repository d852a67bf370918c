// 04 FP64 FMA throughput: 8 independent double-precision fma chains per thread
//
// Idea against 01: the same loop in double precision. Hopper's FP64 units do 64 FMA lanes per
// SM per clock, half the FP32 rate (the CUDA programming guide's throughput table, compute
// capability 9.0), so the same 8 chains per thread and 2048 threads per SM should reach half
// of 01's FLOP rate, and any shortfall is the FP64 pipe's own latency or issue limits.
//
// Check: out holds every chain's final value; the reference is the closed form of the same
// recurrence a -> B a + C in float64, B = 0.9999, C = 1e-4: each DFMA rounds once (2^-53
// relative) and the map shrinks old errors by B a step, so the device differs from the closed
// form by at most 2^-52 / 1e-4 = 2.2e-12 of values near 1: tolerance 1e-10.
//
// Expected bound: the FP64 pipe. FLOPs = 2 x threads x 8 x iters = 2 x 270336 x 8 x 4096 =
// 17.7 GFLOP. Estimate: 132 SMs x 1.98 GHz x 64 lanes x 2 = 33.5 TFLOP/s (the datasheet says
// 34 TFLOP/s FP64), so 0.53 ms.
//
// Size constraints: grid = 1056 blocks of 256 threads; x holds one double per thread, out 8
// per thread. Registers (nvcc 13.0, sm_90a, -Xptxas -v): 26 per thread, no spills, no shared
// memory.

constexpr int THREADS = 256;
constexpr int CHAINS = 8;
constexpr double B = 0.9999;
constexpr double C = 1.0e-4;
static_assert(THREADS % 32 == 0, "a block is a whole number of warps");

extern "C" __global__ void __launch_bounds__(THREADS)
fp64_fma(const double* __restrict__ x, double* __restrict__ out, int iters) {
    const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
    double a[CHAINS];
    const double x0 = x[i];
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) a[j] = x0 + 0.125 * j;
#pragma unroll 16
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) a[j] = fma(a[j], B, C);
    }
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) out[i * CHAINS + j] = a[j];
}
