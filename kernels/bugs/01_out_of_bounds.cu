// 01_out_of_bounds: a scale kernel with no bounds check.
//
// What is wrong: n = 1000 elements are launched as 4 blocks of 256 threads, 1024 threads in all,
// and the kernel writes y[i] for every thread. The last 24 threads of block 3 write past the end
// of the 4,000-byte allocation. Nothing crashes without the tool: the write lands in padding the
// allocator rounded up to, and the host sees a correct y.
//
// What the tool reports: `compute-sanitizer --tool memcheck` reports an "Invalid __global__ write
// of size 4 bytes" at the store's line, for thread (232,0,0) of block (3,0,0) first, with an
// address "0 bytes after the nearest allocation" of size 4,000 bytes, then one report for each of
// the other 23 threads.
#include <cstdio>
#include <cuda_runtime.h>

extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = a * x[i];  // the bug: no `if (i < n)`; x[i] is read out of bounds too
}

int main() {
    const int n = 1000, threads = 256, blocks = (n + threads - 1) / threads;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    cudaMemset(x, 0, n * sizeof(float));
    scale<<<blocks, threads>>>(x, y, 2.0f, n);
    cudaError_t err = cudaDeviceSynchronize();
    std::printf("scale: %s\n", cudaGetErrorString(err));
    cudaFree(x);
    cudaFree(y);
    return 0;
}
