// 06_divergent_barrier: two different barriers in the two arms of a branch.
//
// What is wrong: a block of 128 threads sums 100 valid values. The threads with
// threadIdx.x < valid store their value and wait at one `__syncthreads()`; the other 28 wait at a
// second `__syncthreads()` in the `else` arm. The CUDA programming guide allows a barrier in a
// branch only when the whole block takes the same arm. The last warp (threads 96 to 127) is split
// between the two barrier instructions. On this GPU the two happen to release each other and the
// plain run prints the right sum; the code is still wrong, and another layout of the same idea
// (work after one of the barriers) reads shared memory before it is written.
//
// What the tool reports: `compute-sanitizer --tool synccheck` reports "Barrier error detected.
// Divergent thread(s) in block." or "... in warp." (which, and at which of the two barriers,
// depends on which threads arrive first), 124 errors on the H200, and the launch is aborted.
// (Had the 28 threads simply exited instead of waiting, a barrier waits only for threads that
// have not exited, and synccheck reports nothing.) The fix: every thread reaches one barrier.
#include <cstdio>
#include <cuda_runtime.h>

extern "C" __global__ void partial_sum(const float* x, float* out, int valid) {
    __shared__ float s[128];
    int t = threadIdx.x;
    s[t] = 0.0f;
    if (t < valid) {
        s[t] = x[t];
        __syncthreads();
    } else {
        __syncthreads();  // the bug: a second barrier instruction, in the other arm of the branch
    }
    if (t == 0) {
        float acc = 0.0f;
        for (int k = 0; k < valid; ++k) acc += s[k];
        *out = acc;
    }
}

int main() {
    const int valid = 100;
    float h[128];
    for (int i = 0; i < 128; ++i) h[i] = 1.0f;
    float *x, *out;
    cudaMalloc(&x, sizeof h);
    cudaMalloc(&out, sizeof(float));
    cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice);
    partial_sum<<<1, 128>>>(x, out, valid);
    cudaError_t err = cudaDeviceSynchronize();
    float got = 0.0f;
    cudaMemcpy(&got, out, sizeof got, cudaMemcpyDeviceToHost);
    std::printf("partial_sum: %s, %g (expected %d)\n", cudaGetErrorString(err), got, valid);
    cudaFree(x);
    cudaFree(out);
    return 0;
}
