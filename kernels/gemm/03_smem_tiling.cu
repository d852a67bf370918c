// 03 shared-memory tiling: each block stages 32x32 tiles of A and B on chip
//
// Idea against 02: the block's 1024 threads cooperate. For each step of 32
// along K, every thread copies one element of A and one of B into shared
// memory, the block synchronises, and then every thread runs 32 FMAs out of
// shared memory. Each value fetched from device memory is now used by 32
// threads instead of one, so global traffic drops 32-fold (A and B are each
// read N/32 and M/32 times instead of N and M times).
//
// Expected bound (estimate), M = N = K = 4096 on an H200: the bottleneck moves
// on chip. The inner loop still issues two shared-memory loads per FMA (As is
// a broadcast, Bs is conflict-free), and shared memory serves about one
// warp-wide 4-byte load per cycle per SM, so at best 1/8 of the ~67 TFLOP/s
// fp32 peak; with two barriers per 32-step tile, ~6-8 TFLOP/s (~12-15% of
// cuBLAS).
//
// Constraints: M, N and K multiples of 32 (no edge handling: every tile is
// full); 32-bit indices (M*K, K*N, M*N below 2^31).

constexpr int TILE = 32;  // tile edge and block edge
static_assert(TILE * TILE <= 1024, "one thread per tile element: at most 1024 threads");
static_assert(TILE == 32, "a warp must cover one row of the tile so Bs reads are conflict-free");

extern "C" __global__ void __launch_bounds__(TILE * TILE)
sgemm_smem_tiling(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    const int tx = threadIdx.x;  // column inside the tile
    const int ty = threadIdx.y;  // row inside the tile
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = A[row * K + k0 + tx];
        Bs[ty][tx] = B[(k0 + ty) * N + col];
        __syncthreads();  // the tiles are complete before anyone reads them
#pragma unroll
        for (int k = 0; k < TILE; ++k) {
            acc += As[ty][k] * Bs[k][tx];
        }
        __syncthreads();  // nobody overwrites a tile another thread still reads
    }
    C[row * N + col] = acc;
}
