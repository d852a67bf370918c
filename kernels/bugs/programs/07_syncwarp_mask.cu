// 07_syncwarp_mask: a warp barrier whose mask names the wrong threads.
//
// What is wrong: all 32 lanes of a warp store a value to shared memory and call
// `__syncwarp(0x0000ffff)`, a mask that names lanes 0 to 15 only. A lane that calls __syncwarp must
// be in the mask, and every lane the mask names must call it with the same mask; lanes 16 to 31
// break the first rule, so the barrier's participant count is wrong and lane 0 may read s[16..31]
// before those lanes wrote them.
//
// What the tool reports: `compute-sanitizer --tool synccheck` reports a "Barrier error detected"
// at the line of the __syncwarp, "Invalid arguments", for the lanes whose own bit is missing from
// the mask. The fix is `__syncwarp()` (all lanes) or a mask built from the lanes that call it.
#include <cstdio>
#include <cuda_runtime.h>

extern "C" __global__ void warp_sum(const float* x, float* out) {
    __shared__ float s[32];
    int lane = threadIdx.x;
    s[lane] = x[lane];
    __syncwarp(0x0000ffff);  // the bug: 32 lanes call it, the mask names 16
    if (lane == 0) {
        float acc = 0.0f;
        for (int k = 0; k < 32; ++k) acc += s[k];
        *out = acc;
    }
}

int main() {
    float h[32];
    for (int i = 0; i < 32; ++i) h[i] = 1.0f;
    float *x, *out;
    cudaMalloc(&x, sizeof h);
    cudaMalloc(&out, sizeof(float));
    cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice);
    warp_sum<<<1, 32>>>(x, out);
    cudaError_t err = cudaDeviceSynchronize();
    float got = 0.0f;
    cudaMemcpy(&got, out, sizeof got, cudaMemcpyDeviceToHost);
    std::printf("warp_sum: %s, %g (expected 32)\n", cudaGetErrorString(err), got);
    cudaFree(x);
    cudaFree(out);
    return 0;
}
