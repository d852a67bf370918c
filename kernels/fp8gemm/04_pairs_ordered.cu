// 04 block-scaled FP8 GEMM: CTA pairs sharing B (02) and consumers taking turns (03)
//
// Idea against 02 and 03: the two changes attack different limits, the bytes each SM pulls
// from L2 (02: B tiles multicast to two SMs, 24 KiB per k block instead of 32) and the
// tensor cores' idle time while both consumers promote at once (03: the consumers issue their
// wgmma in turns, so one promotes while the other's group runs). If each limit binds part of
// the time, together they gain more than either; this file compiles 02's source with 03's
// turn code switched on (FP8_TURNS).
//
// Expected bound (estimate): the better of 02 and 03, times up to the gain of the other.
//
// Resources (nvcc 13.0, -gencode arch=compute_90a,code=sm_90a --resource-usage): 168
// registers at compile time (232 for the consumers after setmaxnreg), no spills; 16 named
// barriers reserved; 200,800 bytes of dynamic shared memory, as 01.
//
// Constraints: as 02 (M a multiple of 256, N and K of 128; K-major e4m3 A and B; sm_90a; an
// even grid).

#define FP8_TURNS 1
#include "02_cluster_multicast.cu"
