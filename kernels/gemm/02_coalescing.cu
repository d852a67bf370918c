// 02 global-memory coalescing: threads of a warp take consecutive columns
//
// Idea against 01: the same arithmetic, but the fast thread index x now picks
// the column. The 32 threads of a warp share one row of C, so each step of the
// K loop reads A[row][k] once for the whole warp (a broadcast) and B[k][col]
// as 32 consecutive floats (one 128-byte line), and the final stores of C are
// one line per warp instead of 32. The L1 now sees 2 look-ups per 32 FMAs
// instead of ~33.
//
// Expected bound (estimate), M = N = K = 4096 on an H200: still no reuse by
// design, so every FMA needs its own two load instructions. An SM issues about
// one warp-wide load per cycle but four warp-wide FMAs, so load issue caps the
// kernel near 1/8 of the ~67 TFLOP/s fp32 peak (~8 TFLOP/s); latency with no
// independent work in flight keeps it lower, ~4-6 TFLOP/s, or ~10% of cuBLAS.
//
// Constraints: none on M, N, K (threads past the edge return early); indices
// are 32-bit, so M*K, K*N and M*N must stay below 2^31.

constexpr int TILE = 32;  // the block is TILE x TILE threads
static_assert(TILE * TILE <= 1024, "a block holds at most 1024 threads");
static_assert(TILE == 32, "one warp must span one row of the block for coalescing");

extern "C" __global__ void __launch_bounds__(TILE * TILE)
sgemm_coalescing(const float* A, const float* B, float* C, int M, int N, int K) {
    const int col = blockIdx.x * TILE + threadIdx.x;  // x -> column: coalesced
    const int row = blockIdx.y * TILE + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += A[row * K + k] * B[k * N + col];
    }
    C[row * N + col] = acc;
}
