// 02 the same empty kernels, captured once into a CUDA graph and replayed: launch cost without the host
//
// Idea against 01: the `launches` launches of 01 (same kernel, same one store each) are
// recorded once per shape with stream capture (CuPy's Stream.begin_capture / end_capture
// on a side stream) into one CUDA graph; each timed launch is one graph launch on the
// harness's stream. The host makes one call instead of `launches`, the driver has already
// validated every node, and the GPU walks the dependency chain by itself, so the time per
// kernel is what the GPU needs to finish one grid and start the next.
// The store is the check, as in 01: a node missing from the graph leaves its slot poisoned.
//
// Expected bound: the GPU's kernel-to-kernel turnaround inside a graph. Estimate: about
// 1 us a kernel at launches = 256 (a launch, its completion and the dependency release of
// the next node, each a few hundred nanoseconds); at launches = 1 the one graph launch
// from the host dominates, a few microseconds, so the figure per kernel falls as the graph
// grows. Against 01 the estimate is a several-fold gain per kernel at 256.
// Resources (nvcc -arch=sm_90a, -Xptxas -v): 10 registers, no shared memory, no spills.
//
// Size constraints: as 01: grid = 1 block of 32 threads, 0 <= k < launches; one graph
// per shape and output buffer, captured on the first launch (the harness's check, not a
// timed repetition) and kept for the run.

constexpr int BLOCK = 32;
static_assert(BLOCK % 32 == 0, "a block is a whole number of warps");

extern "C" __global__ void __launch_bounds__(BLOCK)
graph_replay(const int* __restrict__ seed, int* __restrict__ out, int k, int launches) {
    if (threadIdx.x == 0 && blockIdx.x == 0 && k >= 0 && k < launches) {
        out[k] = seed[0] + k;
    }
}
