// 03 global atomicAdd with the lanes of a warp on different counters: contention without the same word
//
// Idea against 01: the same 2^22 atomicAdds of salt[lane] + trip, but every thread of a
// trip takes its own counter: thread-trip g (g = trip x threads + thread) adds to counter
// g mod `addresses`. At addresses = 1 this is 01 again, all 2^22 adds on one word. At 32
// the lanes of each warp hit 32 different words of one 128-byte line (and every warp the
// same line); at 1024 a warp's 32 words are one line out of 32; at 1048576 the adds spread
// over 4 MiB of counters, each hit four times. Set beside 01 at the same `addresses`, it
// separates two costs: many adds to one word (serialised wherever they meet) and many
// adds to one line (a warp's 32 adds to one line go out as one request for the L2 slice
// that owns it).
//
// Expected bound: the L2's atomic throughput. Estimate: at addresses = 1 as 01, about
// 2.5 ms (2^22 adds at one a clock of one slice, about 1.7 GHz); at 32 and above each warp
// instruction updates 32 words of a line at once, so if a slice applies a line's updates
// together the 2^22 adds cost about what 131,072 one-word atomics would, tens of
// microseconds; where that holds, 03 at 32 is far faster than 01 at 32. An estimate; the
// sweep measures it.
// Resources (nvcc -arch=sm_90a, -Xptxas -v): 29 registers, no shared memory, no spills.
//
// Size constraints: block = 256 threads (BLOCK); `addresses` a power of two (the index is
// masked, not divided); `salt` holds 32 words; the launcher zeroes `counters` before
// every launch (one memset, inside the timed region).

constexpr int BLOCK = 256;
static_assert(BLOCK % 32 == 0, "a block is a whole number of warps");

extern "C" __global__ void __launch_bounds__(BLOCK)
global_add_lanes(const unsigned* __restrict__ salt, unsigned* __restrict__ counters,
                 unsigned addresses, int iters) {
    const unsigned lane = threadIdx.x & 31;
    const unsigned threads = gridDim.x * BLOCK;
    const unsigned thread = blockIdx.x * BLOCK + threadIdx.x;
    const unsigned mask = addresses - 1;
    const unsigned value = salt[lane];
    if (addresses == 0 || (addresses & mask) != 0) {
        return;  // not a power of two: nothing is added and the check fails
    }
    for (int k = 0; k < iters; ++k) {
        const unsigned g = (unsigned)k * threads + thread;
        atomicAdd(&counters[g & mask], value + (unsigned)k);
    }
}
