// 01 naive: one thread per element of C, threads of a warp walk down a column
//
// Idea: the textbook loop nest put on the GPU as is. Thread (x, y) of the grid
// owns C[row][col] with row taken from the x index, so the 32 threads of a
// warp hold 32 consecutive rows of one column. Every step of the K loop reads
// A[row][k] for 32 different rows (32 separate 128-byte lines for 4 useful
// bytes each) and B[k][col] at one address (a broadcast). Nothing is reused
// on purpose: whatever reuse happens is the L1 cache's doing.
//
// Expected bound (estimate), M = N = K = 4096 on an H200: 2*4096^3 = 137 GFLOP;
// the datasheet's ~67 TFLOP/s of fp32 gives a 2.0 ms floor, and the minimum
// traffic (A, B read once, C written once: 3 * 64 MiB = 201 MB at ~4.8 TB/s)
// 0.04 ms, so the operation is compute-bound by a factor of ~50. This kernel
// is bound by the L1 instead: each warp-wide load of A touches 32 lines, so
// the L1 serves ~32 tag look-ups for 32 FMAs, about one FMA per cycle per SM
// instead of 128: ~132 SMs * 1.98 GHz * 2 FLOP ~ 0.5 TFLOP/s, under 1% of peak.
//
// Constraints: none on M, N, K (threads past the edge return early); indices
// are 32-bit, so M*K, K*N and M*N must stay below 2^31.

constexpr int TILE = 32;  // the block is TILE x TILE threads
static_assert(TILE * TILE <= 1024, "a block holds at most 1024 threads");

extern "C" __global__ void __launch_bounds__(TILE * TILE)
sgemm_naive(const float* A, const float* B, float* C, int M, int N, int K) {
    const int row = blockIdx.x * TILE + threadIdx.x;  // x -> row: uncoalesced on purpose
    const int col = blockIdx.y * TILE + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += A[row * K + k] * B[k * N + col];
    }
    C[row * N + col] = acc;
}
