// 10 wmma: tensor cores through WMMA, bf16 in, fp32 accumulate
//
// Idea against 09: the multiply-adds leave the FMA pipe for the tensor cores.
// Inputs are bf16 (2 bytes), products accumulate in fp32, C is fp32.
// Everything else is 09's design carried over: a block tile split into warp
// tiles, the thread level replaced by WMMA fragments (one mma_sync per 16x16
// accumulator per 16 values of k), a cp.async ring with one barrier per K
// step, and conflict-free shared reads.
// Four details decide the speed here:
// - Tiles. A 128x256 block tile of 8 warps, each owning 64x64 of C (4x4
//   accumulators): per 16 values of k a warp loads 4 A and 4 B fragments for
//   16 mma_sync, and a block reads (128 + 256) rows of K per 128 * 256
//   outputs, a quarter less traffic from L2 per FLOP than a 128x128 tile.
// - Padding. A fragment is read 8 rows at a time, so unpadded rows of 128
//   bytes (A) or 512 bytes (B) would put those 8 rows on the same banks
//   (8-way conflicts). Rows padded by 16 bytes (A: 72 bf16, B: 264 bf16)
//   shift each row by 4 banks: every fragment read is conflict-free, and
//   the 16-byte cp.async chunks stay aligned.
// - The shared state space. nvcuda::wmma::load_matrix_sync takes a generic
//   pointer and compiles (nvcc 13.0) to four generic 32-bit loads per lane
//   plus a register transpose (MOVM) for each row-major B fragment. The same
//   PTX instruction written with .shared (wmma.load ... .shared.bf16)
//   compiles to one ldmatrix (LDSM.16.M88.4 for A, LDSM.16.MT88.4, which
//   transposes, for B), so fragments are loaded that way; mma_sync, the
//   fragments and the store stay nvcuda::wmma.
// - Depth. K steps of 64 in four stages keep three steps (192 values of k)
//   in flight. Four padded stages are 204 KB, above the 48 KB of static
//   shared memory, so the ring is dynamic shared memory and the launcher
//   raises the block's limit; one block fills an SM.
//
// Expected bound (estimate), M = N = K = 4096 on an H200: 137 GFLOP at the
// datasheet's ~990 TFLOP/s dense bf16 is 0.14 ms; the minimum traffic (A, B
// in bf16 = 2 * 32 MiB, C in fp32 = 64 MiB: 134 MB at ~4.8 TB/s) is 0.03 ms,
// so still compute-bound. WMMA compiles to mma.sync (HMMA.16816), which on
// Hopper reaches about two thirds of the wgmma rate. Shared memory: a 64x64
// warp tile reads 1 wavefront (128 bytes) per HMMA.16816 and the tile fill
// writes about 0.4 more, so it is not the limit (the same warps on a 128x128
// tile gained almost nothing when their shared-memory reads per HMMA fell by
// a third). Traffic from L2 is the lever: 512 blocks * 384 rows * 4096 * 2 B
// = 1.6 GB per product instead of 2.1 GB. ~360-420 TFLOP/s, ~47-55% of
// cuBLAS's ~770 (estimate).
//
// Constraints: M a multiple of 128, N of 256, K of 64 (full tiles); 16-byte
// aligned rows (K and N multiples of 8, implied); 32-bit indices.

#include <cuda_bf16.h>
#include <mma.h>

using namespace nvcuda;

constexpr int BM = 128;
constexpr int BN = 256;
constexpr int BK = 64;
constexpr int STAGES = 4;
constexpr int PAD = 8;  // bf16 added to every shared row: 16 bytes = 4 banks
constexpr int AS_STRIDE = BK + PAD;  // 72 bf16 = 144 bytes
constexpr int BS_STRIDE = BN + PAD;  // 264 bf16 = 528 bytes
constexpr int WM = 64;  // warp tile rows
constexpr int WN = 64;  // warp tile columns
constexpr int FRAG = 16;  // wmma tile edge: m16n16k16
constexpr int FM = WM / FRAG;  // accumulator fragments per warp along M
constexpr int FN = WN / FRAG;  // ... along N
constexpr int WARPS_N = BN / WN;
constexpr int THREADS = (BM / WM) * WARPS_N * 32;
constexpr int CHUNK = 8;  // bf16 values per 16-byte copy
constexpr int A_STAGE = BM * AS_STRIDE;  // bf16 per stage
constexpr int B_STAGE = BK * BS_STRIDE;
constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;
constexpr int MIN_BLOCKS = 1;  // blocks per SM the registers are budgeted for

static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must cover the block tile exactly");
static_assert(WM % FRAG == 0 && WN % FRAG == 0 && BK % FRAG == 0,
              "wmma works on 16x16x16 tiles");
static_assert((BM * BK / CHUNK) % THREADS == 0, "every thread copies the same number of A chunks");
static_assert((BK * BN / CHUNK) % THREADS == 0, "every thread copies the same number of B chunks");
static_assert(THREADS % (BK / CHUNK) == 0 && THREADS % (BN / CHUNK) == 0,
              "a thread keeps the same chunk column on every pass of a copy");
#ifndef SWIZZLE
#define SWIZZLE 0  // 1: no padding, 16-byte chunk c of row r stored at c ^ (r % 8) (set PAD to 0)
#endif
#ifndef INTERLEAVE
#define INTERLEAVE 0  // 1: the next tile's copies are spread over the K step's four 16-wide slices
#endif
static_assert(!SWIZZLE || PAD == 0, "the swizzled layout has no padding");
static_assert(SWIZZLE || PAD > 0, "the unswizzled layout needs padding");
static_assert((AS_STRIDE * 2) % 16 == 0 && (BS_STRIDE * 2) % 16 == 0,
              "padded rows must keep the 16-byte cp.async chunks and ldmatrix rows aligned");
static_assert((FRAG * AS_STRIDE * 2) % 32 == 0 && (FRAG * BS_STRIDE * 2) % 32 == 0 &&
                  (A_STAGE * 2) % 128 == 0 && (B_STAGE * 2) % 128 == 0,
              "wmma needs every fragment address 32-byte aligned, in every stage");
static_assert(AS_STRIDE % 8 == 0 && BS_STRIDE % 8 == 0,
              "wmma's leading dimension must be a multiple of 8 bf16");
static_assert(SWIZZLE || ((AS_STRIDE / 2) % 8 == 4 && (BS_STRIDE / 2) % 8 == 4),
              "a row stride of 4 x odd words puts 8 consecutive rows on 8 distinct bank quads");
static_assert(STAGES >= 3, "one barrier per step: the stage refilled was read one step earlier");
static_assert(MIN_BLOCKS * SMEM_BYTES <= 227 * 1024, "the blocks of an SM must fit its 227 KB of shared memory");

__device__ __forceinline__ void cp_async_16(unsigned smem_dst, const void* gmem_src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_dst), "l"(gmem_src));
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

using FragA = wmma::fragment<wmma::matrix_a, FRAG, FRAG, FRAG, __nv_bfloat16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, FRAG, FRAG, FRAG, __nv_bfloat16, wmma::row_major>;
static_assert(sizeof(FragA) == 16 && sizeof(FragB) == 16, "a bf16 a/b fragment is 4 registers");


// ldmatrix straight into a fragment's four registers; `addr` is this lane's row of the tile.
__device__ __forceinline__ void ldsm_a(FragA& f, unsigned addr) {
    unsigned* r = reinterpret_cast<unsigned*>(f.x);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldsm_b(FragB& f, unsigned addr) {
    unsigned* r = reinterpret_cast<unsigned*>(f.x);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_bf16_wmma(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
    // [STAGES][BM][AS_STRIDE] of A, then [STAGES][BK][BS_STRIDE] of B, row-major, padded
    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned as_base = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const unsigned bs_base = as_base + STAGES * A_STAGE * 2;

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32, quad = lane / 8, r8 = lane % 8;
    const int warp_row = (warp / WARPS_N) * WM;
    const int warp_col = (warp % WARPS_N) * WN;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    // Copy assignment: consecutive threads take consecutive 16-byte chunks of
    // a row, so each warp reads whole 128-byte (A) or 256-byte (B) row pieces.
    constexpr int A_ROW_STEP = THREADS / (BK / CHUNK);
    constexpr int B_ROW_STEP = THREADS / (BN / CHUNK);
    const int a_row = tid / (BK / CHUNK), a_col = (tid % (BK / CHUNK)) * CHUNK;
    const int b_row = tid / (BN / CHUNK), b_col = (tid % (BN / CHUNK)) * CHUNK;
#if SWIZZLE
    static_assert(A_ROW_STEP % 8 == 0 && B_ROW_STEP % 8 == 0, "a thread's row % 8 never changes");
    const int a_put = ((a_col / CHUNK) ^ (a_row % 8)) * CHUNK;
    const int b_put = ((b_col / CHUNK) ^ (b_row % 8)) * CHUNK;
#else
    const int a_put = a_col, b_put = b_col;
#endif
    const __nv_bfloat16* a_src = A + (block_row + a_row) * K + a_col;  // + BK per step
    const __nv_bfloat16* b_src = B + b_row * N + block_col + b_col;   // + BK rows per step
    const unsigned as_dst = as_base + (a_row * AS_STRIDE + a_put) * 2;
    const unsigned bs_dst = bs_base + (b_row * BS_STRIDE + b_put) * 2;

    constexpr int PARTS = BK / FRAG;
    auto load_part = [&](int stage, int tile, int part) {
        const __nv_bfloat16* a = a_src + tile * BK;
        const __nv_bfloat16* b = b_src + tile * BK * N;
#pragma unroll
        for (int c = 0; c < BM / A_ROW_STEP; ++c) {
            if (part < 0 || c % PARTS == part)
                cp_async_16(as_dst + (stage * A_STAGE + c * A_ROW_STEP * AS_STRIDE) * 2, a + c * A_ROW_STEP * K);
        }
#pragma unroll
        for (int c = 0; c < BK / B_ROW_STEP; ++c) {
            if (part < 0 || c % PARTS == part)
                cp_async_16(bs_dst + (stage * B_STAGE + c * B_ROW_STEP * BS_STRIDE) * 2, b + c * B_ROW_STEP * N);
        }
    };
    auto load_tile = [&](int stage, int tile) { load_part(stage, tile, -1); };

    const int a_r = r8 + (quad & 1) * 8, a_c = (quad >> 1) * 8;
    const int b_r = r8 + (quad & 1) * 8, b_c = (quad >> 1) * 8;
#if SWIZZLE
    // every row a lane points at has row % 8 == r8: the chunk it reads is XOR-ed with r8
    unsigned a_lane[PARTS], b_lane[FN];
#pragma unroll
    for (int q = 0; q < PARTS; ++q)
        a_lane[q] = ((warp_row + a_r) * AS_STRIDE + (((q * FRAG + a_c) / CHUNK) ^ r8) * CHUNK) * 2;
#pragma unroll
    for (int j = 0; j < FN; ++j)
        b_lane[j] = (b_r * BS_STRIDE + (((warp_col + j * FRAG + b_c) / CHUNK) ^ r8) * CHUNK) * 2;
#else
    const unsigned a_lane = ((warp_row + a_r) * AS_STRIDE + a_c) * 2;
    const unsigned b_lane = (b_r * BS_STRIDE + warp_col + b_c) * 2;
#endif

    wmma::fragment<wmma::accumulator, FRAG, FRAG, FRAG, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i) {
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    }
    FragA a_frag[FM];
    FragB b_frag[FN];

    const int k_tiles = K / BK;
    // Prologue: steps 0..STAGES-2 in flight, one commit group each (empty
    // groups past the end keep the count that the waits below rely on).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles) load_tile(s, s);
        cp_async_commit();
    }
    for (int t = 0; t < k_tiles; ++t) {
        cp_async_wait<STAGES - 2>();  // this thread's copies of step t have landed
        __syncthreads();              // everyone's have, and nobody still reads step t-1's stage
        const int next = t + STAGES - 1;
#if !INTERLEAVE
        if (next < k_tiles) load_tile(next % STAGES, next);  // refills the stage of step t-1
        cp_async_commit();
#endif
        const int stage = t % STAGES;
#if SWIZZLE
        const unsigned as = as_base + stage * A_STAGE * 2;
        const unsigned bs = bs_base + stage * B_STAGE * 2;
#else
        const unsigned as = as_base + stage * A_STAGE * 2 + a_lane;
        const unsigned bs = bs_base + stage * B_STAGE * 2 + b_lane;
#endif
#pragma unroll
        for (int kk = 0; kk < BK; kk += FRAG) {
#if SWIZZLE
#pragma unroll
            for (int i = 0; i < FM; ++i) ldsm_a(a_frag[i], as + a_lane[kk / FRAG] + i * FRAG * AS_STRIDE * 2);
#pragma unroll
            for (int j = 0; j < FN; ++j) ldsm_b(b_frag[j], bs + b_lane[j] + kk * BS_STRIDE * 2);
#else
#pragma unroll
            for (int i = 0; i < FM; ++i) ldsm_a(a_frag[i], as + (i * FRAG * AS_STRIDE + kk) * 2);
#pragma unroll
            for (int j = 0; j < FN; ++j) ldsm_b(b_frag[j], bs + (kk * BS_STRIDE + j * FRAG) * 2);
#endif
#if INTERLEAVE
            if (next < k_tiles) load_part(next % STAGES, next, kk / FRAG);
#endif
#pragma unroll
            for (int i = 0; i < FM; ++i) {
#pragma unroll
                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
            }
        }
#if INTERLEAVE
        cp_async_commit();
#endif
    }
    cp_async_wait<0>();  // only empty groups remain; leave none behind at exit
#pragma unroll
    for (int i = 0; i < FM; ++i) {
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            float* dst = &C[(block_row + warp_row + i * FRAG) * N + block_col + warp_col + j * FRAG];
            wmma::store_matrix_sync(dst, acc[i][j], N, wmma::mem_row_major);
        }
    }
}
