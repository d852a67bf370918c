// 01 copy then compute on one stream: host-to-device copy and kernel, one after the other
//
// Idea: the usual shape of an offload. n = 2^24 floats (64 MiB) sit in pinned host memory;
// the suite copies them to the device with cudaMemcpyAsync and runs this kernel on them
// (2048 dependent FMAs an element, y = y * A + B). The data is split into `chunks` equal
// parts, each copied then computed, but everything is on the harness's one stream, so each
// operation waits for the one before: the copy engine idles while the SMs compute and the
// SMs idle while the copy runs, whatever the number of chunks. This is the baseline 02
// overlaps.
//
// Expected bound: copy time + compute time. Estimates: the copy, 64 MiB over PCIe Gen5 x16
// (64 GB/s a direction on paper, about 50 GB/s in practice for pinned memory), about
// 1.3 ms; the kernel, 2^24 x 2048 FMAs = 3.4e10 at 132 SMs x 128 lanes x 1.98 GHz
// = 3.3e13 FMA/s, about 1.0 ms. Together about 2.4 ms at every chunk count; the figure
// is the host-to-device bytes over the whole time, about 28 GB/s.
// Resources (nvcc -arch=sm_90a, -Xptxas -v): 10 registers, no shared memory, no spills.
//
// Size constraints: block = 256 threads (BLOCK); the kernel covers [begin, end) of x and
// out, one element a thread (the tail guarded), grid = ceil((end - begin) / 256) blocks;
// iters a multiple of 8 (UNROLL), else nothing is written and the check fails. The suite's
// n is a multiple of every chunk count it uses.

constexpr int BLOCK = 256;
constexpr int UNROLL = 8;  // iters must be a multiple of it
static_assert(BLOCK % 32 == 0, "a block is a whole number of warps");

// y <- y * A + B, iters times: A = 1 - 2^-11 and B = 2^-11 are exact in fp32; after
// 2048 steps y = A^2048 x + (1 - A^2048), about 0.37 x + 0.63.
constexpr float A = 1.0f - 1.0f / 2048.0f;
constexpr float B = 1.0f / 2048.0f;

extern "C" __global__ void __launch_bounds__(BLOCK)
serial(const float* __restrict__ x, float* __restrict__ out, long long begin, long long end,
      int iters) {
    const long long i = begin + (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i >= end || iters % UNROLL != 0) {
        return;
    }
    float y = x[i];
#pragma unroll UNROLL
    for (int k = 0; k < iters; ++k) {
        y = fmaf(y, A, B);
    }
    out[i] = y;
}
