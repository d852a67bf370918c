// 01 FP32 FMA throughput: 8 independent fmaf chains per thread, every SM full
//
// Idea: the FP32 pipe's peak is 128 FMA lanes per SM per clock (4 sub-partitions x 32), one
// warp instruction per sub-partition per clock. A dependent FMA has a latency of about 4
// clocks, so a sub-partition needs at least 4 independent FMAs ready each clock: here every
// thread runs CHAINS = 8 independent chains a = fma(a, B, C) and every SM holds 2048 threads
// (16 warps per sub-partition), 128 independent FMAs per sub-partition, far more than needed.
// B and C are compile-time constants: ptxas keeps B in one register, read through the
// operand reuse cache, and C as an immediate (FFMA R, R, R.reuse, imm), so no register-bank
// conflict can slow it. The loop is
// unrolled 16 times, 128 FFMA per 3 loop instructions (add, compare, branch): a sub-partition
// issues one instruction a clock, so loop overhead takes FMA issue slots (unrolled 4 times,
// 3 per 32 would cap the rate at 91%).
//
// Check: out holds every chain's final value; the reference is the same recurrence in float64,
// in closed form a_K = F + B^K (a_0 - F), F = C / (1 - B), with B and C their fp32 values.
// Each fp32 FMA rounds once (<= 2^-24 relative, a < 2), and the map contracts errors by B per
// step, so the total error stays below 2^-23 / (1 - B) = 1.2e-3 of a ~ 1: the tolerance is 2e-3.
//
// Expected bound: the FP32 pipe. FLOPs = 2 x threads x 8 x iters = 2 x 270336 x 8 x 8192 =
// 35.4 GFLOP. Estimate: 132 SMs x 1.98 GHz (boost) x 128 lanes x 2 = 66.9 TFLOP/s, so 0.53 ms;
// the target is >= 90% of SM count x clock x 128 x 2 at the clock the run records.
//
// Size constraints: grid = 1056 blocks of 256 threads (8 per SM on 132 SMs: one wave on an
// H200); out holds threads x 8 floats. Registers (nvcc 13.0, sm_90a, -Xptxas -v): 24 per
// thread, no spills, no shared memory.

constexpr int THREADS = 256;
constexpr int CHAINS = 8;
constexpr float B = 0.9999f;
constexpr float C = 1.0e-4f;
static_assert(THREADS % 32 == 0, "a block is a whole number of warps");

extern "C" __global__ void __launch_bounds__(THREADS)
fp32_fma(const float* __restrict__ x, float* __restrict__ out, int iters) {
    const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
    float a[CHAINS];
    const float x0 = x[i];
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) a[j] = x0 + 0.125f * j;
#pragma unroll 16
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) a[j] = fmaf(a[j], B, C);
    }
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) out[i * CHAINS + j] = a[j];
}
