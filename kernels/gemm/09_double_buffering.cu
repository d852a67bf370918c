// 09 double buffering: cp.async fills the next tile, registers hold the next k
//
// Idea against 08: overlap data movement with the arithmetic, at both levels
// where 08 waits. Shared memory holds two stages: cp.async (sm_80+) copies
// from device memory straight into shared memory without passing through
// registers, so tile t+1 is in flight during the whole compute of tile t. In
// registers, each thread keeps two sets of fragments: the 16 values of k+1
// are read from shared memory while the 64 FMAs of k run, so no FMA waits on
// a shared-memory load. cp.async copies bytes as they are, so the A tile is
// transposed on the way in with 4-byte copies (8 per thread per tile) into
// rows padded to 132 floats; the 16-byte copies of B and all fragment reads
// are as in 08. With two stages one barrier per tile suffices: the barrier
// that makes tile t visible also proves that every warp has finished tile
// t-1, whose stage the copies of tile t+1 then overwrite.
//
// Expected bound (estimate), M = N = K = 4096 on an H200: 08's loop, minus
// its exposed global-load latency at each tile boundary and one of its two
// barriers per tile; what remains is the FMA issue rate itself (64 FMAs per
// 4 shared loads and a few copies). ~46-49 TFLOP/s, ~90-95% of cuBLAS
// (estimate).
//
// Constraints: M and N multiples of 128, K a multiple of 16 (full tiles);
// 16-byte aligned rows of B (N a multiple of 4, implied); 32-bit indices.

constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 16;
constexpr int STAGES = 2;
constexpr int AS_STRIDE = BM + 4;  // padded row of the transposed A tile, in floats
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
static_assert(LANES_M == 4 && LANES_N == 8,
              "the lane-bit split gives 2 bits to rows and 3 to columns, as in 08");
static_assert(WM % (LANES_M * TM) == 0 && WN % (LANES_N * TN) == 0,
              "lane sub-tiles must cover the warp tile exactly");
static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must cover the block tile exactly");
static_assert(TM == 4 && TN == 4, "a thread sub-tile row or column is read as one float4");
static_assert((AS_STRIDE * 4) % 16 == 0, "padded A rows must keep float4 reads aligned");
static_assert((BM * BK) % THREADS == 0 && THREADS % BK == 0,
              "every thread copies the same number of A elements, always at the same k");
static_assert((BN * BK / 4) % THREADS == 0 && THREADS % (BN / 4) == 0,
              "every thread copies the same number of 16-byte chunks of B");
static_assert(STAGES == 2, "one barrier per tile relies on exactly two stages");
static_assert(STAGES * (BK * AS_STRIDE + BK * BN) * 4 <= 48 * 1024,
              "static shared memory is capped at 48 KB");

__device__ __forceinline__ void cp_async_4(void* smem_dst, const void* gmem_src) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(gmem_src));
}

__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src));
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}

__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

extern "C" __global__ void __launch_bounds__(THREADS, 2)
sgemm_double_buffering(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ __align__(16) float As[STAGES][BK * AS_STRIDE];  // transposed: [k][m], padded
    __shared__ __align__(16) float Bs[STAGES][BK * BN];         // row-major: [k][n]

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int warp_row = (warp / WARPS_N) * WM;
    const int warp_col = (warp % WARPS_N) * WN;
    const int lane_row = ((lane >> 1) & 3) * TM;              // lane bits 1-2
    const int lane_col = ((lane & 1) | ((lane >> 3) << 1)) * TN;  // lane bits 0, 3, 4

    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    // Copy assignment. A: consecutive threads take consecutive k of a row (a
    // warp reads two 64-byte row pieces), each thread keeps one k and steps
    // down the rows. B: 16-byte chunks, a warp per 512-byte row.
    constexpr int A_ROW_STEP = THREADS / BK;
    constexpr int B_ROW_STEP = THREADS / (BN / 4);
    const int a_k = tid % BK, a_m = tid / BK;
    const int b_row = tid / (BN / 4), b_col4 = (tid % (BN / 4)) * 4;
    const float* a_src = A + (block_row + a_m) * K + a_k;  // advances BK per tile
    const float* b_src = B + b_row * N + block_col + b_col4;  // advances BK rows per tile
    const int as_dst = a_k * AS_STRIDE + a_m;
    const int bs_dst = b_row * BN + b_col4;

    auto load_tile = [&](int stage) {
#pragma unroll
        for (int r = 0; r < BM; r += A_ROW_STEP) {
            cp_async_4(&As[stage][as_dst + r], a_src + r * K);
        }
#pragma unroll
        for (int r = 0; r < BK; r += B_ROW_STEP) {
            cp_async_16(&Bs[stage][bs_dst + r * BN], b_src + r * N);
        }
        a_src += BK;
        b_src += BK * N;
    };

    float acc[ROWS][COLS] = {{0.0f}};
    float frag_a[2][ROWS];  // [k parity][row]
    float frag_b[2][COLS];

    auto load_fragments = [&](const float* as, const float* bs, int k, int slot) {
#pragma unroll
        for (int i = 0; i < WM_ITER; ++i) {
            const float4 v = *reinterpret_cast<const float4*>(
                &as[k * AS_STRIDE + warp_row + i * (LANES_M * TM) + lane_row]);
            frag_a[slot][i * TM + 0] = v.x; frag_a[slot][i * TM + 1] = v.y;
            frag_a[slot][i * TM + 2] = v.z; frag_a[slot][i * TM + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < WN_ITER; ++j) {
            const float4 v = *reinterpret_cast<const float4*>(
                &bs[k * BN + warp_col + j * (LANES_N * TN) + lane_col]);
            frag_b[slot][j * TN + 0] = v.x; frag_b[slot][j * TN + 1] = v.y;
            frag_b[slot][j * TN + 2] = v.z; frag_b[slot][j * TN + 3] = v.w;
        }
    };

    const int k_tiles = K / BK;
    load_tile(0);
    cp_async_commit();
    for (int t = 0; t < k_tiles; ++t) {
        cp_async_wait_all();  // this thread's copies of tile t have landed
        __syncthreads();      // everyone's have, and nobody still reads tile t-1's stage
        if (t + 1 < k_tiles) {
            load_tile((t + 1) % STAGES);  // refills the stage of tile t-1
            cp_async_commit();
        }
        const float* as = As[t % STAGES];
        const float* bs = Bs[t % STAGES];
        load_fragments(as, bs, 0, 0);
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k + 1 < BK) load_fragments(as, bs, k + 1, (k + 1) % 2);
#pragma unroll
            for (int i = 0; i < ROWS; ++i) {
#pragma unroll
                for (int j = 0; j < COLS; ++j) acc[i][j] += frag_a[k % 2][i] * frag_b[k % 2][j];
            }
        }
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
