// 01_out_of_bounds: a kernel that writes a ramp with no bounds check.
//
// What is wrong: n = 1000 elements are launched as 4 blocks of 256 threads, 1024 threads in all,
// and the kernel writes y[i] for every thread. The last 24 threads of block 3 (threads 232 to 255,
// global indices 1000 to 1023) write past the end of the 4,000-byte allocation. Nothing crashes
// without the tool: the writes land in padding the allocator rounded the buffer up to, and the
// host sees a correct y.
//
// What the tool reports: `compute-sanitizer --tool memcheck` reports an "Invalid __global__ write
// of size 4 bytes" at the store's line, one report for each of the 24 threads of block (3,0,0)
// from thread (232,0,0) on, each with an address some bytes "after the nearest allocation" of
// size 4,000 bytes ("1 bytes after" it for thread 232, whose write starts just past its end).
#include <cstdio>
#include <cuda_runtime.h>

extern "C" __global__ void ramp(float* y, float step, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = step * i;  // the bug: no `if (i < n)`
}

int main() {
    const int n = 1000, threads = 256, blocks = (n + threads - 1) / threads;
    float* y;
    cudaMalloc(&y, n * sizeof(float));
    ramp<<<blocks, threads>>>(y, 0.5f, n);
    cudaError_t err = cudaDeviceSynchronize();
    float last = 0.0f;
    cudaMemcpy(&last, y + n - 1, sizeof last, cudaMemcpyDeviceToHost);
    std::printf("ramp: %s, y[%d] = %g (expected %g)\n", cudaGetErrorString(err), n - 1, last,
                0.5f * (n - 1));
    cudaFree(y);
    return 0;
}
