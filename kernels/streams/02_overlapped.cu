// 02 copy and compute overlapped: chunks spread over four streams
//
// Idea against 01: the same chunks, the same copies and the same kernel, but chunk c goes
// to side stream c mod 4 (each stream: copy chunk c, then compute it). Streams only order
// their own work, so while the SMs compute chunk c the copy engine is already moving
// chunk c + 1: copy and compute overlap, and the time tends to max(copy, compute) plus one
// chunk of the other. The launcher makes the side streams wait for an event on the
// harness's stream first, and the harness's stream wait for an event on each side stream
// at the end, so the harness's two timing events bracket all of it.
//
// Expected bound: max(copy, compute) + the shorter of them divided by the chunk count.
// Estimates from 01's (copy 1.3 ms, compute 1.0 ms): 2.4 ms at 1 chunk (nothing to
// overlap), about 1.85 ms at 2 (0.67 + 0.67 + 0.51), 1.47 ms at 8 (1.34 + 1.03 / 8) and
// 1.41 ms at 16: up to 1.7 times faster than 01, about 46 GB/s of host-to-device bytes
// over the whole time at 8 chunks.
// Resources (nvcc -arch=sm_90a, -Xptxas -v): 10 registers, no shared memory, no spills.
//
// Size constraints: block = 256 threads (BLOCK); the kernel covers [begin, end) of x and
// out, one element a thread (the tail guarded), grid = ceil((end - begin) / 256) blocks;
// iters a multiple of 8 (UNROLL), else nothing is written and the check fails. The suite's
// n is a multiple of every chunk count it uses.

constexpr int BLOCK = 256;
constexpr int UNROLL = 8;  // iters must be a multiple of it
static_assert(BLOCK % 32 == 0, "a block is a whole number of warps");

// y <- y * A + B, iters times: A = 1 - 2^-11 and B = 2^-11 are exact in fp32; after
// 2048 steps y = A^2048 x + (1 - A^2048), about 0.37 x + 0.63.
constexpr float A = 1.0f - 1.0f / 2048.0f;
constexpr float B = 1.0f / 2048.0f;

extern "C" __global__ void __launch_bounds__(BLOCK)
overlapped(const float* __restrict__ x, float* __restrict__ out, long long begin, long long end,
      int iters) {
    const long long i = begin + (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i >= end || iters % UNROLL != 0) {
        return;
    }
    float y = x[i];
#pragma unroll UNROLL
    for (int k = 0; k < iters; ++k) {
        y = fmaf(y, A, B);
    }
    out[i] = y;
}
