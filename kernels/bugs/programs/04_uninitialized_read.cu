// 04_uninitialized_read: a kernel that accumulates into an output nobody cleared.
//
// What is wrong: `rowsum` adds each row's sum into y[row] with `y[row] += s`, and the host never
// clears y after `cudaMalloc`, which leaves its contents undefined. On a fresh process the memory
// often happens to hold zeros and the answer looks right; after other work it holds whatever was
// there.
//
// What the tool reports: `compute-sanitizer --tool initcheck` reports an "Uninitialized __global__
// memory read of size 4 bytes" at the line of `y[row] += s`, for each thread that reads y,
// with the address. The fix is `cudaMemset(y, 0, ...)`, or `y[row] = s`.
#include <cstdio>
#include <cuda_runtime.h>

extern "C" __global__ void rowsum(const float* a, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += a[row * cols + c];
    y[row] += s;  // the bug: reads y, which was never written
}

int main() {
    const int rows = 64, cols = 32;
    float *a, *y;
    cudaMalloc(&a, rows * cols * sizeof(float));
    cudaMalloc(&y, rows * sizeof(float));
    cudaMemset(a, 0, rows * cols * sizeof(float));
    // the bug, on the host side: no cudaMemset(y, 0, rows * sizeof(float))
    rowsum<<<1, rows>>>(a, y, rows, cols);
    cudaError_t err = cudaDeviceSynchronize();
    std::printf("rowsum: %s\n", cudaGetErrorString(err));
    cudaFree(a);
    cudaFree(y);
    return 0;
}
