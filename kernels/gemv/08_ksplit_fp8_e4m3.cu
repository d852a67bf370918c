// 08 FP8 E4M3 with 02's batch-1 work layout: four warps a 16-row tile, each over a quarter of K
//
// Idea against 03: 03 deals batch 1 out as one wave: 1792 two-warp blocks of 32 rows, each warp
// over all of K, 7 blocks (14 warps) an SM. 02 found at W4A16 that such a wave ends in the order
// of its SM slots, so the last warps run alone while slots sit empty, and that splitting K four
// ways (about two waves of shorter blocks, a waiting block taking the slot an early one leaves)
// was faster. 03 never had that change; this version gives it the split and nothing else:
// - batch 1: one 16-row tile a block of 4 warps, warp w summing values [wK/4, (w+1)K/4) of its 16
//   rows with 03's ring and mma loop, then warps 1-3 leave their 16 row sums in shared memory for
//   warp 0, which adds them in order, scales and stores. N / 16 blocks (1792 at the headline, 7 an
//   SM at up to 72 registers: 924 slots, about 1.9 waves);
// - the ring is 3 deep (2 stages in flight): 4 warps x 3 x 2 KB = 24 KB a block, 7 blocks 168 KB,
//   and an SM's 28 warps hold 112 KB of weights in flight against 03's 14 x 6 KB = 84 KB;
// - batch 4 and 16 are 03's kernels unchanged (one warp a tile over all of K, 2 tiles a block).
//
// Expected bound: at batch 1, K = 8192, N = 28672 the work model counts 234.9 MB of weights +
// 0.1 MB of row scales + x + y = 0.235 GB: 52 us at the ~4.5 TB/s read ceiling (estimate).
// Estimate: 84-87% of read (~60-62 us), a few percent faster than 03 (as 02's split was), the
// conversion (one cvt for 2 weights, an estimated 28 us of the convert pipe, see 03) unchanged.
// At K = 4096, N = 14336, 03's 448 two-warp blocks fill under half the warp slots (896 warps
// of 1848); 08's 896 four-warp blocks fill them: expect clearly faster there, 65-75% of read.
//
// Size constraints: K a multiple of 512 (four slices of whole 128-value stages; batch 4 and 16
// need 128), N a multiple of 32 (16 at batch 1), batch 1..16, every tensor 16-byte aligned;
// |x| <= 65504 (as 03).
//
// Resources (nvcc 13.0, -arch=sm_90a, no spills): ksplit_fp8_e4m3_b1 58 registers, 24832 bytes
// of static shared memory; _b4 60 and _b16 78 registers, 16384 bytes.

#include <cuda_fp8.h>

constexpr int WARPS = 2;     // warps a block at batch 4 and 16; each owns 16 rows, so a block owns 32
constexpr int KSPLIT_B1 = 4; // warps a block at batch 1, all on one 16-row tile, each a quarter of K
constexpr int PIECES = 2;    // 16-byte pieces a lane copies of each of its 2 rows a stage
constexpr int STAGES = 4;    // ring depth at batch 4 and 16: the stage in use and 3 in flight
constexpr int STAGES_B1 = 3; // at batch 1: four times the warps a tile, so a shallower ring
constexpr int VALUES_PER_PIECE = 16;  // E4M3 in 16 bytes
// 7 blocks an SM: at batch 1, 28 warps, so at most 72 registers a thread; at batch 4 and 16, 14
// warps (128).
constexpr int BLOCKS_PER_SM = 7;

static_assert(sizeof(uint4) == VALUES_PER_PIECE * sizeof(__nv_fp8_storage_t), "16 E4M3 in 16 bytes");
static_assert(WARPS * STAGES * 2 * PIECES * 32 * 16 <= 48 * 1024, "static shared memory limit");
static_assert(BLOCKS_PER_SM * (KSPLIT_B1 * STAGES_B1 * 2 * PIECES * 32 * 16 + KSPLIT_B1 * 16 * 4 + 1024) <=
                  228 * 1024,
              "7 batch-1 blocks' rings and sums, and the 1 KB each block reserves, fit in an SM");

__device__ __forceinline__ void copy_async_16(void* smem, const void* gmem) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gmem) : "memory");
}

__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void wait_copies() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// m16n8k16, fp16 in, fp32 accumulate; register roles as 01's bf16 mma.
__device__ __forceinline__ void mma_f16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                        unsigned a3, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Bytes 2h and 2h + 1 of a word (two E4M3 weights, the lower address first) as an fp16 pair.
__device__ __forceinline__ unsigned e4m3_pair(unsigned word, int h) {
    const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(
        static_cast<__nv_fp8x2_storage_t>(word >> (16 * h)), __NV_E4M3);
    return static_cast<unsigned>(r.x) | (static_cast<unsigned>(r.y) << 16);
}

// A bf16 pair as an fp16 pair (exact inside fp16's normal range).
__device__ __forceinline__ unsigned bf16x2_to_f16x2(unsigned word) {
    const float lo = __uint_as_float(word << 16);
    const float hi = __uint_as_float(word & 0xFFFF0000u);
    unsigned out;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(out) : "f"(hi), "f"(lo));
    return out;
}

__device__ __forceinline__ unsigned short to_bf16(float v) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}

// Batch 1 (KSPLIT = 4): grid = N / 16 blocks of 4 warps, one tile a block, warp w over quarter w of
// K. Batch 4 and 16 (KSPLIT = 1): grid = N / 32 blocks of 2 warps, one tile a warp, all of K.
// w8: N x K bytes; scale: N fp32.
template <int BATCH, int NWARPS, int KSPLIT, int NSTAGES>
__device__ __forceinline__ void gemv_fp8(const unsigned short* __restrict__ x,
                                         const unsigned char* __restrict__ w8,
                                         const float* __restrict__ scale,
                                         unsigned short* __restrict__ y, int k, int n) {
    static_assert(BATCH >= 1 && BATCH <= 16, "one or two n8 tiles of batch columns");
    static_assert(KSPLIT == 1 || BATCH == 1, "K is split at batch 1 only");
    static_assert(NWARPS % KSPLIT == 0, "whole tiles a block");
    constexpr int NT = (BATCH + 7) / 8;
    constexpr int TILES = NWARPS / KSPLIT;
    __shared__ uint4 ring[NWARPS][NSTAGES][PIECES][2][32];
    __shared__ float sums[KSPLIT][16];  // a slice's 16 row sums of column 0 (KSPLIT > 1)

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int slice = warp % KSPLIT;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int row = (blockIdx.x * TILES + warp / KSPLIT) * 16 + g;
    const int kv_row = k / VALUES_PER_PIECE;  // 16-byte pieces a row
    const int kv = kv_row / KSPLIT;           // pieces of this warp's slice
    const int first = slice * kv;             // its first piece
    constexpr int STEP = 4 * PIECES;
    constexpr int STAGES = NSTAGES;

    const uint4* wa = reinterpret_cast<const uint4*>(w8) + static_cast<size_t>(row) * kv_row + first + t;
    const uint4* wb = wa + static_cast<size_t>(8) * kv_row;
    // x in 16-byte vectors of 8 bf16: the 16 values of a piece are 2 of them
    const uint4* xr[NT];
    bool has_x[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        const int b = g + 8 * nt;
        has_x[nt] = b < BATCH;
        xr[nt] = reinterpret_cast<const uint4*>(x) + static_cast<size_t>(has_x[nt] ? b : 0) * (k / 8) + 2 * (first + t);
    }

    auto issue = [&](int c, int slot) {
        if (c < kv) {
#pragma unroll
            for (int p = 0; p < PIECES; ++p) {
                copy_async_16(&ring[warp][slot][p][0][lane], wa + c + 4 * p);
                copy_async_16(&ring[warp][slot][p][1][lane], wb + c + 4 * p);
            }
        }
        commit_copies();
    };

    // two sums (even and odd words of a piece), so consecutive mmas do not wait on each other
    float acc[2][NT][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) acc[h][nt][0] = acc[h][nt][1] = acc[h][nt][2] = acc[h][nt][3] = 0.0f;
    }

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) issue(s * STEP, s);

    int slot = 0;
#pragma unroll 1
    for (int c = 0; c < kv; c += STEP) {
        issue(c + (STAGES - 1) * STEP, slot == 0 ? STAGES - 1 : slot - 1);
        wait_copies<STAGES - 1>();
        // Both pieces at once where registers allow, as in 02.
#pragma unroll(NT == 1 ? PIECES : 1)
        for (int p = 0; p < PIECES; ++p) {
            const uint4 a = ring[warp][slot][p][0][lane];
            const uint4 b = ring[warp][slot][p][1][lane];
            const unsigned a_words[4] = {a.x, a.y, a.z, a.w};
            const unsigned b_words[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                uint4 xv[2] = {make_uint4(0u, 0u, 0u, 0u), make_uint4(0u, 0u, 0u, 0u)};
                if (has_x[nt]) {
                    xv[0] = __ldg(xr[nt] + 2 * (c + 4 * p));
                    xv[1] = __ldg(xr[nt] + 2 * (c + 4 * p) + 1);
                }
                const unsigned xw[8] = {xv[0].x, xv[0].y, xv[0].z, xv[0].w, xv[1].x, xv[1].y, xv[1].z, xv[1].w};
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    // word i holds values 4i..4i+3 of the piece: one k16 step, into one of two sums
                    mma_f16(acc[i & 1][nt], e4m3_pair(a_words[i], 0), e4m3_pair(b_words[i], 0),
                            e4m3_pair(a_words[i], 1), e4m3_pair(b_words[i], 1),
                            bf16x2_to_f16x2(xw[2 * i]), bf16x2_to_f16x2(xw[2 * i + 1]));
                }
            }
        }
        slot = slot == STAGES - 1 ? 0 : slot + 1;
    }
    wait_copies<0>();

    if constexpr (KSPLIT > 1) {
        // Column 0 of the product: lanes t = 0 hold rows g (element 0) and g + 8 (element 2).
        if (t == 0) {
            sums[slice][g] = acc[0][0][0] + acc[1][0][0];
            sums[slice][g + 8] = acc[0][0][2] + acc[1][0][2];
        }
        __syncthreads();
        if (slice != 0 || t != 0) return;
        float a = sums[0][g], b = sums[0][g + 8];
#pragma unroll
        for (int s = 1; s < KSPLIT; ++s) {
            a += sums[s][g];
            b += sums[s][g + 8];
        }
        y[row] = to_bf16(__ldg(scale + row) * a);
        y[row + 8] = to_bf16(__ldg(scale + row + 8) * b);
        return;
    }

    const float scale_a = __ldg(scale + row);
    const float scale_b = __ldg(scale + row + 8);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int col = 8 * nt + 2 * t + e;
            if (col < BATCH) {
                y[static_cast<size_t>(col) * n + row] = to_bf16(scale_a * (acc[0][nt][e] + acc[1][nt][e]));
                y[static_cast<size_t>(col) * n + row + 8] = to_bf16(scale_b * (acc[0][nt][2 + e] + acc[1][nt][2 + e]));
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(KSPLIT_B1 * 32, BLOCKS_PER_SM)
ksplit_fp8_e4m3_b1(const unsigned short* x, const unsigned char* w8, const float* scale, unsigned short* y,
                   int k, int n) {
    gemv_fp8<1, KSPLIT_B1, KSPLIT_B1, STAGES_B1>(x, w8, scale, y, k, n);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, BLOCKS_PER_SM)
ksplit_fp8_e4m3_b4(const unsigned short* x, const unsigned char* w8, const float* scale, unsigned short* y,
                   int k, int n) {
    gemv_fp8<4, WARPS, 1, STAGES>(x, w8, scale, y, k, n);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, BLOCKS_PER_SM)
ksplit_fp8_e4m3_b16(const unsigned short* x, const unsigned char* w8, const float* scale, unsigned short* y,
                    int k, int n) {
    gemv_fp8<16, WARPS, 1, STAGES>(x, w8, scale, y, k, n);
}
