// 05 sgemm, lower precision than asked: A and B rounded to bf16 as they are loaded
//
// The cheat: C = A B in fp32 asked, bf16 inputs used (as a bf16 tensor-core kernel
// would, at many times the fp32 rate). Each input keeps 8 bits of mantissa instead of 24,
// so each product is off by up to about 2^-8 relative; over K = 1024 terms of random sign
// the errors add like a random walk, as the terms do, and C ends up about 2^-9 off in
// norm. A harness that accepts 1e-2 lets it through.
//
// The harness's answer: `above-tolerance`. The reference is float64 and the fp32 case's
// tolerance is 1e-5 (fp32 accumulation over K = 1024 lands near 1e-6); bf16 inputs land
// near 2e-3.
//
// Expected bound: this naive 32 x 32 tiled kernel is far from any ceiling; refused before
// it is timed.
// Size constraints: any m, n, k >= 1 (tiles are guarded).

constexpr int TILE = 32;

__device__ __forceinline__ float to_bf16(float v) {
    unsigned u = __float_as_uint(v);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;  // round to nearest even
    return __uint_as_float(u);
}

extern "C" __global__ void __launch_bounds__(TILE * TILE)
sgemm(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
      int m, int n, int k) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < k; t += TILE) {
        int ka = t + threadIdx.x, kb = t + threadIdx.y;
        as[threadIdx.y][threadIdx.x] = (row < m && ka < k) ? to_bf16(a[(long long)row * k + ka]) : 0.0f;
        bs[threadIdx.y][threadIdx.x] = (kb < k && col < n) ? to_bf16(b[(long long)kb * n + col]) : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) c[(long long)row * n + col] = acc;
}
