// 05 reduce, warp shuffles: registers instead of shared memory for the block's sum
//
// Idea against 04: a warp sums its 32 partials with five __shfl_down_sync steps, register
// to register, with no barrier; the 8 warp totals go through shared memory once, and the
// first warp sums them with three more shuffles. Barriers per block fall from 9 to 1 and
// the shared-memory traffic from 8 rounds to 1. One atomic per block, as in 04.
//
// Expected bound: memory. Bytes = 4n read, 0.22 ms at n = 2^28 by the datasheet's 4.8
// TB/s (estimate). If 04 is already near the read floor the gain is small: the test of
// this version is whether the block's sum was ever on the critical path.
//
// Size constraints: n a multiple of 4096; BLOCK a multiple of 32 and at most 32 warps
// (the warp totals are summed by one warp); grid = n / 4096; `out` zeroed by the launcher.

constexpr int BLOCK = 256;
constexpr int VECS = 4;
constexpr int WARPS = BLOCK / 32;
static_assert(BLOCK % 32 == 0, "a block is a whole number of warps");
static_assert(WARPS <= 32, "one warp sums the warp totals");
static_assert((WARPS & (WARPS - 1)) == 0, "the second shuffle stage halves WARPS");

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    return v;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
reduce_warp_shuffle(const float4* __restrict__ x, float* __restrict__ out) {
    __shared__ float warp_totals[WARPS];
    long long base = (long long)blockIdx.x * (BLOCK * VECS) + threadIdx.x;
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        float4 v = x[base + k * BLOCK];
        acc += (v.x + v.y) + (v.z + v.w);
    }
    acc = warp_sum(acc);
    int lane = threadIdx.x & 31;
    int warp = threadIdx.x >> 5;
    if (lane == 0) {
        warp_totals[warp] = acc;
    }
    __syncthreads();
    if (warp == 0) {
        acc = lane < WARPS ? warp_totals[lane] : 0.0f;
#pragma unroll
        for (int offset = WARPS / 2; offset > 0; offset >>= 1) {
            acc += __shfl_down_sync(0xffffffffu, acc, offset);
        }
        if (lane == 0) {
            atomicAdd(out, acc);
        }
    }
}
