// Puzzle 06, reference solution: read a 32 x 32 tile of a row by row (consecutive
// addresses per warp), write it to out row by row from the transposed tile. The
// tile's rows are padded to 33 floats so that reading a column of it hits 32
// different banks.
#define TILE 32
#define ROWS 8
extern "C" __global__ void transpose_kernel(const float* a, float* out, int m, int n) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;  // column of a
    int y0 = blockIdx.y * TILE;               // first row of a in this tile
    for (int r = threadIdx.y; r < TILE; r += ROWS) {
        int y = y0 + r;
        if (y < m && x < n) tile[r][threadIdx.x] = a[(long long)y * n + x];
    }
    __syncthreads();
    int ox = y0 + threadIdx.x;  // column of out = row of a
    for (int r = threadIdx.y; r < TILE; r += ROWS) {
        int oy = blockIdx.x * TILE + r;  // row of out = column of a
        if (oy < n && ox < m) out[(long long)oy * m + ox] = tile[threadIdx.x][r];
    }
}
