// Puzzle 11, reference solution: shared-memory tiling. Each block stages a 16 x 16
// tile of a and of b per step along k, so each element loaded from global memory is
// used 16 times; tiles past the edges are filled with zeros, which add nothing.
#define TILE 16
extern "C" __global__ void matmul_kernel(const float* a, const float* b, float* c, int m, int n,
                                         int k) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < k; k0 += TILE) {
        as[ty][tx] = (row < m && k0 + tx < k) ? a[(long long)row * k + k0 + tx] : 0.0f;
        bs[ty][tx] = (k0 + ty < k && col < n) ? b[(long long)(k0 + ty) * n + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += as[ty][kk] * bs[kk][tx];
        __syncthreads();
    }
    if (row < m && col < n) c[(long long)row * n + col] = acc;
}
