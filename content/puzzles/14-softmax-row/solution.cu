// Puzzle 14, reference solution: three passes over the row, all from one block:
// the maximum (a block reduction), the sum of exp(x - max) (a second reduction),
// then each output. Subtracting the maximum keeps every exponent at or below 0.
__device__ float warp_max(float v) {
    for (int d = 16; d > 0; d >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, d));
    return v;
}

__device__ float warp_sum(float v) {
    for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
}

// Every thread gets the block's result; `scratch` holds one value per warp.
__device__ float block_reduce(float v, float* scratch, bool is_max) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float neutral = is_max ? __int_as_float(0xff800000) : 0.0f;  // -inf or 0
    v = lane < warps ? scratch[lane] : neutral;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads();  // scratch is reused by the next reduction
    return v;
}

extern "C" __global__ void softmax_kernel(const float* x, float* out, int rows, int cols) {
    __shared__ float scratch[32];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* orow = out + (long long)blockIdx.x * cols;
    float mx = __int_as_float(0xff800000);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) mx = fmaxf(mx, xr[j]);
    mx = block_reduce(mx, scratch, true);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) sum += expf(xr[j] - mx);
    sum = block_reduce(sum, scratch, false);
    float inv = 1.0f / sum;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) orow[j] = expf(xr[j] - mx) * inv;
}
