// 02 no ping-pong: 01 with the turns removed, to measure what the ping-pong buys
//
// Idea against 01: the same kernel (this file compiles 01's source) with FA3_PINGPONG = 0: the
// two consumer warpgroups no longer wait for each other at named barriers 1 and 2 but issue
// their GEMMs as soon as their K and V tiles have landed and their previous softmax is done.
// Each still overlaps its own softmax of tile j with its own P V of tile j - 1. Nothing else
// changes: tiles, ring, registers, epilogue.
//
// Expected bound (estimate), headline B = 8, H = 16, S = 4096, D = 128: the warpgroups start
// in step and stay near it, so both tend to reach their softmax at the same time and both
// wait for their GEMMs together; the tensor cores idle for part of every softmax that the
// other warpgroup's products do not cover. Free-running warpgroups drift apart on their own
// to some degree, so the loss is less than the full exponential time: estimate 5-15% slower
// than 01 (~500-600 TFLOP/s).
//
// Resources (nvcc 13.0 -gencode arch=compute_90a,code=sm_90a --resource-usage): as 01, 168
// registers at compile time for every entry, no spills, the same shared memory.
//
// Constraints: as 01.
// Measured variant: FA3_STAGES_D128 = 2, FA3_PINGPONG = 0.

#define FA3_STAGES_D128 2
#define FA3_PINGPONG 0
#include "01_wgmma_pingpong.cu"
