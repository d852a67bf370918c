// 01 pointer chase: load-to-use latency of each memory level, one dependent load at a time
//
// Idea: a load whose address comes from the value of the previous load cannot start before
// that one returns, so a chain of them runs at one memory latency per step. The suite builds
// one random cyclic permutation over the slots of a working set of `kib` KiB, one slot per
// 128-byte line (the L1 line; the L2 works in 32-byte sectors of it), each slot holding the
// byte offset of the next from the start of the buffer; a random order defeats the
// prefetchers and spreads the lines over every L2 slice and DRAM bank. Offsets, not
// addresses: the chain means the same wherever its values are copied (the harness re-checks
// with fresh values written into the same buffer), at the price of a 64-bit add (two
// dependent IADD3, a few cycles) before each load, which every figure includes. Loads are plain weak ld.global (LDG.E.64, cached in L1 and L2,
// the default on sm_90); ld.global.ca compiles to LDG.E.64.STRONG.SM, an ordering this chase
// does not need.
// CHASERS = 128 one-thread blocks run the chase at once, each from its own starting point
// spaced evenly around the cycle: at most one load per SM is in flight, far too few to load
// any level, while together they touch 128 x steps lines per launch, so working sets larger
// than the L2 (50 MB) are not served from an L2 warmed by the previous launch.
//
// Near and far L2: the H100/H200 L2 is two partitions joined by a crossbar, and which one
// holds a line is decided by a hash of its physical address that a kernel can neither see nor
// choose. A random chase mixes both, so the L2 plateau is the average of near and far hits;
// the spread of the per-launch times does not separate them. At the largest working sets the
// chase also misses in the TLBs (whose reach is not documented), so the last plateaus may
// include page-walk time.
//
// Check: every chaser writes the byte offset it stopped at; the reference is the same walk
// computed from the permutation itself (start position + steps, mod the cycle length).
//
// Expected bound: latency. Time = steps x latency, steps = 32768 (launch cost ~5 us
// against >= 0.5 ms).
// Estimates at 1.98 GHz: L1 ~ 35-45 cycles (~18-23 ns, the load and the add) up to ~192 KiB;
// L2 ~ 250-300 cycles (~130-150 ns) up to some 30-50 MB; HBM ~ 500-700 ns with TLB misses
// at 1 GiB. The figures are ns_per_item and cycles_per_item.
//
// Size constraints: kib * 1024 a multiple of 128 bytes (one slot per line); offsets fit 64
// bits; steps >= 1. Registers (nvcc 13.0, sm_90a, -Xptxas -v): 15 per thread, no spills,
// no shared memory.

constexpr int CHASERS = 128;  // one-thread blocks, as CHASERS in suite.py
static_assert(CHASERS <= 132, "no more chasers than an H200 has SMs");

// next: the working set; the first 8 bytes of every 128-byte slot hold the byte offset of the
// next slot from `next`. starts, out: byte offsets from `next`, one per chaser.
extern "C" __global__ void __launch_bounds__(1)
pointer_chase(const unsigned long long* __restrict__ next,
              const unsigned long long* __restrict__ starts, unsigned long long* __restrict__ out,
              int steps) {
    const int c = blockIdx.x;
    if (c >= CHASERS) return;
    const unsigned long long base = reinterpret_cast<unsigned long long>(next);
    unsigned long long offset = starts[c];
#pragma unroll 4
    for (int i = 0; i < steps; ++i) {
        // the address is base + offset: one 64-bit add (two dependent IADD3) before each load
        asm volatile(
            "{\n\t.reg .u64 a;\n\tadd.u64 a, %1, %0;\n\tld.global.u64 %0, [a];\n\t}\n"
            : "+l"(offset)
            : "l"(base)
            : "memory");
    }
    out[c] = offset;
}
