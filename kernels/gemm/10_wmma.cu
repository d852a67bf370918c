// 10 wmma: tensor cores through nvcuda::wmma, bf16 in, fp32 accumulate
//
// Idea against 09: the multiply-adds leave the FMA pipe for the tensor cores.
// Inputs are bf16 (2 bytes), products accumulate in fp32, C is fp32.
// Everything else is 09's design carried over: a 128x128 block tile split
// into warp tiles (8 warps as 2x4 warp tiles of 64x32), the thread level
// replaced by WMMA fragments (4x2 accumulators of 16x16 per warp, one
// mma_sync per fragment per 16 values of k), K steps of 32 in a two-stage
// cp.async ring with one barrier per step, and conflict-free shared reads.
// That last point needs care here: WMMA reads a fragment with 32-bit loads,
// one row per 4 lanes and 8 rows at a time, so unpadded rows of 64 bytes (A)
// or 256 bytes (B) would put those 8 rows on 4 or 1 bank groups (4- and
// 8-way conflicts, which held a first version of this file far below the
// mma.sync rate). Rows padded by 16 bytes (A: 40 bf16, B: 136 bf16) shift
// each row by 4 banks and make every fragment load conflict-free; the 16-byte
// cp.async chunks stay aligned.
//
// Expected bound (estimate), M = N = K = 4096 on an H200: 137 GFLOP at the
// datasheet's ~990 TFLOP/s dense bf16 is 0.14 ms; the minimum traffic (A, B
// in bf16 = 2 * 32 MiB, C in fp32 = 64 MiB: 134 MB at ~4.8 TB/s) is 0.03 ms,
// so still compute-bound. WMMA compiles to mma.sync (HMMA.16816), which on
// Hopper reaches about two thirds of the wgmma rate, and a 64x32 warp tile
// reads 1.5 shared-memory wavefronts per HMMA, plus 0.5 for filling the tiles:
// shared memory caps the SM near 0.5 HMMA per cycle (~530 TFLOP/s at
// 1.98 GHz). WMMA spends 4 generic 32-bit loads per fragment and a register
// transpose (MOVM) per B fragment where 11's ldmatrix spends one instruction:
// ~300-380 TFLOP/s, ~40-50% of cuBLAS's ~760 (estimate).
//
// Constraints: M and N multiples of 128, K a multiple of 32 (full tiles);
// 16-byte aligned rows (K and N multiples of 8, implied); 32-bit indices.

#include <cuda_bf16.h>
#include <mma.h>

using namespace nvcuda;

constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 32;
constexpr int STAGES = 2;
constexpr int PAD = 8;  // bf16 added to every shared row: 16 bytes = 4 banks
constexpr int AS_STRIDE = BK + PAD;  // 40 bf16 = 80 bytes
constexpr int BS_STRIDE = BN + PAD;  // 136 bf16 = 272 bytes
constexpr int WM = 64;  // warp tile rows
constexpr int WN = 32;  // warp tile columns
constexpr int FRAG = 16;  // wmma tile edge: m16n16k16
constexpr int FM = WM / FRAG;  // accumulator fragments per warp along M
constexpr int FN = WN / FRAG;  // ... along N
constexpr int WARPS_N = BN / WN;
constexpr int THREADS = (BM / WM) * WARPS_N * 32;
constexpr int CHUNK = 8;  // bf16 values per 16-byte copy
constexpr int A_STAGE = BM * AS_STRIDE;  // bf16 per stage
constexpr int B_STAGE = BK * BS_STRIDE;

static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must cover the block tile exactly");
static_assert(WM % FRAG == 0 && WN % FRAG == 0 && BK % FRAG == 0,
              "wmma works on 16x16x16 tiles");
static_assert((BM * BK / CHUNK) % THREADS == 0, "every thread copies the same number of A chunks");
static_assert((BK * BN / CHUNK) % THREADS == 0, "every thread copies the same number of B chunks");
static_assert(THREADS % (BK / CHUNK) == 0 && THREADS % (BN / CHUNK) == 0,
              "a thread keeps the same chunk column on every pass of a copy");
static_assert((AS_STRIDE * 2) % 16 == 0 && (BS_STRIDE * 2) % 16 == 0,
              "padded rows must keep the 16-byte cp.async chunks aligned");
static_assert((FRAG * AS_STRIDE * 2) % 32 == 0 && (FRAG * BS_STRIDE * 2) % 32 == 0,
              "wmma needs every fragment pointer 32-byte aligned");
static_assert(AS_STRIDE % 8 == 0 && BS_STRIDE % 8 == 0,
              "wmma's leading dimension must be a multiple of 8 bf16");
static_assert((AS_STRIDE / 2) % 8 == 4 && (BS_STRIDE / 2) % 8 == 4,
              "a row stride of 4 x odd words puts 8 consecutive rows on 8 distinct bank quads");
static_assert(STAGES == 2, "one barrier per step relies on exactly two stages");
static_assert(STAGES * (A_STAGE + B_STAGE) * 2 <= 48 * 1024,
              "static shared memory is capped at 48 KB");

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

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_bf16_wmma(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
    __shared__ __align__(32) __nv_bfloat16 As[STAGES][A_STAGE];  // row-major BM x BK, padded
    __shared__ __align__(32) __nv_bfloat16 Bs[STAGES][B_STAGE];  // row-major BK x BN, padded

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int warp_row = (warp / WARPS_N) * WM;
    const int warp_col = (warp % WARPS_N) * WN;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    // Copy assignment: consecutive threads take consecutive 16-byte chunks of
    // a row, so each warp reads whole 64-byte (A) or 256-byte (B) row pieces;
    // sources advance one step along K per tile, destinations alternate stages.
    constexpr int A_ROW_STEP = THREADS / (BK / CHUNK);
    constexpr int B_ROW_STEP = THREADS / (BN / CHUNK);
    const int a_row = tid / (BK / CHUNK), a_col = (tid % (BK / CHUNK)) * CHUNK;
    const int b_row = tid / (BN / CHUNK), b_col = (tid % (BN / CHUNK)) * CHUNK;
    const __nv_bfloat16* a_src = A + (block_row + a_row) * K + a_col;  // advances BK per step
    const __nv_bfloat16* b_src = B + b_row * N + block_col + b_col;   // advances BK rows per step
    const int as_dst = a_row * AS_STRIDE + a_col;
    const int bs_dst = b_row * BS_STRIDE + b_col;

    auto load_tile = [&](int stage) {
#pragma unroll
        for (int r = 0; r < BM; r += A_ROW_STEP) {
            cp_async_16(&As[stage][as_dst + r * AS_STRIDE], a_src + r * K);
        }
#pragma unroll
        for (int r = 0; r < BK; r += B_ROW_STEP) {
            cp_async_16(&Bs[stage][bs_dst + r * BS_STRIDE], b_src + r * N);
        }
        a_src += BK;
        b_src += BK * N;
    };

    wmma::fragment<wmma::accumulator, FRAG, FRAG, FRAG, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i) {
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    }
    wmma::fragment<wmma::matrix_a, FRAG, FRAG, FRAG, __nv_bfloat16, wmma::row_major> a_frag[FM];
    wmma::fragment<wmma::matrix_b, FRAG, FRAG, FRAG, __nv_bfloat16, wmma::row_major> b_frag[FN];

    const int k_tiles = K / BK;
    load_tile(0);
    cp_async_commit();
    for (int t = 0; t < k_tiles; ++t) {
        cp_async_wait_all();  // this thread's copies of step t have landed
        __syncthreads();      // everyone's have, and nobody still reads step t-1's stage
        if (t + 1 < k_tiles) {
            load_tile((t + 1) % STAGES);  // refills the stage of step t-1
            cp_async_commit();
        }
        const __nv_bfloat16* as = As[t % STAGES];
        const __nv_bfloat16* bs = Bs[t % STAGES];
#pragma unroll
        for (int kk = 0; kk < BK; kk += FRAG) {
#pragma unroll
            for (int i = 0; i < FM; ++i) {
                wmma::load_matrix_sync(a_frag[i], &as[(warp_row + i * FRAG) * AS_STRIDE + kk],
                                       AS_STRIDE);
            }
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                wmma::load_matrix_sync(b_frag[j], &bs[kk * BS_STRIDE + warp_col + j * FRAG],
                                       BS_STRIDE);
            }
#pragma unroll
            for (int i = 0; i < FM; ++i) {
#pragma unroll
                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < FM; ++i) {
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            float* dst = &C[(block_row + warp_row + i * FRAG) * N + block_col + warp_col + j * FRAG];
            wmma::store_matrix_sync(dst, acc[i][j], N, wmma::mem_row_major);
        }
    }
}
