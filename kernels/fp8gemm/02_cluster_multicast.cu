// 02 block-scaled FP8 GEMM on CTA pairs: B tiles multicast to two SMs by TMA
//
// Idea against 01: the bytes that feed the SMs. A 128 x 128 tile over one 128-wide k block
// loads 16 KiB of A and 16 KiB of B for 2 * 128 * 128 * 128 = 4.2 MFLOP, one byte per 128
// FLOPs; at the ~1300 TFLOP/s a good fp8 GEMM reaches that is ~10 TB/s out of L2 into the
// SMs, about what the H200's L2 can deliver (an estimate: it is not in this run). 01 cannot
// take a wider tile (a second n128 accumulator set does not fit the registers), so here two
// CTAs of a cluster, on two SMs, compute the tiles (2i, j) and (2i + 1, j), which share their
// B tile: each CTA loads its own A and one half of B, and TMA's multicast writes that half into
// the shared memory of both. Each SM then pulls 24 KiB per k block instead of 32 (-25%).
// The price is coupling: a stage may be refilled only when the consumers of both CTAs have
// released it, so each consumer thread releases it in its own CTA and one lane of each
// consumer warp, through the cluster's shared-memory window, in its peer's (the empty
// barrier counts 256 threads and 8 peer warps), and the two CTAs walk their tile pairs in
// step. Promotion, scales and epilogue are 01's.
//
// Expected bound (estimate): if 01 is held by L2 bandwidth, up to 1/0.75 = 1.33x its rate,
// capped by the tensor cores and 01's promotion bubbles; if 01 is held by the tensor cores
// or the promotion, the pairing gains nothing and the lockstep costs a few percent.
//
// Resources (nvcc 13.0, -gencode arch=compute_90a,code=sm_90a --resource-usage): 168
// registers at compile time (232 for the consumers after setmaxnreg), no spills; 200,800 bytes
// of dynamic shared memory, as 01.
//
// Constraints: as 01 (N and K multiples of 128; K-major e4m3 A and B; sm_90a), and M a
// multiple of 256 (tile rows come in pairs); the grid is even (one cluster is two CTAs) and
// holds only the clusters the GPU runs at once (the driver's cuOccupancyMaxActiveClusters):
// not every pair of SMs can host a cluster, and one left over would wait for another's whole
// tile list.

constexpr int BM = 128;                 // tile rows: two consumers x 64
constexpr int BN = 128;                 // tile columns: one wgmma n128; one scale_b block
constexpr int BK = 128;                 // k per stage: one scale block, one 128-byte swizzle row
constexpr int STAGES = 6;
constexpr int CONSUMERS = BM / 64;
constexpr int THREADS = (CONSUMERS + 1) * 128;
constexpr int WGMMA_K = 32;             // e4m3 wgmma: k32 per instruction
constexpr int A_STAGE_BYTES = BM * BK;  // 16 KiB
constexpr int B_STAGE_BYTES = BN * BK;  // 16 KiB
constexpr int CLUSTER = 2;              // CTAs sharing one B tile
constexpr int B_HALF_BYTES = B_STAGE_BYTES / CLUSTER;  // what each CTA loads and multicasts
constexpr int SA_STAGE_BYTES = BM * 4;  // 128 fp32 row scales
constexpr int STAGE_BYTES = A_STAGE_BYTES + B_STAGE_BYTES + SA_STAGE_BYTES;
constexpr int SWIZZLE_ATOM = 1024;      // 8 rows x 128 bytes
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 2 * STAGES * 8 + SWIZZLE_ATOM;
constexpr int GROUP_M = 4;              // tile-row pairs visited together (L2 reuse)
constexpr int SCALE_BLOCK = 128;        // the recipe's block edge

// 04 compiles this file with FP8_TURNS 1: the two consumers take turns to issue their wgmma.
#ifndef FP8_TURNS
#define FP8_TURNS 0
#endif

static_assert(BK == 128, "a K-major row of A or B is exactly one 128-byte swizzle row");
static_assert(BK == SCALE_BLOCK && BN == SCALE_BLOCK, "one scale_b and one scale_a column per stage");
static_assert(BM == CONSUMERS * 64, "each consumer warpgroup owns 64 rows (wgmma m64)");
static_assert(BK % WGMMA_K == 0, "a stage holds whole k32 steps");
static_assert(A_STAGE_BYTES % SWIZZLE_ATOM == 0 && B_STAGE_BYTES % SWIZZLE_ATOM == 0,
              "every tile must start on a 1024-byte swizzle atom");
static_assert(B_HALF_BYTES % SWIZZLE_ATOM == 0, "each multicast half starts on a swizzle atom");
static_assert(SA_STAGE_BYTES % 16 == 0, "a bulk copy moves whole 16-byte units");
static_assert(STAGE_BYTES < (1 << 20), "an mbarrier counts at most 2^20 - 1 transaction bytes");
static_assert(SMEM_BYTES <= 227 * 1024, "an H100/H200 block gets at most 227 KB of shared memory");

#include "hopper.cuh"
// A 2-D tile written into the same shared-memory offset of every CTA in `mask`, each
// completing `bar` at that same offset in its own CTA.
__device__ __forceinline__ void tma_load_2d_multicast(unsigned dst, const TensorMap* map,
                                                      unsigned bar, int c0, int c1,
                                                      unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n"
        ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar),
          "h"(mask)
        : "memory");
}

__device__ __forceinline__ unsigned cluster_rank() {
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}

// Arrive on the mbarrier at shared address `bar` of CTA `rank` of this cluster, with the default
// semantics (`.release` at CTA scope). Only the consumers' wgmma read the B tiles a peer
// writes, and `wgmma.wait_group` has finished those reads before the arrival, as in
// gemm_hopper's 02. The threads' own reads of a stage (the row scales) are released by each
// thread's arrival on its own CTA's barrier (below). A `.release.cluster` arrival here (this
// file's first draft) costs like a cluster-scope fence once a k block in every consumer warp;
// gemm_hopper's 03_release_cluster measures that on the bf16 GEMM.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
        "}\n"
        ::"r"(bar), "r"(rank)
        : "memory");
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n"
                 ::: "memory");
}

#if FP8_TURNS
// Named barriers 1 and 2 (0 is __syncthreads): turn c belongs to consumer c. The consumer
// whose turn it is syncs (128 threads); the other arrives (128 threads) to hand it over.
constexpr int TURN_BARRIER = 1;

__device__ __forceinline__ void turn_wait(int consumer) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(TURN_BARRIER + consumer), "n"(CONSUMERS * 128)
                 : "memory");
}

__device__ __forceinline__ void turn_give(int to) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(TURN_BARRIER + to), "n"(CONSUMERS * 128)
                 : "memory");
}
#endif

// Pin the accumulator registers at this point of the program: the compiler must not move
// reads of `d` above a wgmma wait, nor writes below a wgmma that reads it.
__device__ __forceinline__ void fence_operands(float (&d)[64]) {
#pragma unroll
    for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d[64x128] (+)= A[64x32] * B[32x128], e4m3 inputs, fp32 accumulate; both operands K-major
// (fp8 wgmma has no transpose); scale_d = 0 overwrites d. Accumulator d[4j + i]: row
// 16*warp + lane/4 (+8 for i >= 2), column 8j + 2*(lane%4) + (i % 2).
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], unsigned long long desc_a,
                                                      unsigned long long desc_b, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
        "%0, %1, %2, %3, %4, %5, %6, %7,"
        "%8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23,"
        "%24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39,"
        "%40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55,"
        "%56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1;\n"
        "}\n"
#define D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
              "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
        : D8(0), D8(8), D8(16), D8(24), D8(32), D8(40), D8(48), D8(56)
#undef D8
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
fp8_gemm_cluster_multicast(const __grid_constant__ TensorMap tmap_a,  // A: M x K e4m3, box 128 x 128
                      const __grid_constant__ TensorMap tmap_b,  // B: N x K e4m3, box 128 (k) x 64
                      const float* __restrict__ scale_a,         // K/128 x M
                      const float* __restrict__ scale_b,         // N/128 x K/128
                      unsigned* __restrict__ D,  // M x N bf16, as pairs packed in 32-bit words
                      int M, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
    const unsigned base = (raw + SWIZZLE_ATOM - 1) & ~static_cast<unsigned>(SWIZZLE_ATOM - 1);
    const unsigned a_smem = base;
    const unsigned b_smem = a_smem + STAGES * A_STAGE_BYTES;
    const unsigned sa_smem = b_smem + STAGES * B_STAGE_BYTES;
    const unsigned full_bar = sa_smem + STAGES * SA_STAGE_BYTES;
    const unsigned empty_bar = full_bar + STAGES * 8;
    const float* sa_tiles = reinterpret_cast<const float*>(smem_raw + (sa_smem - raw));

    const int warpgroup = threadIdx.x / 128;
    const int tiles_m = M / BM, tiles_n = N / BN;
    const int pairs = (tiles_m / CLUSTER) * tiles_n;  // tile pairs (2i, j), (2i + 1, j)
    const int k_blocks = K / BK;
    const unsigned rank = cluster_rank();
    const int cluster = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full_bar + 8 * s, 1);
            // Every consumer thread of this CTA, and every consumer warp of the peer.
            mbar_init(empty_bar + 8 * s, CONSUMERS * 128 + (CLUSTER - 1) * CONSUMERS * 4);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    cluster_sync();  // both CTAs' barriers exist before either CTA touches the other's

    if (warpgroup == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        // Producer: one thread walks every k block of every tile of this CTA; the step
        // counter `it` runs across tiles, so stage and parity continue.
        if (threadIdx.x == 0) {
            int it = 0;
            for (int p = cluster; p < pairs; p += clusters) {
                int pm, tn;
                tile_coords(p, tiles_m / CLUSTER, tiles_n, pm, tn);
                const int tm = pm * CLUSTER + rank;
                for (int kb = 0; kb < k_blocks; ++kb, ++it) {
                    const int s = it % STAGES;
                    if (it >= STAGES) mbar_wait(empty_bar + 8 * s, ((it / STAGES) - 1) & 1);
                    const unsigned bar = full_bar + 8 * s;
                    mbar_expect_tx(bar, STAGE_BYTES);
                    tma_load_2d(a_smem + s * A_STAGE_BYTES, &tmap_a, bar, kb * BK, tm * BM);
                    // This CTA's half of the shared B tile, into both CTAs (whose stage s
                    // is free: its empty barrier counted the consumers of both).
                    tma_load_2d_multicast(b_smem + s * B_STAGE_BYTES + rank * B_HALF_BYTES,
                                          &tmap_b, bar, kb * BK, tn * BN + rank * (BN / CLUSTER),
                                          (1u << CLUSTER) - 1);
                    bulk_load(sa_smem + s * SA_STAGE_BYTES,
                              scale_a + static_cast<long long>(kb) * M + tm * BM,
                              SA_STAGE_BYTES, bar);
                }
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int consumer = warpgroup - 1;
    const int local = threadIdx.x % 128;
    const int warp = local / 32, lane = local % 32;
    const int row_in_tile = consumer * 64 + warp * 16 + lane / 4;  // and row_in_tile + 8
    float chunk[64], total[64];
    int it = 0;
#if FP8_TURNS
    const int other = 1 - consumer;
    if (consumer == 1) turn_give(0);  // consumer 0 goes first
#endif
    for (int p = cluster; p < pairs; p += clusters) {
        int pm, tn;
        tile_coords(p, tiles_m / CLUSTER, tiles_n, pm, tn);
        const int tm = pm * CLUSTER + static_cast<int>(rank);
#pragma unroll
        for (int i = 0; i < 64; ++i) total[i] = 0.0f;
        const float* sb_row = scale_b + static_cast<long long>(tn) * k_blocks;

        for (int kb = 0; kb < k_blocks; ++kb, ++it) {
            const int s = it % STAGES;
            const float sb = __ldg(sb_row + kb);  // in flight while the stage fills
            mbar_wait(full_bar + 8 * s, (it / STAGES) & 1);
            const unsigned a_tile = a_smem + s * A_STAGE_BYTES + consumer * 64 * 128;
            const unsigned b_tile = b_smem + s * B_STAGE_BYTES;
            fence_operands(chunk);
#if FP8_TURNS
            turn_wait(consumer);  // the other consumer's group of this block is already queued
#endif
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / WGMMA_K; ++kk) {
                // K-major 128-byte rows: a k32 step is 32 bytes along the row; 8-row groups
                // are 1024 bytes apart; the leading offset is unused with the 128-byte swizzle.
                const unsigned long long da = smem_desc(a_tile + kk * WGMMA_K, 16, SWIZZLE_ATOM);
                const unsigned long long db = smem_desc(b_tile + kk * WGMMA_K, 16, SWIZZLE_ATOM);
                wgmma_m64n128k32_e4m3(chunk, da, db, kk > 0);
            }
            wgmma_commit();
#if FP8_TURNS
            turn_give(other);
#endif
            wgmma_wait<0>();
            fence_operands(chunk);
            const float* sa = sa_tiles + s * (SA_STAGE_BYTES / 4);
            const float f0 = sa[row_in_tile] * sb;
            const float f1 = sa[row_in_tile + 8] * sb;
            // Tiles and scales of stage s are no longer read by this thread: release the stage
            // here, each thread for its own scale reads, and one lane a warp in the peer, whose
            // producer writes its B half here too (read only by the finished wgmma).
            mbar_arrive(empty_bar + 8 * s);
            if (lane == 0) {
#pragma unroll
                for (unsigned r = 0; r < CLUSTER; ++r) {
                    if (r != rank) mbar_arrive_cluster(empty_bar + 8 * s, r);
                }
            }
            // Promotion: the chunk's fp32 sums, scaled, into the full-precision accumulator.
#pragma unroll
            for (int j = 0; j < 16; ++j) {
                total[4 * j] = fmaf(chunk[4 * j], f0, total[4 * j]);
                total[4 * j + 1] = fmaf(chunk[4 * j + 1], f0, total[4 * j + 1]);
                total[4 * j + 2] = fmaf(chunk[4 * j + 2], f1, total[4 * j + 2]);
                total[4 * j + 3] = fmaf(chunk[4 * j + 3], f1, total[4 * j + 3]);
            }
        }

        // Epilogue: round to bf16 and store pairs; the producer is already filling the
        // stages of this CTA's next tile.
        const long long row = static_cast<long long>(tm) * BM + row_in_tile;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            const long long col = static_cast<long long>(tn) * BN + 8 * j + 2 * (lane % 4);
            D[(row * N + col) / 2] = pack_bf16x2(total[4 * j], total[4 * j + 1]);
            D[((row + 8) * N + col) / 2] = pack_bf16x2(total[4 * j + 2], total[4 * j + 3]);
        }
    }
#if FP8_TURNS
    // Consumer 1 handed consumer 0 one turn more than it took: take it, so no arrival is left.
    if (consumer == 0) turn_wait(0);
#endif
    // No CTA leaves while its peer may still arrive on its barriers.
    cluster_sync();
}
