// 08 transpose, padded tile: one unused column removes the shared-memory bank conflicts
//
// Idea against 07: declare the tile 32 x 33. Element [x][y] then sits at x * 33 + y
// words, so the column read tile[x][y] for x = 0..31 steps 33 words between threads and
// lands in 32 different banks (33 mod 32 = 1): one shared-memory wavefront per warp read
// instead of 32. The row-wise writes into the tile stay conflict-free. Cost: 32 * 4 bytes
// more shared memory per block (4.1 KiB instead of 4 KiB).
//
// Expected bound: memory, as a copy. Bytes = 8*rows*cols, 0.11 ms at 8192 x 8192 by the
// datasheet's 4.8 TB/s (estimate). The estimate is a time near 02's copy of the same bytes
// if the conflicts were what held 07 back.
//
// Size constraints: as 07: rows and cols multiples of 32; block = (32, 8);
// grid = (cols / 32, rows / 32).

constexpr int TILE = 32;
constexpr int ROWS_PER_PASS = 8;
constexpr int PAD = 1;  // one word: 33 mod 32 = 1 spreads a column over all 32 banks
static_assert(TILE % ROWS_PER_PASS == 0, "the block covers the tile in whole passes");
static_assert((TILE + PAD) % 32 == 1, "the padded row length must be odd in banks");

extern "C" __global__ void __launch_bounds__(TILE * ROWS_PER_PASS)
transpose_padded(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TILE][TILE + PAD];
    long long r0 = (long long)blockIdx.y * TILE;
    long long c0 = (long long)blockIdx.x * TILE;
#pragma unroll
    for (int y = threadIdx.y; y < TILE; y += ROWS_PER_PASS) {
        tile[y][threadIdx.x] = in[(r0 + y) * cols + c0 + threadIdx.x];
    }
    __syncthreads();
#pragma unroll
    for (int y = threadIdx.y; y < TILE; y += ROWS_PER_PASS) {
        out[(c0 + y) * rows + r0 + threadIdx.x] = tile[threadIdx.x][y];
    }
}
