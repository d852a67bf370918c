// Puzzle 09, reference solution: scan within each warp with shuffles (5 steps), scan
// the 32 warp totals the same way in warp 0, then add to each warp the total of the
// warps before it.
__device__ float warp_scan(float v, int lane) {
    for (int d = 1; d < 32; d <<= 1) {
        float u = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += u;
    }
    return v;
}

extern "C" __global__ void scan_kernel(const float* a, float* out, int rows) {
    __shared__ float totals[32];
    long long base = (long long)blockIdx.x * 1024;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float v = warp_scan(a[base + threadIdx.x], lane);
    if (lane == 31) totals[warp] = v;
    __syncthreads();
    if (warp == 0) totals[lane] = warp_scan(totals[lane], lane);
    __syncthreads();
    if (warp > 0) v += totals[warp - 1];
    out[base + threadIdx.x] = v;
}
