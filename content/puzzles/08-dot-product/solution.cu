// Puzzle 08, reference solution: each thread sums a strided slice (consecutive
// addresses across the block on every trip), then the block adds its 1024 partial
// sums: warp shuffles within each warp, shared memory across the 32 warps.
__device__ float warp_sum(float v) {
    for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
    return v;
}

extern "C" __global__ void dot_kernel(const float* a, const float* b, float* out, int n) {
    __shared__ float warps[32];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) acc += a[i] * b[i];
    acc = warp_sum(acc);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warps[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        float v = lane < (int)(blockDim.x >> 5) ? warps[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) out[0] = v;
    }
}
