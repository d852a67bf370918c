// 02 occupancy, latency-bound: one dependent FMA chain per thread at 4 to 64 warps per SM
//
// Idea against 01: the other reason to want warps. Each thread runs a single chain
// a = fma(a, B, C): every FMA waits for the previous one (about 4 clocks on Hopper), so a
// warp issues at most one FMA every 4 clocks, and a sub-partition, which can issue one warp
// instruction a clock, needs about 4 resident warps to stay busy. Same occupancy control as
// 01: b = warps_per_sm / 4 blocks of 4 warps fit per SM (dynamic shared memory), grid = 132 x
// b. Here the work grows with the warps (every thread runs the same chain), and the figure is
// the FMA rate.
//
// Check: out holds each thread's final value; the reference is the closed form of the same
// recurrence in float64 (B = 0.9999, C = 1e-4 as fp32): the error stays below 2^-23 / 1e-4 =
// 1.2e-3 of values near 1 (each FMA rounds once; the map shrinks old errors), tolerance 2e-3.
//
// Expected bound: FMA latency below ~16 warps per SM, the FP32 pipe above. Estimate at 1.98
// GHz: 4 warps per SM (1 per sub-partition) = 1 FMA per 4 clocks per sub-partition, 25% of
// 66.9 TFLOP/s = ~16.7; 8 warps ~33; 16 warps and up near the pipe's 66.9 (less the loop's
// few instructions). Time at 4 warps: 65536 x 4 clocks = 0.13 ms.
//
// Size constraints: 128 threads per block; out holds one float per thread; the dynamic
// shared memory is requested but never touched. Registers (nvcc 13.0, sm_90a, -Xptxas -v):
// 11 per thread, no spills; shared memory: only the dynamic request.

constexpr int THREADS = 128;
constexpr float B = 0.9999f;
constexpr float C = 1.0e-4f;
static_assert(THREADS % 32 == 0, "a block is a whole number of warps");

extern "C" __global__ void __launch_bounds__(THREADS, 16)
dependent_fma(const float* __restrict__ x, float* __restrict__ out, int iters) {
    const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
    float a = x[i];
#pragma unroll 16
    for (int it = 0; it < iters; ++it) a = fmaf(a, B, C);
    out[i] = a;
}
