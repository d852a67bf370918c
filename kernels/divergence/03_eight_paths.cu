// 03 eight paths a warp: lane mod 8 picks one of eight loops
//
// Idea against 01: as 02 with the path lane mod 8: each warp runs 8 loops one after the
// other, 4 lanes active in each. Same work per thread as 01, 8 times the issue slots.
//
// Expected bound: FP32 FMA issue at 4 of 32 lanes. Estimate: 8 x 01's time, about
// 1.1 ms, an eighth of 01's TFLOP/s.
// Resources (nvcc -arch=sm_90a, -Xptxas -v): 13 registers, no shared memory, no spills.
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
eight_paths(const float* __restrict__ x, float* __restrict__ out, int n, int iters) {
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n || iters % UNROLL != 0) {
        return;
    }
    const int path = (threadIdx.x & 31) % 8;
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
