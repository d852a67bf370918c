// 02_shared_race: a shared-memory histogram updated with plain read-modify-write.
//
// What is wrong: 256 threads of a block each add 1 to one of 8 shared-memory bins with
// `bins[b] += 1`, a load, an add and a store. Threads of different warps that pick the same bin
// read the same old value and one increment is lost. The counts come out too small, by a
// different amount from run to run.
//
// What the tool reports: `compute-sanitizer --tool racecheck` reports a hazard on shared memory
// between a write and a read (and between two writes) at the line of `bins[b] += 1`, and a summary
// "RACECHECK SUMMARY: N hazards displayed". The fix is `atomicAdd(&bins[b], 1)`.
#include <cstdio>
#include <cuda_runtime.h>

extern "C" __global__ void histogram8(const int* v, int* counts, int n) {
    __shared__ int bins[8];
    if (threadIdx.x < 8) bins[threadIdx.x] = 0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int b = v[i] & 7;
        bins[b] += 1;  // the bug: a racy read-modify-write; atomicAdd(&bins[b], 1) is right
    }
    __syncthreads();
    if (threadIdx.x < 8) atomicAdd(&counts[threadIdx.x], bins[threadIdx.x]);
}

int main() {
    const int n = 1 << 12, threads = 256;
    int h[n];
    for (int i = 0; i < n; ++i) h[i] = i;
    int *v, *counts;
    cudaMalloc(&v, sizeof h);
    cudaMalloc(&counts, 8 * sizeof(int));
    cudaMemcpy(v, h, sizeof h, cudaMemcpyHostToDevice);
    cudaMemset(counts, 0, 8 * sizeof(int));
    histogram8<<<n / threads, threads>>>(v, counts, n);
    cudaDeviceSynchronize();
    int c[8];
    cudaMemcpy(c, counts, sizeof c, cudaMemcpyDeviceToHost);
    std::printf("bin 0: %d (expected %d)\n", c[0], n / 8);
    cudaFree(v);
    cudaFree(counts);
    return 0;
}
