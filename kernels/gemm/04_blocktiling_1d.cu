// 04 1D block tiling: each thread computes a column of 8 results
//
// Idea against 03: give each thread more than one output, so one value loaded
// from shared memory feeds several FMAs. The block owns a 64x64 tile of C and
// walks K in steps of 8; each of its 512 threads owns TM = 8 vertically
// adjacent results. Per step of k a thread reads Bs[k][col] once into a
// register and reuses it for its 8 rows, reading 8 values of As (the same
// addresses across the warp, so broadcasts): 9 shared loads for 8 FMAs
// instead of 16.
//
// Expected bound (estimate), M = N = K = 4096 on an H200: shared-memory load
// issue is still the limit, at ~1.1 loads per FMA instead of 2, and the tile
// is 4x larger than 03's, so global traffic halves again. Roughly 2-3x over
// 03: ~15-18 TFLOP/s, about a third of cuBLAS's ~50 (estimate).
//
// Constraints: M and N multiples of 64, K a multiple of 8 (full tiles only);
// 32-bit indices (M*K, K*N, M*N below 2^31).

constexpr int BM = 64;   // rows of C per block
constexpr int BN = 64;   // columns of C per block
constexpr int BK = 8;    // step along K
constexpr int TM = 8;    // results per thread, stacked vertically
constexpr int THREADS = BM * BN / TM;

static_assert(THREADS <= 1024, "a block holds at most 1024 threads");
static_assert(BM * BK == THREADS, "each thread copies exactly one element of the A tile");
static_assert(BN * BK == THREADS, "each thread copies exactly one element of the B tile");
static_assert(BM % TM == 0, "the thread columns must tile BM exactly");

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_blocktiling_1d(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[BM * BK];  // row-major BM x BK
    __shared__ float Bs[BK * BN];  // row-major BK x BN

    const int tid = threadIdx.x;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    // Which results this thread owns: column thread_col, rows thread_row*TM + i.
    const int thread_col = tid % BN;
    const int thread_row = tid / BN;

    // Which element of each tile this thread copies.
    const int a_row = tid / BK, a_col = tid % BK;
    const int b_row = tid / BN, b_col = tid % BN;

    const float* a_src = A + (block_row + a_row) * K + a_col;
    const float* b_src = B + b_row * N + block_col + b_col;

    float acc[TM] = {0.0f};
    for (int k0 = 0; k0 < K; k0 += BK) {
        As[a_row * BK + a_col] = a_src[k0];
        Bs[b_row * BN + b_col] = b_src[k0 * N];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k * BN + thread_col];
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                acc[i] += As[(thread_row * TM + i) * BK + k] * b;
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        C[(block_row + thread_row * TM + i) * N + block_col + thread_col] = acc[i];
    }
}
