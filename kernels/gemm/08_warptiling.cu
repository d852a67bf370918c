// 08 warptiling: block tile -> warp tile -> thread tile, matching the hardware
//
// Idea against 07: add the level between the block and the thread. The 128x128
// block tile is split among 8 warps as 4x2 warp tiles of 32x64, and inside a
// warp each lane owns 2x2 sub-tiles of 4x4 results spread 16 rows and 32
// columns apart (still 64 results per thread). Every shared-memory read of a
// warp then covers one compact run: the 4 distinct float4 of As are 64
// contiguous bytes, the 8 distinct float4 of Bs are 128 contiguous bytes, so
// the 2-way conflicts of 06/07 disappear, and a warp's working set in shared
// memory is a 32x64 window rather than scattered rows. The same three-level
// split is how the tensor-core kernels (10-12) are organised.
// Which lane gets which sub-tile matters too. Shared memory returns one
// 4-byte register per lane per cycle, so a 16-byte read costs 4 cycles for a
// warp, unless every pair of lanes 2i, 2i+1 (or every pair i, i^2) reads the
// same address; then the two are served together and it costs 2. Lane bits
// 1-2 pick the rows and bits 0, 3, 4 the columns, so A reads pair lanes
// (l, l^1) and B reads pair lanes (l, l^2): 8 cycles per k instead of the
// 12 of a plain row-by-row lane order.
//
// Expected bound (estimate), M = N = K = 4096 on an H200: per k a thread
// issues 4 conflict-free 16-byte shared loads for 64 FMAs, and BK = 16 halves
// the barriers of 06. Per k and SM the 16 resident warps need 256 cycles of
// FMA issue and 128 cycles of shared-memory return (192 with the plain lane
// order, close enough to the FMA time that the two stall each other). What
// remains is load latency at each tile boundary (nothing overlaps the global
// loads yet). ~43-46 TFLOP/s, ~85-90% of cuBLAS (estimate).
//
// Constraints: M and N multiples of 128, K a multiple of 16 (full tiles);
// 32-bit indices.

constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 16;
constexpr int WM = 32;          // warp tile rows
constexpr int WN = 64;          // warp tile columns
constexpr int TM = 4;           // thread sub-tile rows
constexpr int TN = 4;           // thread sub-tile columns
constexpr int LANES_M = 4;      // lanes stacked along M inside a warp
constexpr int LANES_N = 8;      // lanes side by side along N
constexpr int WM_ITER = WM / (LANES_M * TM);  // sub-tiles per thread along M
constexpr int WN_ITER = WN / (LANES_N * TN);  // sub-tiles per thread along N
constexpr int WARPS_M = BM / WM;
constexpr int WARPS_N = BN / WN;
constexpr int THREADS = WARPS_M * WARPS_N * 32;

static_assert(LANES_M * LANES_N == 32, "a warp is 32 lanes");
static_assert(LANES_M == 4 && LANES_N == 8,
              "the lane-bit split below gives 2 bits to rows and 3 to columns");
static_assert(WM % (LANES_M * TM) == 0 && WN % (LANES_N * TN) == 0,
              "lane sub-tiles must cover the warp tile exactly");
static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must cover the block tile exactly");
static_assert(TM == 4 && TN == 4, "a thread sub-tile row or column is read as one float4");
static_assert((BM * BK / 4) % THREADS == 0 && THREADS % (BK / 4) == 0,
              "every thread copies the same number of float4 of the A tile");
static_assert((BN * BK / 4) % THREADS == 0 && THREADS % (BN / 4) == 0,
              "every thread copies the same number of float4 of the B tile");

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_warptiling(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ __align__(16) float As[BK * BM];  // transposed: As[k * BM + m]
    __shared__ __align__(16) float Bs[BK * BN];  // row-major: Bs[k * BN + n]

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int warp_row = (warp / WARPS_N) * WM;   // warp tile origin inside the block tile
    const int warp_col = (warp % WARPS_N) * WN;
    // Lane bits 1-2 -> row group, bits 0, 3, 4 -> column group: lanes l and
    // l^1 read the same float4 of As, lanes l and l^2 the same float4 of Bs.
    const int lane_m = (lane >> 1) & 3;
    const int lane_n = (lane & 1) | ((lane >> 3) << 1);
    const int lane_row = lane_m * TM;  // lane sub-tile origin inside a warp sub-tile
    const int lane_col = lane_n * TN;

    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    constexpr int A_ROW_STEP = THREADS / (BK / 4);
    constexpr int B_ROW_STEP = THREADS / (BN / 4);
    const int a_row = tid / (BK / 4), a_col4 = (tid % (BK / 4)) * 4;
    const int b_row = tid / (BN / 4), b_col4 = (tid % (BN / 4)) * 4;

    float acc[WM_ITER * TM][WN_ITER * TN] = {{0.0f}};
    float reg_m[WM_ITER * TM];
    float reg_n[WN_ITER * TN];

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
            for (int i = 0; i < WM_ITER; ++i) {
                const float4 v = *reinterpret_cast<const float4*>(
                    &As[k * BM + warp_row + i * (LANES_M * TM) + lane_row]);
                reg_m[i * TM + 0] = v.x; reg_m[i * TM + 1] = v.y;
                reg_m[i * TM + 2] = v.z; reg_m[i * TM + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < WN_ITER; ++j) {
                const float4 v = *reinterpret_cast<const float4*>(
                    &Bs[k * BN + warp_col + j * (LANES_N * TN) + lane_col]);
                reg_n[j * TN + 0] = v.x; reg_n[j * TN + 1] = v.y;
                reg_n[j * TN + 2] = v.z; reg_n[j * TN + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < WM_ITER * TM; ++i) {
#pragma unroll
                for (int j = 0; j < WN_ITER * TN; ++j) acc[i][j] += reg_m[i] * reg_n[j];
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < WM_ITER; ++i) {
#pragma unroll
        for (int r = 0; r < TM; ++r) {
            const int row = block_row + warp_row + i * (LANES_M * TM) + lane_row + r;
#pragma unroll
            for (int j = 0; j < WN_ITER; ++j) {
                const int col = block_col + warp_col + j * (LANES_N * TN) + lane_col;
                const float* v = acc[i * TM + r] + j * TN;
                *reinterpret_cast<float4*>(&C[row * N + col]) = make_float4(v[0], v[1], v[2], v[3]);
            }
        }
    }
}
