// 05 2D block tiling: each thread computes an 8x8 square of results
//
// Idea against 04: make the per-thread tile square. A thread now owns TM x TN
// = 8x8 results; for each step of k it loads 8 values of A and 8 of B into
// registers and does their outer product, 64 FMAs for 16 shared loads (0.25
// loads per FMA, against 04's 1.1). The block tile grows to 128x128 with 256
// threads, so each element fetched from device memory feeds 128 FMAs.
//
// Expected bound (estimate), M = N = K = 4096 on an H200: arithmetic intensity
// against shared memory is 4x 04's, so FMA issue starts to matter. The reads
// of Bs still clash: 16 threads read 8-float runs 32 bytes apart, a 4-way bank
// conflict. About 2x over 04: ~28-32 TFLOP/s, ~60% of cuBLAS (estimate).
//
// Constraints: M and N multiples of 128, K a multiple of 8 (full tiles only);
// 32-bit indices (M*K, K*N, M*N below 2^31).

constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 8;
constexpr int TM = 8;
constexpr int TN = 8;
constexpr int THREADS = (BM / TM) * (BN / TN);

static_assert(THREADS <= 1024, "a block holds at most 1024 threads");
static_assert((BM * BK) % THREADS == 0, "every thread copies the same number of A elements");
static_assert((BN * BK) % THREADS == 0, "every thread copies the same number of B elements");
static_assert(THREADS % BK == 0, "the A copy advances whole rows per pass");
static_assert(THREADS % BN == 0, "the B copy advances whole rows per pass");

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_blocktiling_2d(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[BM * BK];  // row-major BM x BK
    __shared__ float Bs[BK * BN];  // row-major BK x BN

    const int tid = threadIdx.x;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    // This thread's 8x8 square: rows thread_row*TM.., columns thread_col*TN..
    const int thread_row = tid / (BN / TN);
    const int thread_col = tid % (BN / TN);

    // Copy pattern: consecutive threads take consecutive elements of a row.
    const int a_row = tid / BK, a_col = tid % BK;
    constexpr int A_ROW_STEP = THREADS / BK;
    const int b_row = tid / BN, b_col = tid % BN;
    constexpr int B_ROW_STEP = THREADS / BN;

    float acc[TM][TN] = {{0.0f}};
    float reg_m[TM];
    float reg_n[TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int r = 0; r < BM; r += A_ROW_STEP) {
            As[(a_row + r) * BK + a_col] = A[(block_row + a_row + r) * K + k0 + a_col];
        }
#pragma unroll
        for (int r = 0; r < BK; r += B_ROW_STEP) {
            Bs[(b_row + r) * BN + b_col] = B[(k0 + b_row + r) * N + block_col + b_col];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) reg_m[i] = As[(thread_row * TM + i) * BK + k];
#pragma unroll
            for (int j = 0; j < TN; ++j) reg_n[j] = Bs[k * BN + thread_col * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += reg_m[i] * reg_n[j];
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            C[(block_row + thread_row * TM + i) * N + block_col + thread_col * TN + j] = acc[i][j];
        }
    }
}
