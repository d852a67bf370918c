// 02 pointer chase, L1 bypassed: the same chase with ld.global.cg, so every step goes to the L2
//
// Idea against 01: the same walk (offsets from the buffer's start, an add before each load),
// CHASERS and permutation, but every load is ld.global.cg
// (cache in the L2 only), so small working sets, which 01 serves from the L1, here show the
// L2's latency: the L2 plateau runs from the smallest working set up to the L2's capacity,
// without the L1 plateau in front of it, and beyond it the HBM plateau is the one of 01.
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
// Estimates at 1.98 GHz (not yet measured here): no L1 plateau; L2 ~ 250-300 cycles
// (~130-150 ns) up to some 30-50 MB; HBM ~ 500-700 ns with TLB misses at 1 GiB. The figures are ns_per_item and cycles_per_item.
//
// Size constraints: kib * 1024 a multiple of 128 bytes (one slot per line); offsets fit 64
// bits; steps >= 1. Registers (nvcc 13.0, sm_90a, -Xptxas -v): 15 per thread, no spills,
// no shared memory.

constexpr int CHASERS = 128;  // one-thread blocks, as CHASERS in suite.py
static_assert(CHASERS <= 132, "no more chasers than an H200 has SMs");

// next: the working set; the first 8 bytes of every 128-byte slot hold the byte offset of the
// next slot from `next`. starts, out: byte offsets from `next`, one per chaser.
extern "C" __global__ void __launch_bounds__(1)
pointer_chase_cg(const unsigned long long* __restrict__ next,
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
            "{\n\t.reg .u64 a;\n\tadd.u64 a, %1, %0;\n\tld.global.cg.u64 %0, [a];\n\t}\n"
            : "+l"(offset)
            : "l"(base)
            : "memory");
    }
    out[c] = offset;
}
