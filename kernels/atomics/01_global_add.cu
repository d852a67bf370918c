// 01 global atomicAdd, one per thread per trip: the contention sweep over the number of counters
//
// Idea: 2^18 threads each do 16 trips; in every trip each thread adds a small integer to a
// counter in global memory with atomicAdd (its result unused, so it compiles to a
// fire-and-forget reduction, RED). All 32 lanes of a warp add to the same counter in a
// trip, and successive warp-trips take successive counters: warp-trip e (e = trip x warps
// + warp) uses counter e mod `addresses`. With addresses = 1 every one of the 2^22 adds
// lands on one word; with 32 or 1024 they spread over that many words; at 1048576 every
// warp-trip (131,072 of them) has a counter of its own. Atomics on global memory are
// carried out in the L2 by the slice that owns the line, so adds to one word queue behind
// each other there while adds to many words spread over the slices.
// The value lane l adds in trip k is salt[l] + k, so the counters check both that every
// add landed and that it landed on the right counter.
//
// Expected bound: the L2's atomic throughput. Estimate: one add to one address a clock of
// the slice that owns it, about 1.7 GHz: 2^22 adds / 1.7 GHz = 2.5 ms at addresses = 1 if
// the 32 same-address adds of a warp are applied one by one (about 0.6 ns an add); far
// less if the hardware combines them. With the adds spread over all slices (1048576
// counters) the rate is some tens of times higher, tens of microseconds for the lot,
// where the suite's zeroing of the counters (a memset of up to 4 MiB, a few microseconds)
// becomes visible. These are estimates; the figure is the point of the sweep.
// Resources (nvcc -arch=sm_90a, -Xptxas -v): 29 registers, no shared memory, no spills.
//
// Size constraints: block = 256 threads (BLOCK); `addresses` a power of two (the index is
// masked, not divided); `salt` holds 32 words; the launcher zeroes `counters` before
// every launch (one memset, inside the timed region).

constexpr int BLOCK = 256;
constexpr int WARPS_PER_BLOCK = BLOCK / 32;
static_assert(BLOCK % 32 == 0, "a block is a whole number of warps");

extern "C" __global__ void __launch_bounds__(BLOCK)
global_add(const unsigned* __restrict__ salt, unsigned* __restrict__ counters,
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
        const unsigned event = (unsigned)k * warps + warp;
        atomicAdd(&counters[event & mask], value + (unsigned)k);
    }
}
