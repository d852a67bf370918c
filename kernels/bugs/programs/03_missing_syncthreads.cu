// 03_missing_syncthreads: reverse each block of an array through shared memory, with no barrier
// between the writes and the reads.
//
// What is wrong: thread t stores x[i] into tile[t], then at once reads tile[255 - t], a slot another
// warp writes. Without `__syncthreads()` between the two, the read can run before that warp's write
// and return whatever the slot held: the output is wrong in places, differently from run to run.
//
// What the tool reports: `compute-sanitizer --tool racecheck` reports hazards on shared memory
// between the write `tile[threadIdx.x] = ...` and the read `tile[blockDim.x - 1 - threadIdx.x]`,
// naming both lines, and a summary of the hazards. The fix is one `__syncthreads()` between them.
#include <cstdio>
#include <cuda_runtime.h>

extern "C" __global__ void reverse_blocks(const float* x, float* y) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = x[i];
    // the bug: __syncthreads() belongs here
    y[i] = tile[blockDim.x - 1 - threadIdx.x];
}

int main() {
    const int n = 1 << 12, threads = 256;
    float h[n];
    for (int i = 0; i < n; ++i) h[i] = float(i);
    float *x, *y;
    cudaMalloc(&x, sizeof h);
    cudaMalloc(&y, sizeof h);
    cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice);
    reverse_blocks<<<n / threads, threads>>>(x, y);
    cudaDeviceSynchronize();
    cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int i = 0; i < n; ++i) wrong += h[i] != float((i / threads) * threads + threads - 1 - i % threads);
    std::printf("reverse_blocks: %d of %d wrong\n", wrong, n);
    cudaFree(x);
    cudaFree(y);
    return 0;
}
