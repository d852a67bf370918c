// 01 uniform branches: 32 code paths, chosen per warp, so no warp ever diverges
//
// Idea: the kernel holds 32 separate loops (path p: 1024 trips of y = y * a_p + b on four
// independent chains, a_p different for each p) behind an if-else chain. Here the path is
// picked by the warp index, (i / 32) mod 32: every lane of a warp takes the same branch,
// each warp runs exactly one loop, and the branches cost a handful of compares. This is
// the baseline the divergent versions 02-04 are held against: the same loops, the same
// work per thread (4 x 1024 FMAs), only the choice of path differs.
//
// Expected bound: FP32 FMA issue. Each loop trip is 4 FMAs per lane, unrolled 8 times, so
// 32 FFMA and a few loop instructions, about 35 issue slots. Work = 2^20 threads x 4 chains
// x 1024 trips x 2 = 8.6 GFLOP. Estimate: 132 SMs x 128 FP32 lanes x 2 x 1.98 GHz
// = 66.9 TFLOP/s peak at the H200's boost clock (an estimate from the SM count and clock,
// not a measurement), about 90% of it with the loop overhead: 8.6 GFLOP / 60 TFLOP/s
// = 0.14 ms.
// Resources (nvcc -arch=sm_90a, -Xptxas -v): 12 registers, no shared memory, no spills.
//
// Size constraints: block = 256 threads (BLOCK); any n (tail guarded); iters a multiple of
// 8 (UNROLL), else nothing is written and the check fails. Grid = ceil(n / 256) blocks.

constexpr int BLOCK = 256;
constexpr int CHAINS = 4;   // independent FMA chains a thread
constexpr int PATHS = 32;   // code paths in the kernel; `path` below picks one a thread
constexpr int UNROLL = 8;   // loop trips unrolled; iters must be a multiple of it
static_assert(BLOCK % 32 == 0, "a block is a whole number of warps");

// Path p: y <- y * a_p + b on every chain, iters times. a_p = 1 - (64 + p) / 65536 is exact
// in fp32 (17 significant bits) and differs for every p, so a lane that ran another
// path's loop ends with another value.
template <int P>
__device__ __forceinline__ void run_path(float (&y)[CHAINS], int iters) {
    constexpr float a = 1.0f - (64.0f + P) / 65536.0f;
    constexpr float b = 1.0f / 1024.0f;
#pragma unroll UNROLL
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c) {
            y[c] = fmaf(y[c], a, b);
        }
    }
}

// if (path == 0) loop 0; else if (path == 1) loop 1; ...: 32 separate loops in the code.
template <int P>
__device__ __forceinline__ void dispatch(int path, float (&y)[CHAINS], int iters) {
    if constexpr (P + 1 < PATHS) {
        if (path == P) {
            run_path<P>(y, iters);
        } else {
            dispatch<P + 1>(path, y, iters);
        }
    } else {
        run_path<P>(y, iters);
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK)
uniform(const float* __restrict__ x, float* __restrict__ out, int n, int iters) {
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n || iters % UNROLL != 0) {
        return;
    }
    const int path = (i / 32) % PATHS;
    float y[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
        y[c] = x[i] * (float)(1 << c);  // x, 2x, 4x, 8x: exact
    }
    dispatch<0>(path, y, iters);
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
        sum += y[c];
    }
    out[i] = sum;
}
