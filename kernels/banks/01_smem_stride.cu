// 01 shared-memory stride sweep: lane l of each warp reads word l * stride
//
// Idea: shared memory is 32 banks, each 4 bytes wide; word w lives in bank w mod 32, and a
// bank serves one word per clock. A warp-wide 32-bit load whose 32 words sit in 32 different
// banks is served in one pass (one "wavefront"); if k lanes ask one bank for k different
// words, the request is replayed k times. Lane l reads word l * stride + j (j = 0..7, the
// same for every lane of one instruction), so the bank of lane l is (l * stride + j) mod 32:
// stride 1 and 33 hit 32 distinct banks (no conflict), stride 2 pairs lanes l and l + 16
// (2-way), 4 gives 4-way, 8 gives 8-way, 16 gives 16-way and 32 puts all 32 lanes on one
// bank (32-way). Loads are `volatile`, so every one of them is issued; they are independent
// of each other (8 per loop trip, summed into one register), so the warps keep the shared
// memory pipe busy and the time measures its throughput, not its latency.
// One block of 1024 threads (32 warps) runs on one SM: the count of warp-wide loads on that
// SM is exact, 32 warps x iters x 8, and that is the suite's `items`.
//
// Expected bound: shared-memory bank throughput of one SM. Estimate: one wavefront a clock
// (32 banks x 4 bytes = 128 bytes a clock), so about 1 cycle a warp-wide load without
// conflicts and k cycles with a k-way conflict: 1, 2, 4, 8, 16, 32 and 1 cycles for strides
// 1, 2, 4, 8, 16, 32, 33. With the suite's iters = 1536: 32 x 1536 x 8 = 393,216 loads, at
// an estimated 1.98 GHz clock about 0.2 ms at stride 1 and 32 x that, about 6.4 ms, at
// stride 32 (launch cost, a few microseconds, is under 3% of the stride-1 time).
// Resources (nvcc -arch=sm_90a, -Xptxas -v): 31 registers, 8192 bytes static shared memory,
// no spills.
//
// Size constraints: block = 1024 threads (BLOCK), grid = 1 block; 1 <= stride and
// 31 * stride + 8 <= 2048 words (stride <= 65), else the kernel writes nothing and the
// check fails; iters >= 1. `table` holds 2048 words; `out` one word a thread.

constexpr int BLOCK = 1024;
constexpr int WORDS = 2048;   // 8 KiB of shared memory
constexpr int UNROLL = 8;     // independent loads a loop trip
static_assert(BLOCK % 32 == 0, "a block is a whole number of warps");
static_assert(31 * 33 + UNROLL <= WORDS, "stride 33 must fit");

extern "C" __global__ void __launch_bounds__(BLOCK)
smem_stride(const unsigned* __restrict__ table, unsigned* __restrict__ out, int stride,
            int iters) {
    __shared__ unsigned smem[WORDS];
    for (int i = threadIdx.x; i < WORDS; i += BLOCK) {
        smem[i] = table[i];
    }
    __syncthreads();
    if (stride < 1 || 31 * stride + UNROLL > WORDS) {
        return;  // out keeps its poison: the check reports the bad stride
    }
    const int lane = threadIdx.x & 31;
    const volatile unsigned* p = smem + lane * stride;
    unsigned acc = 0;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < UNROLL; ++j) {
            acc += p[j];
        }
    }
    out[blockIdx.x * BLOCK + threadIdx.x] = acc;
}
