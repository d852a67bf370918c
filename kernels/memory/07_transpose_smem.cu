// 07 transpose, through a shared-memory tile: both global accesses coalesced
//
// Idea against 06: a block stages a 32 x 32 tile in shared memory. It reads the tile row
// by row (coalesced, as in 06), waits at a barrier, then writes the transposed tile row by
// row too: thread x of a warp writes out[c0 + y][r0 + x], consecutive addresses, taking
// the element tile[x][y] from shared memory. Global traffic becomes that of a copy.
// The catch: tile[x][y] for x = 0..31 is a column of a 32-float-wide array, 128 bytes
// between neighbours, so all 32 reads fall in the same shared-memory bank and are served
// one at a time (a 32-way bank conflict). 08 removes it.
//
// Expected bound: memory if the bank conflicts hide behind the loads. Bytes = 8*rows*cols,
// 0.11 ms at 8192 x 8192 by the datasheet (estimate). Each warp's transposed read costs 32
// shared-memory wavefronts instead of 1: 4 such reads per thread for 4 elements.
//
// Size constraints: rows and cols multiples of 32 (no tail guard); block = (32, 8), each
// thread moving 4 elements; grid = (cols / 32, rows / 32).

constexpr int TILE = 32;
constexpr int ROWS_PER_PASS = 8;
static_assert(TILE % ROWS_PER_PASS == 0, "the block covers the tile in whole passes");

extern "C" __global__ void __launch_bounds__(TILE * ROWS_PER_PASS)
transpose_smem(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TILE][TILE];
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
