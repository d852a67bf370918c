// 06_divergent_barrier: a barrier that only some of the block's threads reach.
//
// What is wrong: a block of 128 threads sums 100 valid values. The kernel puts `__syncthreads()`
// inside `if (threadIdx.x < valid)`, so 100 threads arrive at the barrier and 28 never do; the
// last warp (threads 96 to 127) is split, 4 of its threads at the barrier and 28 past it. The
// barrier waits for a count of threads that is not the count arriving. The result is undefined:
// it can hang, pass by accident, or read shared memory before it is written.
//
// What the tool reports: `compute-sanitizer --tool synccheck` reports a "Barrier error detected"
// at the line of the barrier, "Divergent thread(s) in block", for the block and the warp whose
// threads disagree. The fix: every thread reaches every barrier; guard the work, not the barrier.
#include <cstdio>
#include <cuda_runtime.h>

extern "C" __global__ void partial_sum(const float* x, float* out, int valid) {
    __shared__ float s[128];
    int t = threadIdx.x;
    s[t] = 0.0f;
    if (t < valid) {
        s[t] = x[t];
        __syncthreads();  // the bug: inside a branch that 28 of the 128 threads skip
        if (t == 0) {
            float acc = 0.0f;
            for (int k = 0; k < valid; ++k) acc += s[k];
            *out = acc;
        }
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
