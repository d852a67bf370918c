// 05_misaligned_vector_load: a 16-byte vector load from an address that is not a multiple of 16.
//
// What is wrong: the kernel reads four floats at a time through `float4`, which compiles to one
// 128-bit load (LDG.E.128) that needs a 16-byte-aligned address. The host passes `x + 1`, a view
// that starts one float into the buffer, 4 bytes past an aligned address. The hardware faults;
// without the tool the launch fails with "misaligned address" and nothing says where.
//
// What the tool reports: `compute-sanitizer --tool memcheck` reports an "Invalid __global__ read
// of size 16 bytes" at the line of the load, for the first thread that faulted, with "Address ...
// is misaligned". A cuda-gdb session on this program stops at the same line (CUDA_EXCEPTION_6,
// Warp Misaligned Address).
#include <cstdio>
#include <cuda_runtime.h>

extern "C" __global__ void sum4(const float* x, float* y, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 v = reinterpret_cast<const float4*>(x)[i];  // the bug: x is only 4-byte aligned
    y[i] = v.x + v.y + v.z + v.w;
}

int main() {
    const int n = 1024, n4 = (n - 4) / 4;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n4 * sizeof(float));
    cudaMemset(x, 0, n * sizeof(float));
    sum4<<<(n4 + 127) / 128, 128>>>(x + 1, y, n4);  // x + 1: a view one float into the buffer
    cudaError_t err = cudaDeviceSynchronize();
    std::printf("sum4: %s\n", cudaGetErrorString(err));
    cudaFree(x);
    cudaFree(y);
    return 0;
}
