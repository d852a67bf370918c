// 01 occupancy, memory-bound: a streaming read at 4 to 64 resident warps per SM
//
// Idea: how many warps must an SM hold to keep HBM busy? Each resident warp has at most
// UNROLL = 4 loads of 512 bytes in flight (4 LDG.128 per thread before the first add), so the
// bytes in flight per SM grow with the warps until they cover bandwidth x latency. The
// suite fixes the resident warps per SM with dynamic shared memory: blocks of 4 warps each
// ask for 228 KiB / b - 1 KiB, so exactly b = warps_per_sm / 4 blocks fit on an SM, and the
// grid is 132 x b blocks, one resident set on an H200, looping over the buffer (grid stride).
// Each thread sums every word it read; one 64-bit atomic per warp adds the warp's sum to the
// total.
//
// Check: words in [0, 2^16); out is the exact sum of all words of the buffer (below 2^45, a
// 64-bit integer); the launcher zeroes it before every launch.
//
// Expected bound: latency at low occupancy, HBM bandwidth at high. Estimate by Little's law:
// 4.3 TB/s x ~0.8 us (loaded HBM latency) = 3.4 MB in flight, 26 KB per SM, about 13 warps
// x 2 KB each: so 4 warps per SM keep 1.06 MB in flight, ~1.3 TB/s (0.8 ms for 1 GiB), 8
// warps ~2.6 TB/s, and from 16 warps up within a few percent of the read ceiling (~0.25 ms).
//
// Size constraints: n a multiple of 4 words (whole uint4); any grid (loads are guarded);
// 128 threads per block; the dynamic shared memory is requested but never touched.
// Registers (nvcc 13.0, sm_90a, -Xptxas -v): 32 per thread, no spills; shared memory: only
// the dynamic request (232448 down to 13568 bytes per block).

constexpr int THREADS = 128;
constexpr int UNROLL = 4;
static_assert(THREADS % 32 == 0, "a block is a whole number of warps");

extern "C" __global__ void __launch_bounds__(THREADS, 16)
stream_read(const uint4* __restrict__ src, unsigned long long* __restrict__ out, long long n4) {
    const long long step = (long long)gridDim.x * THREADS * UNROLL;
    unsigned sum = 0;
    for (long long base = (long long)blockIdx.x * THREADS * UNROLL + threadIdx.x; base < n4;
         base += step) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long i = base + u * THREADS;
            v[u] = i < n4 ? src[i] : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) sum += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    unsigned long long total = sum;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        total += __shfl_down_sync(0xffffffffu, total, offset);
    if (threadIdx.x % 32 == 0) atomicAdd(out, total);
}
