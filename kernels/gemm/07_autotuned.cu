// 07 autotuned: 06's kernel with its tile shape chosen by measurement
//
// Idea against 06: the tile sizes BM, BN, BK (block tile and K step) and TM,
// TN (thread tile) trade registers, shared memory, occupancy and load count
// against each other, and the best point depends on the card. Here they are
// compile-time macros (-DBM=... and so on); the suite declares the candidate
// list and a default, and a sweep compiles and times each candidate. The
// kernel itself is 06 generalised: copy loops that cover any legal tile.
// The chosen shape is also written into the constant `sgemm_autotuned_config`
// so the launcher reads the geometry back from the compiled module.
//
// Expected bound (estimate), M = N = K = 4096 on an H200: the default (128x128
// block, BK = 16, 8x8 per thread) halves 06's barriers per FLOP by doubling
// BK; the sweep should find a few percent more. ~38-40 TFLOP/s, ~75-80% of
// cuBLAS (estimate).
//
// Constraints: M a multiple of BM, N of BN, K of BK (full tiles; with the
// candidate list every value is a power of two from 8 to 256); 32-bit indices.

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 16
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif

constexpr int THREADS = (BM / TM) * (BN / TN);
constexpr int A_ROW_STEP = THREADS / (BK / 4);  // rows of the A tile copied per pass
constexpr int B_ROW_STEP = THREADS / (BN / 4);  // rows of the B tile copied per pass

static_assert(BM % TM == 0 && BN % TN == 0, "thread tiles must cover the block tile exactly");
static_assert(THREADS >= 32 && THREADS <= 1024, "between one warp and the 1024-thread limit");
static_assert(BK % 4 == 0 && BN % 4 == 0, "tiles are copied as float4 along their rows");
static_assert(TM % 4 == 0 && TN % 4 == 0, "a thread's fragments are read as float4");
static_assert(THREADS % (BK / 4) == 0 && BM % A_ROW_STEP == 0,
              "every thread copies the same number of float4 of the A tile");
static_assert(THREADS % (BN / 4) == 0 && BK % B_ROW_STEP == 0,
              "every thread copies the same number of float4 of the B tile");
static_assert((BM + BN) * BK * 4 <= 48 * 1024, "static shared memory is capped at 48 KB");

extern "C" __constant__ int sgemm_autotuned_config[5] = {BM, BN, BK, TM, TN};

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_autotuned(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ __align__(16) float As[BK * BM];  // transposed: As[k * BM + m]
    __shared__ __align__(16) float Bs[BK * BN];  // row-major: Bs[k * BN + n]

    const int tid = threadIdx.x;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    const int thread_row = tid / (BN / TN);
    const int thread_col = tid % (BN / TN);

    const int a_row = tid / (BK / 4), a_col4 = (tid % (BK / 4)) * 4;
    const int b_row = tid / (BN / 4), b_col4 = (tid % (BN / 4)) * 4;

    float acc[TM][TN] = {{0.0f}};
    float reg_m[TM];
    float reg_n[TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int r = 0; r < BM; r += A_ROW_STEP) {
            const float4 a = *reinterpret_cast<const float4*>(
                &A[(block_row + a_row + r) * K + k0 + a_col4]);
            As[(a_col4 + 0) * BM + a_row + r] = a.x;
            As[(a_col4 + 1) * BM + a_row + r] = a.y;
            As[(a_col4 + 2) * BM + a_row + r] = a.z;
            As[(a_col4 + 3) * BM + a_row + r] = a.w;
        }
#pragma unroll
        for (int r = 0; r < BK; r += B_ROW_STEP) {
            *reinterpret_cast<float4*>(&Bs[(b_row + r) * BN + b_col4]) =
                *reinterpret_cast<const float4*>(&B[(k0 + b_row + r) * N + block_col + b_col4]);
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&As[k * BM + thread_row * TM + i]);
                reg_m[i] = v.x; reg_m[i + 1] = v.y; reg_m[i + 2] = v.z; reg_m[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[k * BN + thread_col * TN + j]);
                reg_n[j] = v.x; reg_n[j + 1] = v.y; reg_n[j + 2] = v.z; reg_n[j + 3] = v.w;
            }
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
        float* dst = &C[(block_row + thread_row * TM + i) * N + block_col + thread_col * TN];
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            *reinterpret_cast<float4*>(&dst[j]) =
                make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
        }
    }
}
