// Puzzle 04, reference solution: x picks the column, y the row; row-major means the
// flat index is row * n + column, and a warp's 16 consecutive x values write
// consecutive addresses.
extern "C" __global__ void outer_add_kernel(const float* a, const float* b, float* out, int m,
                                            int n) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < m && j < n) out[(long long)i * n + j] = a[i] + b[j];
}
