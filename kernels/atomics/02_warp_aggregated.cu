// 02 warp-aggregated atomicAdd: a shuffle reduction, then one atomic per warp per trip
//
// Idea against 01: the 32 lanes of a warp add to the same counter in each trip, so the
// warp can sum its 32 values first, in registers, with a butterfly of five
// __shfl_xor_sync steps, and lane 0 alone issues one atomicAdd of the sum. The counters end
// up identical to 01's; the L2 sees 32 times fewer atomics: 131,072 for the 2^22 adds.
// The shuffles cost a few instructions a trip on every lane, nothing next to a queue of
// atomics on one word, and a little where the atomics were cheap already.
//
// Expected bound: the L2's atomic throughput at 1/32 of 01's count, until the shuffles and
// the launch take over. Estimate at addresses = 1: 131,072 atomics at one a slice clock
// (about 1.7 GHz) is 77 us, some 32 times under 01's estimate of 2.5 ms; at 1048576
// counters the atomics are cheap for both and the two come within a factor of two, the
// counters' memset and the launch (a few microseconds each) a good part of the time.
// Resources (nvcc -arch=sm_90a, -Xptxas -v): 25 registers, no shared memory, no spills.
//
// Size constraints: as 01: block = 256 threads, `addresses` a power of two, `salt` 32
// words, counters zeroed by the launcher before every launch. Every lane of a warp must
// be active (full-mask shuffles): the grid is whole blocks of whole warps.

constexpr int BLOCK = 256;
constexpr int WARPS_PER_BLOCK = BLOCK / 32;
constexpr unsigned FULL_MASK = 0xffffffffu;
static_assert(BLOCK % 32 == 0, "a block is a whole number of warps");

extern "C" __global__ void __launch_bounds__(BLOCK)
warp_aggregated(const unsigned* __restrict__ salt, unsigned* __restrict__ counters,
                unsigned addresses, int iters) {
    const unsigned lane = threadIdx.x & 31;
    const unsigned warps = gridDim.x * WARPS_PER_BLOCK;
    const unsigned warp = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
    const unsigned mask = addresses - 1;
    const unsigned value = salt[lane];
    if (addresses == 0 || (addresses & mask) != 0) {
        return;  // not a power of two: nothing is added and the check fails
    }
    for (int k = 0; k < iters; ++k) {
        unsigned sum = value + (unsigned)k;
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) {
            sum += __shfl_xor_sync(FULL_MASK, sum, offset);
        }
        if (lane == 0) {
            const unsigned event = (unsigned)k * warps + warp;
            atomicAdd(&counters[event & mask], sum);
        }
    }
}
