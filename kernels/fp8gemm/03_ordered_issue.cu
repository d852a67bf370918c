// 03 block-scaled FP8 GEMM, consumers take turns: one promotes while the other's MMAs run
//
// Idea against 01: 01's two consumer warpgroups read the same stage at the same moment, so
// they issue their wgmma together, their groups finish together, and they promote together,
// while the tensor cores have nothing queued (a promotion is ~128 issue cycles against ~512
// cycles of MMA for both consumers' share of a k block: up to a fifth of the time, an
// estimate). Here they take turns through two named barriers, as CUTLASS's ping-pong schedule
// orders its warpgroups: consumer 0 issues its four wgmma of block k, hands the turn over;
// consumer 1 issues its four, hands it back; and so on. If the tensor cores serve the groups
// in the order they were issued, consumer 0's group finishes half a block before consumer
// 1's, and consumer 0 promotes while consumer 1's MMAs run, then queues block k + 1 behind
// them: the tensor cores never wait for a promotion. Tiles, ring, scales, epilogue: 01's;
// this file compiles 01's source with its turn code switched on (FP8_TURNS).
//
// Expected bound (estimate): if 01 loses its promotion time as a bubble, up to ~1.2x 01; if
// the hardware already interleaves the two groups so that one finishes early, or the limit is
// elsewhere (L2, see 02), within a few percent of 01.
//
// Resources (nvcc 13.0, -gencode arch=compute_90a,code=sm_90a --resource-usage): 168
// registers at compile time (232 for the consumers after setmaxnreg), no spills; 16 named
// barriers reserved (the turn barrier's id is a register); 200,800 bytes of dynamic shared
// memory, as 01.
//
// Constraints: as 01 (M, N, K multiples of 128; K-major e4m3 A and B; sm_90a).

#define FP8_TURNS 1
#include "01_block_scaled.cu"
