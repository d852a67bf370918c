// Puzzle 10, reference solution: the 32 threads of a warp read 32 consecutive
// columns of one row (one 128-byte line); the block's 8 warps walk down the rows
// 8 apart, and the 8 partial sums of each column are added in shared memory.
#define COLS 32
#define ROWS 8
extern "C" __global__ void colsum_kernel(const float* a, float* out, int m, int n) {
    __shared__ float part[ROWS][COLS + 1];
    int j = blockIdx.x * COLS + threadIdx.x;
    float acc = 0.0f;
    if (j < n) {
        for (int i = threadIdx.y; i < m; i += ROWS) acc += a[(long long)i * n + j];
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < n) {
        float s = 0.0f;
#pragma unroll
        for (int r = 0; r < ROWS; ++r) s += part[r][threadIdx.x];
        out[j] = s;
    }
}
