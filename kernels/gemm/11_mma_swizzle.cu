// 11 mma.sync + swizzle: PTX tensor-core ops fed by ldmatrix from XOR-swizzled tiles
//
// Idea against 10: the same tile, ring and fragment loads, with the padding
// replaced by a swizzle and WMMA by the PTX instruction under it. Four changes:
// (1) each 16-byte chunk of a tile row is stored at chunk ^ (row % 8), so the
// 8 rows an ldmatrix reads at one chunk column land in 8 different bank
// groups (conflict-free) with no padding, and every row starts on a 128-byte
// line: a warp's 512 bytes of one cp.async fill exactly 4 lines of shared
// memory, where 10's padded rows spread them over 5 or 8. That is what lets
// the 12 copies of a K step go out in one burst after the barrier without
// backing up the LSU queue (10 has to spread them over the step); (2) the
// space padding would cost (12 KB) is saved: 4 * 48 KB = 192 KB for the
// 128x256 block tile's 4-stage ring; (3) the fragments feed
// mma.sync.m16n8k16 written in PTX, whose accumulator layout is documented,
// so C leaves as float2 stores from registers instead of through WMMA's
// store; (4) blocks are numbered in groups of 8 block rows, walked column by
// column, so the blocks resident at once share A and B panels in L2. 8 warps
// as 2x4 warp tiles of 64x64, as in 10: per 16 values of k a warp issues 4
// ldmatrix for A, 4 for B and 32 mma. A variant with the swizzle alone on 10
// timed within a few tenths of a percent of this file: (1) is the change that
// counts.
//
// Expected bound (estimate), M = N = K = 4096 on an H200: 137 GFLOP against
// ~990 TFLOP/s dense bf16 (datasheet) is 0.14 ms; the instruction is still
// mma.sync, which on Hopper cannot reach the wgmma rate (a lead: about two
// thirds of it, ~0.65 HMMA.16816 per cycle per SM). Shared memory: 1
// wavefront per HMMA for fragments plus 0.375 for the tile fill, ~0.73 HMMA
// per cycle at most. Between the two caps, with one block per SM hiding its
// own barriers: ~440-520 TFLOP/s, ~57-68% of cuBLAS's ~770 (estimate).
//
// Constraints: M a multiple of 128, N of 256, K of 64 (full tiles); 16-byte
// aligned rows (K and N multiples of 8, implied); 32-bit indices.

constexpr int BM = 128;
constexpr int BN = 256;
constexpr int BK = 64;
constexpr int STAGES = 4;
constexpr int WM = 64;            // warp tile rows
constexpr int WN = 64;            // warp tile columns
constexpr int MT = WM / 16;       // m16 tiles per warp
constexpr int NT = WN / 8;        // n8 tiles per warp
constexpr int WARPS_N = BN / WN;
constexpr int THREADS = (BM / WM) * WARPS_N * 32;
constexpr int A_CHUNKS = BK / 8;  // 16-byte chunks per row of the A tile
constexpr int B_CHUNKS = BN / 8;  // ... of the B tile
constexpr int A_STAGE = BM * BK;  // bf16 elements per stage
constexpr int B_STAGE = BK * BN;
constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;
constexpr int GROUP = 8;  // block rows per group of the launch order

static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must cover the block tile exactly");
static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0,
              "mma.m16n8k16 tiles; B is loaded two n8 tiles per ldmatrix.x4");
static_assert(A_CHUNKS == 8, "the swizzle permutes the 8 chunks of a 128-byte A row");
static_assert(B_CHUNKS % 8 == 0, "the swizzle permutes chunks within 128-byte runs of a B row");
static_assert((BM * A_CHUNKS) % THREADS == 0 && (BK * B_CHUNKS) % THREADS == 0,
              "every thread copies the same number of 16-byte chunks");
static_assert(THREADS % A_CHUNKS == 0 && THREADS % B_CHUNKS == 0,
              "a thread keeps the same chunk column, so its swizzle is fixed per copy");
static_assert((THREADS / A_CHUNKS) % 8 == 0 && (THREADS / B_CHUNKS) % 8 == 0,
              "each copy pass advances a multiple of 8 rows, keeping row % 8 fixed");
static_assert(SMEM_BYTES <= 227 * 1024, "an H100/H200 block gets at most 227 KB of shared memory");
static_assert(GROUP >= 1, "a group holds at least one block row");

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// D = A * B + D for one m16n8k16 tile: A row-major, B "col" (k pairs per register).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const unsigned (&a)[4],
                                               unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_bf16_mma_swizzle(const unsigned short* A, const unsigned short* B, float* C,
                      int M, int N, int K) {
    extern __shared__ __align__(128) unsigned short smem[];
    unsigned short* As = smem;                     // [STAGES][BM][BK], swizzled
    unsigned short* Bs = smem + STAGES * A_STAGE;  // [STAGES][BK][BN], swizzled

    const int tid = threadIdx.x;
    const int lane = tid % 32, warp = tid / 32;
    const int warp_row = (warp / WARPS_N) * WM;
    const int warp_col = (warp % WARPS_N) * WN;
    // Grouped launch order: block b of the grid takes tile row
    // group * GROUP + (b % rows), tile column b / rows within its group, so
    // consecutive blocks walk down a group of GROUP rows before moving right.
    const int tiles_m = M / BM, tiles_n = N / BN;
    const int b = blockIdx.y * gridDim.x + blockIdx.x;
    const int group = b / (GROUP * tiles_n), in_group = b % (GROUP * tiles_n);
    const int rows = min(GROUP, tiles_m - group * GROUP);
    const int block_row = (group * GROUP + in_group % rows) * BM;
    const int block_col = (in_group / rows) * BN;

    // Copy assignment: thread tid copies chunk column tid % CHUNKS of rows
    // tid / CHUNKS + i * (THREADS / CHUNKS). Its row % 8 never changes, so
    // the swizzled column is computed once.
    const int a_row = tid / A_CHUNKS, a_chunk = tid % A_CHUNKS;
    const int b_row = tid / B_CHUNKS, b_chunk = tid % B_CHUNKS;
    const int a_dst = a_row * BK + ((a_chunk ^ (a_row % 8)) * 8);
    const int b_dst = b_row * BN + ((b_chunk ^ (b_row % 8)) * 8);
    const unsigned short* a_src = A + (block_row + a_row) * K + a_chunk * 8;
    const unsigned short* b_src = B + b_row * N + block_col + b_chunk * 8;
    constexpr int A_ROW_STEP = THREADS / A_CHUNKS;
    constexpr int B_ROW_STEP = THREADS / B_CHUNKS;

    const unsigned as_base = smem_addr(As);
    const unsigned bs_base = smem_addr(Bs);

    auto load_tile = [&](int stage, int k_tile) {
        const int k0 = k_tile * BK;
#pragma unroll
        for (int r = 0; r < BM; r += A_ROW_STEP) {
            cp_async_16(as_base + 2 * (stage * A_STAGE + a_dst + r * BK), a_src + r * K + k0);
        }
#pragma unroll
        for (int r = 0; r < BK; r += B_ROW_STEP) {
            cp_async_16(bs_base + 2 * (stage * B_STAGE + b_dst + r * BN), b_src + (k0 + r) * N);
        }
    };

    // ldmatrix addressing. Lane l points at row l % 8 of matrix l / 8. For A
    // the four matrices are (rows 0-7 | 8-15) x (k 0-7 | 8-15) of an m16k16
    // tile, in the order the mma expects; for B (read transposed) they are
    // (k 0-7 | 8-15) x (n 0-7 | 8-15). Every row these lanes touch has
    // row % 8 == l % 8, so the swizzle is an XOR with l % 8.
    const int q = lane / 8, rr = lane % 8;
    const int a_ld_row = warp_row + rr + (q & 1) * 8;  // + mt * 16
    const int a_ld_chunk = q >> 1;                     // + kk / 8
    const int b_ld_row = rr + (q & 1) * 8;             // + kk
    const int b_ld_chunk = (warp_col / 8) + (q >> 1);  // + np * 2

    float acc[MT][NT][4] = {};
    unsigned a_frag[MT][4];
    unsigned b_frag[NT / 2][4];

    const int k_tiles = K / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles) load_tile(s, s);
        cp_async_commit();
    }
    for (int t = 0; t < k_tiles; ++t) {
        cp_async_wait<STAGES - 2>();  // this thread's copies of tile t have landed
        __syncthreads();              // everyone's have; and tile t-1 is no longer read
        const int next = t + STAGES - 1;
        if (next < k_tiles) load_tile(next % STAGES, next);  // refills the stage of tile t-1
        cp_async_commit();

        const int stage = t % STAGES;
        const unsigned as_stage = as_base + 2 * stage * A_STAGE;
        const unsigned bs_stage = bs_base + 2 * stage * B_STAGE;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                const int row = a_ld_row + mt * 16;
                const int chunk = (a_ld_chunk + kk / 8) ^ rr;
                ldmatrix_x4(a_frag[mt], as_stage + 2 * (row * BK + chunk * 8));
            }
#pragma unroll
            for (int np = 0; np < NT / 2; ++np) {
                const int row = b_ld_row + kk;
                const int chunk = (b_ld_chunk + np * 2) ^ rr;
                ldmatrix_x4_trans(b_frag[np], bs_stage + 2 * (row * BN + chunk * 8));
            }
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    mma_bf16_16816(acc[mt][nt], a_frag[mt], b_frag[nt / 2][(nt % 2) * 2],
                                   b_frag[nt / 2][(nt % 2) * 2 + 1]);
                }
            }
        }
    }
    cp_async_wait<0>();

    // Accumulator layout of m16n8: c0, c1 at (row g, cols 2t, 2t+1), c2, c3 at row g + 8.
    const int g = lane / 4, t4 = lane % 4;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        const int row = block_row + warp_row + mt * 16 + g;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const int col = block_col + warp_col + nt * 8 + t4 * 2;
            *reinterpret_cast<float2*>(&C[row * N + col]) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
            *reinterpret_cast<float2*>(&C[(row + 8) * N + col]) =
                make_float2(acc[mt][nt][2], acc[mt][nt][3]);
        }
    }
}
