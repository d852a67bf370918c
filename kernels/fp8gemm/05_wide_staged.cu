// 05 block-scaled FP8 GEMM: 128 x 192 tiles, the epilogue staged through shared memory
//
// Idea against 01: two costs that 01 pays for every tile, not every k block. (1) Its epilogue
// stores bf16 pairs straight from registers: each warp store touches 8 rows, 2,048 partial-line
// writes a tile, issued while neither consumer feeds the tensor cores. Here each consumer rounds
// its 64 rows into a staging buffer in shared memory (rows padded by 16 bytes, so a warp's 8
// rows land on all 32 banks), then 64 of its threads each issue one bulk copy of a row to D
// (cp.async.bulk, no tensor map needed); the copies drain while the consumer starts its next
// tile, and only before it writes the buffer again do the issuing threads wait until their
// copies have read it. (2) The tile is 192 columns wide, not 128: per 128-wide k block a CTA
// then loads 16 + 24 KiB for 1.5 times 01's MMAs, and each consumer's wgmma reads its A rows
// once for 192 columns instead of 128. The two fp32 sets a thread keeps (chunk and total) are
// 2 x 96 registers; setmaxnreg gives the consumers 240 and the producer 24 (128 x 24 + 256 x 240
// = 64,512 of 65,536). 192 is not a multiple of the 128-wide scale blocks, so a tile covers
// two of them (the first 128 or 64 of its columns in one, the rest in the next, fixed per tile:
// two promotion branches with the split at compile time), and N need only be a multiple of
// 128: the last tile column is clipped (TMA fills B's rows past N with zeros, and each row's
// bulk copy stops at N). The geometry, the wrappers and the kernel's three pieces (a k range's
// loads, the k loop with its promotion, the staged epilogue) are in wide_staged.cuh, shared
// with 06 and 07; this file holds 05's schedule, whole tiles in the grouped order.
//
// Expected bound (estimate): 01 spends about 3 us a tile on fixed costs at every shape (from
// 01's recorded cases at 4096 x 7168 with K = 2048 and 16384: same tiles, 8x the k blocks), a
// sixth of its time at 4096^3; staging the epilogue removes most of the stores' share, and the
// wider tile cuts the bytes into shared memory per FLOP by about a seventh (139 against 161
// bytes/clk at the tensor cores' rate, see DESIGN.md). At 4096^3 the wider tile costs a partly
// empty last round (704 tiles: 5.33 rounds of 132 -> 6, against 01's 7.76 -> 8); at 2048^3 it
// loses outright (2 rounds of 1.5-wide tiles against 2 of 01's). Estimate at 4096^3: at most
// 1.2 x 01 from the epilogue (all of the per-tile cost; the drain of each tile's last k block
// stays), times 1.16 x 8 / 9 = 1.03 from the width, about 1.1-1.2 x 01 in all.
//
// Resources (nvcc 13.0, -gencode arch=compute_90a,code=sm_90a --resource-usage): 168
// registers at compile time (setmaxnreg then gives the consumers 240), no spills; 16 named
// barriers reserved (the consumer barrier's id is a register); 218,176 bytes of dynamic shared
// memory (4 stages of 16 + 24 + 0.5 KiB, 2 x 25 KiB of staged D rows, 8 mbarriers, 1 KiB of
// alignment slack).
//
// Constraints: M and K multiples of 128, N a multiple of 128 (the scale blocks; the last tile
// column may be clipped); K-major e4m3 A and B with row pitches of K bytes; sm_90a.


#include "wide_staged.cuh"

constexpr int SMEM_BYTES =
    STAGES * STAGE_BYTES + CONSUMERS * D_STAGE_BYTES + 2 * STAGES * 8 + SWIZZLE_ATOM;
static_assert(SMEM_BYTES <= 227 * 1024, "an H100/H200 block gets at most 227 KB of shared memory");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
fp8_gemm_wide_staged(const __grid_constant__ TensorMap tmap_a,  // A: M x K e4m3, box 128 x 128
                    const __grid_constant__ TensorMap tmap_b,  // B: N x K e4m3, box 192 x 128
                    const float* __restrict__ scale_a,         // K/128 x M
                    const float* __restrict__ scale_b,         // N/128 x K/128
                    unsigned* __restrict__ D,  // M x N bf16, as pairs packed in 32-bit words
                    int M, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    const Smem sm = smem_layout(smem_raw);
    const int warpgroup = threadIdx.x / 128;
    const int tiles_m = M / BM, tiles_n = RAGGED_N ? (N + BN - 1) / BN : N / BN;
    const int tiles = tiles_m * tiles_n;
    const int k_blocks = K / BK;

    if (threadIdx.x == 0) {
        init_ring(sm);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warpgroup == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS) : "memory");
        // Producer: one thread walks every k block of every tile of this CTA.
        if (threadIdx.x == 0) {
            int it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int tm, tn;
                tile_coords(t, tiles_m, tiles_n, tm, tn);
                load_range(sm, &tmap_a, &tmap_b, scale_a, M, tm, tn, 0, k_blocks, it);
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS) : "memory");
    const int consumer = warpgroup - 1;
    const int local = threadIdx.x % 128;
    float chunk[ACC], total[ACC];
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        tile_coords(t, tiles_m, tiles_n, tm, tn);
        accumulate_range(total, chunk, sm, scale_b, N, k_blocks, consumer, local, tn, 0, k_blocks,
                         it);
        // The whole tile's columns below N (BN, except in the clipped last tile column).
        store_staged(total, sm, D, N, consumer, local, tm, tn, 0, min(N - tn * BN, BN));
    }
    if (local < 64) bulk_wait_all();  // the last tile's copies, before the CTA's memory goes
}
