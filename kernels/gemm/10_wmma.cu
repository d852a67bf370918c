// 10 wmma: tensor cores through nvcuda::wmma, bf16 in, fp32 accumulate
//
// Idea against 09: the multiply-adds leave the FMA pipe for the tensor cores.
// Inputs are bf16 (2 bytes), products accumulate in fp32, C is fp32. The
// structure is the block/warp tiling of 08 with the thread level replaced by
// WMMA fragments: a 128x128 block tile, K steps of 32, 8 warps as 2x4 warp
// tiles of 64x32, each warp holding 4x2 accumulator fragments of 16x16 and
// issuing one mma_sync per fragment per 16 values of k. Tiles are staged in
// shared memory with 16-byte loads, plainly row-major: no padding, no
// swizzle, no overlap of copy and compute (those are 11's changes).
//
// Expected bound (estimate), M = N = K = 4096 on an H200: 137 GFLOP at the
// datasheet's ~990 TFLOP/s dense bf16 is 0.14 ms; the minimum traffic (A, B
// in bf16 = 2 * 32 MiB, C in fp32 = 64 MiB: 134 MB at ~4.8 TB/s) is 0.03 ms,
// so still compute-bound. WMMA compiles to the warp-level mma.sync path
// (HMMA), which on Hopper reaches well under the wgmma rate, and this kernel
// feeds it badly: the fragments are read out of unpadded rows 64 bytes (A)
// or 256 bytes (B) apart, so the lanes of a warp collide on banks, and every
// K step waits for its global loads with the tensor cores idle.
// ~150-200 TFLOP/s, ~20-25% of cuBLAS's ~800 (estimate).
//
// Constraints: M and N multiples of 128, K a multiple of 32 (full tiles);
// 16-byte aligned rows (K and N multiples of 8, implied); 32-bit indices.

#include <cuda_bf16.h>
#include <mma.h>

using namespace nvcuda;

constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 32;
constexpr int WM = 64;  // warp tile rows
constexpr int WN = 32;  // warp tile columns
constexpr int FRAG = 16;  // wmma tile edge: m16n16k16
constexpr int FM = WM / FRAG;  // accumulator fragments per warp along M
constexpr int FN = WN / FRAG;  // ... along N
constexpr int WARPS_N = BN / WN;
constexpr int THREADS = (BM / WM) * WARPS_N * 32;
constexpr int CHUNK = 8;  // bf16 values per 16-byte copy

static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must cover the block tile exactly");
static_assert(WM % FRAG == 0 && WN % FRAG == 0 && BK % FRAG == 0,
              "wmma works on 16x16x16 tiles");
static_assert((BM * BK / CHUNK) % THREADS == 0, "every thread copies the same number of A chunks");
static_assert((BK * BN / CHUNK) % THREADS == 0, "every thread copies the same number of B chunks");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_bf16_wmma(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
    __shared__ __align__(32) __nv_bfloat16 As[BM * BK];  // row-major BM x BK
    __shared__ __align__(32) __nv_bfloat16 Bs[BK * BN];  // row-major BK x BN

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int warp_row = (warp / WARPS_N) * WM;
    const int warp_col = (warp % WARPS_N) * WN;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    wmma::fragment<wmma::accumulator, FRAG, FRAG, FRAG, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i) {
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    }
    wmma::fragment<wmma::matrix_a, FRAG, FRAG, FRAG, __nv_bfloat16, wmma::row_major> a_frag[FM];
    wmma::fragment<wmma::matrix_b, FRAG, FRAG, FRAG, __nv_bfloat16, wmma::row_major> b_frag[FN];

    for (int k0 = 0; k0 < K; k0 += BK) {
        // Copy both tiles in 16-byte chunks; consecutive threads take
        // consecutive chunks of a row, so each warp reads whole lines.
#pragma unroll
        for (int c = tid; c < BM * BK / CHUNK; c += THREADS) {
            const int r = c / (BK / CHUNK), col = (c % (BK / CHUNK)) * CHUNK;
            *reinterpret_cast<uint4*>(&As[r * BK + col]) =
                *reinterpret_cast<const uint4*>(&A[(block_row + r) * K + k0 + col]);
        }
#pragma unroll
        for (int c = tid; c < BK * BN / CHUNK; c += THREADS) {
            const int r = c / (BN / CHUNK), col = (c % (BN / CHUNK)) * CHUNK;
            *reinterpret_cast<uint4*>(&Bs[r * BN + col]) =
                *reinterpret_cast<const uint4*>(&B[(k0 + r) * N + block_col + col]);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += FRAG) {
#pragma unroll
            for (int i = 0; i < FM; ++i) {
                wmma::load_matrix_sync(a_frag[i], &As[(warp_row + i * FRAG) * BK + kk], BK);
            }
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                wmma::load_matrix_sync(b_frag[j], &Bs[kk * BN + warp_col + j * FRAG], BN);
            }
#pragma unroll
            for (int i = 0; i < FM; ++i) {
#pragma unroll
                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
            }
        }
        __syncthreads();
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
