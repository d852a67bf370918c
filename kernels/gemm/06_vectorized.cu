// 06 vectorized: 16-byte loads and stores, and the A tile stored transposed
//
// Idea against 05: move four floats per instruction wherever the layout
// allows. Global reads of A and B and the writes of C become float4. The A
// tile is written into shared memory transposed (As[k][m]), so a thread's 8
// values of A for one k are contiguous and load as two float4, like its 8
// values of B already do. Per k a thread now issues 4 shared loads (16-byte)
// for 64 FMAs instead of 16, and the instruction count of the copy loops
// drops 4x.
//
// Expected bound (estimate), M = N = K = 4096 on an H200: the FMA pipe gets
// most of the issue slots; what remains is the barrier pair per 8-wide step
// of K, the 2-way conflicts of the 16-byte Bs reads (8 threads, 32 bytes
// apart) and the scalar transposed stores into As. ~34-38 TFLOP/s, ~70% of
// cuBLAS (estimate).
//
// Constraints: M and N multiples of 128, K a multiple of 8 (full tiles; K and
// N multiples of 4 also keep every float4 16-byte aligned); 32-bit indices.

constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 8;
constexpr int TM = 8;
constexpr int TN = 8;
constexpr int THREADS = (BM / TM) * (BN / TN);

static_assert(THREADS <= 1024, "a block holds at most 1024 threads");
static_assert(BK % 4 == 0 && BN % 4 == 0, "tiles are copied as float4 along their rows");
static_assert(TM % 4 == 0 && TN % 4 == 0, "a thread's fragments are read as float4");
static_assert(BM * BK / 4 == THREADS, "each thread copies exactly one float4 of the A tile");
static_assert(BN * BK / 4 == THREADS, "each thread copies exactly one float4 of the B tile");

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_vectorized(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ __align__(16) float As[BK * BM];  // transposed: As[k * BM + m]
    __shared__ __align__(16) float Bs[BK * BN];  // row-major: Bs[k * BN + n]

    const int tid = threadIdx.x;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    const int thread_row = tid / (BN / TN);
    const int thread_col = tid % (BN / TN);

    // One float4 of A (4 consecutive k of one row) and one of B per thread.
    const int a_row = tid / (BK / 4), a_col4 = (tid % (BK / 4)) * 4;
    const int b_row = tid / (BN / 4), b_col4 = (tid % (BN / 4)) * 4;

    float acc[TM][TN] = {{0.0f}};
    float reg_m[TM];
    float reg_n[TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
        const float4 a = *reinterpret_cast<const float4*>(
            &A[(block_row + a_row) * K + k0 + a_col4]);
        As[(a_col4 + 0) * BM + a_row] = a.x;
        As[(a_col4 + 1) * BM + a_row] = a.y;
        As[(a_col4 + 2) * BM + a_row] = a.z;
        As[(a_col4 + 3) * BM + a_row] = a.w;
        *reinterpret_cast<float4*>(&Bs[b_row * BN + b_col4]) =
            *reinterpret_cast<const float4*>(&B[(k0 + b_row) * N + block_col + b_col4]);
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
