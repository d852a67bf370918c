// 09 double buffering: cp.async fills the next tile while this one is computed
//
// Idea against 08: overlap the copy of tile t+1 with the arithmetic on tile t.
// Shared memory holds two stages; cp.async (sm_80+) copies 16 bytes from
// device memory straight into shared memory without passing through
// registers, so the loads of the next tile are in flight during the whole
// compute of the current one and the warp never stalls on them.
// cp.async copies bytes as they are, so the A tile can no longer be
// transposed on the way in: it is kept row-major, each row padded to 20
// floats, and a thread reads 2 consecutive k of one row as a float2 and
// consumes them over 2 steps of k (24 shared loads per 256 FMAs, the same
// bytes as 08). The thread's rows are interleaved 4 apart so the 4 rows a
// warp reads at once fall in distinct banks (row stride 20 words: offsets 0,
// 20, 40, 60 -> banks 0, 20, 8, 28). __launch_bounds__(256, 2) holds the
// kernel to 128 registers so two blocks share an SM, as in 08.
//
// Expected bound (estimate), M = N = K = 4096 on an H200: the tile-boundary
// stalls of 08 are hidden; one barrier pair per 16-wide step remains. A few
// percent to ~10% over 08: ~43-46 TFLOP/s, ~85-90% of cuBLAS (estimate).
//
// Constraints: M and N multiples of 128, K a multiple of 16 (full tiles);
// 16-byte aligned rows (K and N multiples of 4, implied); 32-bit indices.

constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 16;
constexpr int STAGES = 2;
constexpr int AS_STRIDE = BK + 4;  // padded row of the A tile, in floats
constexpr int WM = 32;
constexpr int WN = 64;
constexpr int TM = 4;
constexpr int TN = 4;
constexpr int LANES_M = 4;
constexpr int LANES_N = 8;
constexpr int WM_ITER = WM / (LANES_M * TM);
constexpr int WN_ITER = WN / (LANES_N * TN);
constexpr int WARPS_N = BN / WN;
constexpr int THREADS = (BM / WM) * WARPS_N * 32;
constexpr int ROWS = WM_ITER * TM;  // results per thread along M
constexpr int COLS = WN_ITER * TN;  // results per thread along N

static_assert(LANES_M * LANES_N == 32, "a warp is 32 lanes");
static_assert(WM % (LANES_M * TM) == 0 && WN % (LANES_N * TN) == 0,
              "lane sub-tiles must cover the warp tile exactly");
static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must cover the block tile exactly");
static_assert(TN == 4, "a thread's columns of a sub-tile are read as one float4");
static_assert(BK % 2 == 0 && AS_STRIDE % 2 == 0, "A is read as float2: 2 values of k at a time");
static_assert((AS_STRIDE * 4) % 16 == 0, "padded A rows must keep 16-byte cp.async alignment");
static_assert((BM * BK / 4) % THREADS == 0 && THREADS % (BK / 4) == 0,
              "every thread copies the same number of 16-byte chunks of A");
static_assert((BN * BK / 4) % THREADS == 0 && THREADS % (BN / 4) == 0,
              "every thread copies the same number of 16-byte chunks of B");
static_assert(STAGES * (BM * AS_STRIDE + BK * BN) * 4 <= 48 * 1024,
              "static shared memory is capped at 48 KB");

__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src));
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

extern "C" __global__ void __launch_bounds__(THREADS, 2)
sgemm_double_buffering(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ __align__(16) float As[STAGES][BM * AS_STRIDE];  // row-major, padded
    __shared__ __align__(16) float Bs[STAGES][BK * BN];         // row-major

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int warp_row = (warp / WARPS_N) * WM;
    const int warp_col = (warp % WARPS_N) * WN;
    const int lane_m = lane / LANES_N;          // this lane's rows: lane_m + 4r within a sub-tile
    const int lane_col = (lane % LANES_N) * TN;

    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    constexpr int A_ROW_STEP = THREADS / (BK / 4);
    constexpr int B_ROW_STEP = THREADS / (BN / 4);
    const int a_row = tid / (BK / 4), a_col4 = (tid % (BK / 4)) * 4;
    const int b_row = tid / (BN / 4), b_col4 = (tid % (BN / 4)) * 4;

    // Element offsets of this thread's first copy; sources advance one tile
    // along K per step (32-bit offsets from the kernel arguments keep the
    // register count down), destinations alternate between the stages.
    int a_off = (block_row + a_row) * K + a_col4;
    int b_off = b_row * N + block_col + b_col4;
    const int as_off = a_row * AS_STRIDE + a_col4;
    const int bs_off = b_row * BN + b_col4;

    auto load_tile = [&](int stage) {
#pragma unroll
        for (int r = 0; r < BM; r += A_ROW_STEP) {
            cp_async_16(&As[stage][as_off + r * AS_STRIDE], A + a_off + r * K);
        }
#pragma unroll
        for (int r = 0; r < BK; r += B_ROW_STEP) {
            cp_async_16(&Bs[stage][bs_off + r * BN], B + b_off + r * N);
        }
        a_off += BK;
        b_off += BK * N;
    };

    float acc[ROWS][COLS] = {{0.0f}};
    float reg_a[ROWS][2];
    float reg_b[COLS];

    const int k_tiles = K / BK;
    load_tile(0);
    cp_async_commit();
    for (int t = 0; t < k_tiles; ++t) {
        const int stage = t % STAGES;
        if (t + 1 < k_tiles) {
            load_tile((t + 1) % STAGES);  // overwrites the stage read at t-1
            cp_async_commit();
            cp_async_wait<1>();  // everything but the newest group has landed: tile t
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();  // tile t is visible to every thread

        const float* as = As[stage];
        const float* bs = Bs[stage];
#pragma unroll
        for (int kq = 0; kq < BK; kq += 2) {
#pragma unroll
            for (int i = 0; i < WM_ITER; ++i) {
#pragma unroll
                for (int r = 0; r < TM; ++r) {
                    const int m = warp_row + i * (LANES_M * TM) + r * LANES_M + lane_m;
                    const float2 v = *reinterpret_cast<const float2*>(&as[m * AS_STRIDE + kq]);
                    reg_a[i * TM + r][0] = v.x;
                    reg_a[i * TM + r][1] = v.y;
                }
            }
#pragma unroll
            for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
                for (int j = 0; j < WN_ITER; ++j) {
                    const float4 v = *reinterpret_cast<const float4*>(
                        &bs[(kq + kk) * BN + warp_col + j * (LANES_N * TN) + lane_col]);
                    reg_b[j * TN + 0] = v.x; reg_b[j * TN + 1] = v.y;
                    reg_b[j * TN + 2] = v.z; reg_b[j * TN + 3] = v.w;
                }
#pragma unroll
                for (int i = 0; i < ROWS; ++i) {
#pragma unroll
                    for (int j = 0; j < COLS; ++j) acc[i][j] += reg_a[i][kk] * reg_b[j];
                }
            }
        }
        __syncthreads();  // everyone is done with this stage before it is refilled
    }
#pragma unroll
    for (int i = 0; i < WM_ITER; ++i) {
#pragma unroll
        for (int r = 0; r < TM; ++r) {
            const int row = block_row + warp_row + i * (LANES_M * TM) + r * LANES_M + lane_m;
#pragma unroll
            for (int j = 0; j < WN_ITER; ++j) {
                const int col = block_col + warp_col + j * (LANES_N * TN) + lane_col;
                const float* v = acc[i * TM + r] + j * TN;
                *reinterpret_cast<float4*>(&C[row * N + col]) = make_float4(v[0], v[1], v[2], v[3]);
            }
        }
    }
}
