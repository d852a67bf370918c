// 06 block-scaled FP8 GEMM: 05 with the tiles of its part-empty last round split along K
//
// Idea against 05: a persistent grid of G CTAs that hands out whole tiles runs ceil(tiles / G)
// rounds, and the last holds only tiles % G of them (at 4096^3: 704 tiles on 132 CTAs are 5
// full rounds and 44 tiles, 88 SMs idle in the sixth). Here every full round stays 05's,
// whole tiles in the grouped order; only the T tiles of the last round are cut into
// S = min(G / T, k blocks, 4) contiguous k-block ranges (none when S < 2), so S x T <= G CTAs
// share that round. CTA c < S x T takes range c % S of last-round tile c / S: CTA S i holds
// the first range and finishes tile i; CTAs S i + 1 .. S i + S - 1 hold the rest and contribute.
// A contributor runs its k blocks (promotion as 05: each range's partial sum already carries
// its scales), stores its 128 x 192 fp32 total to its slot of a global workspace, fences,
// joins its 256 consumer threads at a named barrier, and one thread raises its flag with a
// release store. The finisher runs its own range, then for each contributor: one thread spins
// on the flag with an acquire load and resets it for the next launch, the consumers meet at
// the barrier, and every thread adds the slot (L2 loads) into its `total`; then 05's staged
// epilogue. Only finishers wait, and only on contributors, which never wait: with the whole
// grid resident (one CTA an SM, the grid at most the SM count) no cycle can form. Keeping the
// full rounds whole is the lesson of gemm_hopper/04_stream_k, which lost to its base by
// turning the last full round into stream-K ranges too and giving up the grouped order's L2
// reuse for half the run; here the split touches only the last round. The workspace and
// flags are module globals sized for MAX_CTAS CTAs, so the launch is 05's, unchanged; the
// loads, k loop and epilogue are 05's (wide_staged.cuh).
//
// Expected bound (estimates, from 05's recorded times): at 4096^3, T = 44, S = 3, 32 k blocks
// as 10 / 11 / 11: the sixth round costs its longest range, 11 of 32 k blocks, so
// 134.1 us x (5 + 11/32) / 6 = 119.4 us, plus the fix-up: one 96 KiB partial written by each
// of 88 contributors and two read back by each of 44 finishers (88 x 96 KiB x 2 = 17 MB
// through L2 in all); at an assumed 64 bytes/clk an SM (117 GB/s at 1.83 GHz), 0.84 us a
// partial, three on the critical path (a write, two reads): ~2.5 us. About 121-125 us,
// 89-92% of the library's 111.3 us. 2048^3 (176 tiles: T = 44, S = 3, 16 k blocks as
// 5 / 5 / 6): 27.9 us x (1 + 6/16) / 2 = 19.2 us + ~2.5, ~86% of the library's 18.7 us.
// Both 4096 x 7168 shapes (1,216 tiles: 9 rounds and T = 28, S = 4, four equal ranges): 10
// rounds' time becomes 9.25, 7.5% less, plus ~3.4 us of fix-up (a write and three reads):
// 120.7 -> ~115 us at K = 2048, 822.1 -> ~764 us at K = 16384. 8192^3 (2,752 tiles:
// T = 112, S = 1) is not split: there 06 is 05.
//
// Checked where: none of the suite's check shapes splits (at most 96 tiles, one round, the
// grid capped at the tile count); 2048^3, the smallest timed shape (the sanitizers' --small),
// and 4096^3 and both 4096 x 7168 shapes do, at S = 3 and 4, each checked before it is timed.
//
// Resources (nvcc 13.0, -gencode arch=compute_90a,code=sm_90a --resource-usage): 168
// registers at compile time (setmaxnreg then gives the consumers 240), no spills; 16 named
// barriers reserved; 218,176 bytes of dynamic shared memory, as 05; 12,976,656 bytes of
// module globals (132 slots of 96 KiB, 132 flags).
//
// Constraints: as 05 (M and K multiples of 128, N a multiple of 128, the last tile column
// clipped; K-major e4m3 A and B; sm_90a); at most MAX_CTAS CTAs, all resident at once (the
// kernel traps on a larger grid); the harness's one launch at a time (the flags and workspace
// are shared by every launch of the module).

#include "wide_staged.cuh"

constexpr int SMEM_BYTES =
    STAGES * STAGE_BYTES + CONSUMERS * D_STAGE_BYTES + 2 * STAGES * 8 + SWIZZLE_ATOM;
constexpr int MAX_CTAS = 132;           // workspace slots and flags: one a CTA (H100 SXM, H200)
constexpr int MAX_SPLIT = 4;            // k ranges a last-round tile is cut into, at most
constexpr int PARTIAL_FLOAT4 = BM * BN / 4;  // a tile of fp32 partial sums, in 16-byte words

static_assert(SMEM_BYTES <= 227 * 1024, "an H100/H200 block gets at most 227 KB of shared memory");
static_assert(ACC % 4 == 0 && PARTIAL_FLOAT4 == 2 * 128 * (ACC / 4),
              "a partial slot is the 256 consumer threads' accumulators, 16 bytes at a time");

// One slot of fp32 partial sums a CTA, stored so that the 256 consumer threads write and read
// consecutive 16-byte words (float4 i of consumer thread t at index i * 256 + t), and one flag
// a slot: 1 from a contributor's release until its finisher has read the slot, else 0.
__device__ float4 split_partials[MAX_CTAS * PARTIAL_FLOAT4];
__device__ unsigned split_flags[MAX_CTAS];

__device__ __forceinline__ void flag_release(unsigned* flag) {
    asm volatile("st.release.gpu.global.u32 [%0], 1;\n" ::"l"(flag) : "memory");
}

__device__ __forceinline__ void flag_acquire(const unsigned* flag) {
    unsigned value = 0;
    do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(value) : "l"(flag) : "memory");
    } while (value == 0);
}

// The last round's tiles are cut into S = min(G / T, k blocks, MAX_SPLIT) ranges, none when
// S < 2 (S = 1 is 05's schedule).
__device__ __forceinline__ Schedule make_schedule(int tiles, int k_blocks) {
    const int grid = static_cast<int>(gridDim.x);
    Schedule s;
    s.tail = tiles % grid;
    s.whole = tiles - s.tail;
    s.split = s.tail == 0 ? 1 : min(min(grid / s.tail, k_blocks), MAX_SPLIT);
    return s;
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
fp8_gemm_split_tail(const __grid_constant__ TensorMap tmap_a,  // A: M x K e4m3, box 128 x 128
                    const __grid_constant__ TensorMap tmap_b,  // B: N x K e4m3, box 192 x 128
                    const float* __restrict__ scale_a,         // K/128 x M
                    const float* __restrict__ scale_b,         // N/128 x K/128
                    unsigned* __restrict__ D,  // M x N bf16, as pairs packed in 32-bit words
                    int M, int N, int K) {
    if (gridDim.x > MAX_CTAS) __trap();
    extern __shared__ unsigned char smem_raw[];
    const Smem sm = smem_layout(smem_raw);
    const int warpgroup = threadIdx.x / 128;
    const int tiles_m = M / BM, tiles_n = RAGGED_N ? (N + BN - 1) / BN : N / BN;
    const int k_blocks = K / BK;
    const Schedule sched = make_schedule(tiles_m * tiles_n, k_blocks);

    if (threadIdx.x == 0) {
        init_ring(sm);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warpgroup == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS) : "memory");
        // Producer: one thread walks every k block of this CTA's tiles, then of its piece.
        if (threadIdx.x == 0) {
            int it = 0, tm, tn;
            for (int t = blockIdx.x; t < sched.whole; t += gridDim.x) {
                tile_coords(t, tiles_m, tiles_n, tm, tn);
                load_range(sm, &tmap_a, &tmap_b, scale_a, M, tm, tn, 0, k_blocks, it);
            }
            int t, piece, kb_begin, kb_end;
            if (last_piece(sched, k_blocks, t, piece, kb_begin, kb_end)) {
                tile_coords(t, tiles_m, tiles_n, tm, tn);
                load_range(sm, &tmap_a, &tmap_b, scale_a, M, tm, tn, kb_begin, kb_end, it);
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS) : "memory");
    const int consumer = warpgroup - 1;
    const int local = threadIdx.x % 128;
    const int ctid = threadIdx.x - 128;  // 0 .. 255 across both consumers
    float chunk[ACC], total[ACC];
    int it = 0, tm, tn;
    for (int t = blockIdx.x; t < sched.whole; t += gridDim.x) {  // the full rounds, as 05
        tile_coords(t, tiles_m, tiles_n, tm, tn);
        accumulate_range(total, chunk, sm, scale_b, N, k_blocks, consumer, local, tn, 0, k_blocks,
                         it);
        store_staged(total, sm, D, N, consumer, local, tm, tn, 0, min(N - tn * BN, BN));
    }
    int t, piece, kb_begin, kb_end;
    if (last_piece(sched, k_blocks, t, piece, kb_begin, kb_end)) {
        tile_coords(t, tiles_m, tiles_n, tm, tn);
        accumulate_range(total, chunk, sm, scale_b, N, k_blocks, consumer, local, tn, kb_begin,
                         kb_end, it);
        if (piece > 0) {
            // A contributor: its range's partial sums to its slot, then the flag, released
            // after every consumer thread's stores (each thread's fence, then the barrier).
            float4* slot = split_partials + static_cast<long long>(blockIdx.x) * PARTIAL_FLOAT4;
#pragma unroll
            for (int i = 0; i < ACC / 4; ++i) {
                slot[i * 256 + ctid] =
                    make_float4(total[4 * i], total[4 * i + 1], total[4 * i + 2], total[4 * i + 3]);
            }
            __threadfence();
            consumers_sync();
            if (ctid == 0) flag_release(&split_flags[blockIdx.x]);
        } else {
            // The finisher (or, unsplit, the tile's only CTA): add each contributor's partial
            // sums, in range order, then store the tile.
            for (int p = 1; p < sched.split; ++p) {
                const int peer = static_cast<int>(blockIdx.x) + p;
                if (ctid == 0) {
                    flag_acquire(&split_flags[peer]);
                    split_flags[peer] = 0;  // consumed: ready for the next launch
                }
                consumers_sync();
                const float4* slot = split_partials + static_cast<long long>(peer) * PARTIAL_FLOAT4;
#pragma unroll
                for (int i = 0; i < ACC / 4; ++i) {
                    const float4 v = __ldcg(&slot[i * 256 + ctid]);
                    total[4 * i] += v.x;
                    total[4 * i + 1] += v.y;
                    total[4 * i + 2] += v.z;
                    total[4 * i + 3] += v.w;
                }
            }
            store_staged(total, sm, D, N, consumer, local, tm, tn, 0, min(N - tn * BN, BN));
        }
    }
    if (local < 64) bulk_wait_all();  // the last tile's copies, before the CTA's memory goes
}
