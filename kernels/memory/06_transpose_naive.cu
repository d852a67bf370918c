// 06 transpose, naive: read rows, write columns, one element per thread
//
// Idea: out[c][r] = in[r][c] for a rows x cols float32 matrix (row-major in, row-major
// out of shape cols x rows). A warp's 32 threads take 32 consecutive c of one row r: the
// load is one 128-byte line, but the 32 stores land in 32 different rows of `out`, rows*4
// bytes apart, so each store instruction touches 32 separate 32-byte sectors to write
// 128 useful bytes. The 8 rows of a block fill each sector together, so the L2 may merge
// the partial writes before they reach memory; how much it manages is what the
// measurement tells.
//
// Expected bound: memory, with the stores scattered. Bytes = 4*rows*cols read + the same
// written: 512 MiB at 8192 x 8192, 0.11 ms at the datasheet's 4.8 TB/s (estimate). If
// every scattered store cost a full sector round trip, the writes alone would move 8x
// their bytes; the estimate is somewhere between a copy and that.
//
// Size constraints: rows a multiple of 8 and cols a multiple of 32 (no tail guard);
// grid = (cols / 32, rows / 8), block = (32, 8).

constexpr int TILE_X = 32;
constexpr int TILE_Y = 8;
static_assert(TILE_X == 32, "one warp spans one row segment");

extern "C" __global__ void __launch_bounds__(TILE_X * TILE_Y)
transpose_naive(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    long long c = (long long)blockIdx.x * TILE_X + threadIdx.x;
    long long r = (long long)blockIdx.y * TILE_Y + threadIdx.y;
    out[c * rows + r] = in[r * cols + c];
}
