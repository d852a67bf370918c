// 06 sgemm, shape special-cased: right only when m, n and k are multiples of 32
//
// The cheat: the timed shape is 1024^3, so the kernel drops every guard and tail: a block
// whose tile would cross the edge returns, and the k loop stops at the last whole tile.
// At 1024 it is exact fp32; at 1000 the last 8 rows and columns are never written and the
// last 8 terms of every dot product are missing. Dropping guards is also how a generated
// kernel comes to read out of bounds at a size nobody checked.
//
// The harness's answer: `wrong-at-other-shape`. Every version is checked, untimed, at the
// smallest declared shape and at the suite's `check_shapes` (here 1000^3, ragged) before
// any of its cases is timed; wrong there, it is refused at every shape.
//
// Expected bound: a naive 32 x 32 tiled kernel, far from any ceiling; refused before it
// is timed.
// Size constraints: correct only for m, n, k multiples of 32 (that is the cheat); it reads
// and writes only inside the matrices at any size.

constexpr int TILE = 32;

extern "C" __global__ void __launch_bounds__(TILE * TILE)
sgemm(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
      int m, int n, int k) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];
    int whole_m = m / TILE * TILE, whole_n = n / TILE * TILE, whole_k = k / TILE * TILE;
    if ((int)(blockIdx.y * TILE) >= whole_m || (int)(blockIdx.x * TILE) >= whole_n) return;
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < whole_k; t += TILE) {
        as[threadIdx.y][threadIdx.x] = a[(long long)row * k + t + threadIdx.x];
        bs[threadIdx.y][threadIdx.x] = b[(long long)(t + threadIdx.y) * n + col];
        __syncthreads();
        for (int i = 0; i < TILE; ++i) acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
        __syncthreads();
    }
    c[(long long)row * n + col] = acc;
}
