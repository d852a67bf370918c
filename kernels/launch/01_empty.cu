// 01 empty kernel, launched back to back: what one launch costs when the kernel does nothing
//
// Idea: one warp, one store. Launch k writes out[k] = seed + k from its first thread and
// nothing else, so the kernel body is a few nanoseconds and the time between the harness's
// two events is launch cost alone. The suite launches it `launches` times in a row on one
// stream from Python (CuPy's RawKernel call, then cuLaunchKernel), so the figure per item is
// the cost of one launch as a program sees it: the host-side call (argument packing in
// Python, the driver's work) and the GPU's work to start and retire a grid. When the host
// is slower than the GPU, the GPU waits for each launch and the host side is what is
// measured; 02 removes the host from the loop to show the rest.
// The store is the check: every slot of out written once, by the right launch.
//
// Expected bound: the host's launch rate. Estimate: a few microseconds a launch through
// CuPy from Python (a Python call, argument packing and cuLaunchKernel, each of order a
// microsecond), so 3 to 8 us a launch at launches = 16 and 256; at launches = 1 the
// figure also holds the gap between the start event and the first kernel, so a little
// more. The GPU-side cost of an empty grid, under a microsecond, is hidden behind it.
// Resources (nvcc -arch=sm_90a, -Xptxas -v): 10 registers, no shared memory, no spills.
//
// Size constraints: grid = 1 block of 32 threads; 0 <= k < launches, else nothing is
// written (the check then fails); `out` holds `launches` ints, `seed` one int.

constexpr int BLOCK = 32;
static_assert(BLOCK % 32 == 0, "a block is a whole number of warps");

extern "C" __global__ void __launch_bounds__(BLOCK)
empty(const int* __restrict__ seed, int* __restrict__ out, int k, int launches) {
    if (threadIdx.x == 0 && blockIdx.x == 0 && k >= 0 && k < launches) {
        out[k] = seed[0] + k;
    }
}
