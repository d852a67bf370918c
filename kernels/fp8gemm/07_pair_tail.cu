// 07 block-scaled FP8 GEMM: 05 with its last round's tiles shared by CTA pairs over DSMEM
//
// Idea against 06: 06's exchange goes through global memory (each contributor stores a 96 KiB
// fp32 partial, fences and raises a flag; the finisher loads them back), on the critical path
// of the last round, and diagnostic builds of its first draft (never correct, timed only) put
// its cost at several microseconds at 4096^3, far more than its 17 MB through L2 suggest.
// Here the grid is launched as clusters of two CTAs (`__cluster_dims__`), and a last-round
// tile is shared only within a pair, over distributed shared memory: when the pairs (G / 2)
// outnumber the T tiles of the last round, pair c / 2 takes tile c / 2 of that round, each CTA
// half of its k blocks. Each then stores half of the tile's columns: it writes the fp32
// partial sums of the other half (48 KiB) straight into the peer's drained ring
// (st.shared::cluster), arrives on the peer's mbarrier with a cluster-scope release, waits on
// its own for the peer's half of its columns, adds it, and runs 05's staged epilogue on its 96
// columns. Before writing, each waits until the peer's consumers have left their ring (one
// remote arrival on a second mbarrier). No global workspace, no flags to reset, and no wait
// ever leaves the pair, whose two CTAs the GPU schedules together; full rounds stay 05's whole
// tiles in the grouped order, and the loads, k loop and epilogue are 05's (wide_staged.cuh).
// The price against 06: two ranges a tile, not three, so the last round costs half a round.
//
// Expected bound (estimates, from 05's recorded times): at 4096^3 (704 tiles: 5 rounds and
// T = 44 <= 66 pairs, 16 + 16 of 32 k blocks) 134.1 us x (5 + 16/32) / 6 = 122.9 us, plus the
// exchange: 48 KiB each way between the SMs of a pair, two handshakes: ~1 us (assumed). About
// 123-126 us, 88-90% of the library's 111.3 us. 2048^3 (176 tiles: T = 44, 8 + 8 of 16):
// 27.9 us x 1.5 / 2 = 20.9 us + ~1, ~85% of 18.7 us. 4096 x 7168 (1,216 tiles: 9 rounds and
// T = 28): 10 rounds' time becomes 9.5, 120.7 -> ~116 us at K = 2048 (~90% of 104.9 us) and
// 822.1 -> ~782 us at K = 16384. 8192^3 (2,752 tiles: T = 112 > 66): not shared; 07 is 05
// there, launched as pairs.
//
// Checked where: none of the suite's check shapes shares a tile (at most 96 tiles, one round,
// the grid capped at the tile count); 2048^3, the smallest timed shape (the sanitizers'
// --small), 4096^3 and both 4096 x 7168 shapes do, each checked before it is timed.
//
// Resources (nvcc 13.0, -gencode arch=compute_90a,code=sm_90a --resource-usage): 168
// registers at compile time (setmaxnreg then gives the consumers 240), no spills; 16 named
// barriers reserved; 218,192 bytes of dynamic shared memory (05's, and two more mbarriers); no
// module globals.
//
// Constraints: as 05 (M and K multiples of 128, N a multiple of 128, the last tile column
// clipped; K-major e4m3 A and B; sm_90a); an even grid (the launch's min(tiles, SMs): at
// least 132 tiles, or an even tile count), as a cluster of two needs; a shared tile needs
// K >= 256.

#include "wide_staged.cuh"

constexpr int BARRIERS = 2 * STAGES + 2;  // full and empty a stage; the pair's free and xfer
constexpr int SMEM_BYTES =
    STAGES * STAGE_BYTES + CONSUMERS * D_STAGE_BYTES + BARRIERS * 8 + SWIZZLE_ATOM;
constexpr int HALF_GROUPS = BN / 16;    // 8-column groups a CTA of a pair stores: half the tile
constexpr int XFER_BYTES = HALF_GROUPS * CONSUMERS * 128 * 16;  // fp32 partials a CTA sends

static_assert(SMEM_BYTES <= 227 * 1024, "an H100/H200 block gets at most 227 KB of shared memory");
static_assert(XFER_BYTES <= STAGES * A_STAGE_BYTES,
              "the peer's half of the partial sums lands in the A tiles of the drained ring");

// Every thread of both CTAs of the pair that has not exited.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n"
                 ::: "memory");
}

// The shared address `addr` of this CTA, as the same offset in CTA `rank` of the cluster.
__device__ __forceinline__ unsigned peer_address(unsigned addr, unsigned rank) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
    return remote;
}

// Arrive on the peer's mbarrier `bar` (a cluster address), releasing this thread's earlier
// writes (and, through a CTA barrier before it, its CTA's) at cluster scope.
__device__ __forceinline__ void mbar_arrive_remote(unsigned bar) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(bar)
                 : "memory");
}

// Wait for phase `parity` of this CTA's mbarrier `bar`, acquiring at cluster scope what the
// peer's arrivals released.
__device__ __forceinline__ void mbar_wait_cluster(unsigned bar, unsigned parity) {
    unsigned done = 0;
    do {
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n"
            "}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

__device__ __forceinline__ void st_cluster_f32x4(unsigned addr, float a, float b, float c,
                                                 float d) {
    asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n"
                 ::"r"(addr), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

__device__ __forceinline__ float4 ld_shared_f32x4(unsigned addr) {
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr) : "memory");
    return v;
}

// A last-round tile is shared by the two CTAs of a pair (split 2) when the pairs outnumber
// the last round's tiles and there are two k blocks to share; else 05's schedule (split 1).
__device__ __forceinline__ Schedule make_schedule(int tiles, int k_blocks) {
    const int grid = static_cast<int>(gridDim.x);
    Schedule s;
    s.tail = tiles % grid;
    s.whole = tiles - s.tail;
    s.split = s.tail > 0 && 2 * s.tail <= grid && k_blocks >= 2 ? 2 : 1;
    return s;
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(THREADS, 1)
fp8_gemm_pair_tail(const __grid_constant__ TensorMap tmap_a,  // A: M x K e4m3, box 128 x 128
                   const __grid_constant__ TensorMap tmap_b,  // B: N x K e4m3, box 192 x 128
                   const float* __restrict__ scale_a,         // K/128 x M
                   const float* __restrict__ scale_b,         // N/128 x K/128
                   unsigned* __restrict__ D,  // M x N bf16, as pairs packed in 32-bit words
                   int M, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    const Smem sm = smem_layout(smem_raw);
    const unsigned free_bar = sm.extra_bar;  // the peer's ring may take my partials
    const unsigned xfer_bar = free_bar + 8;  // the peer's partials are in my ring
    const int warpgroup = threadIdx.x / 128;
    const int tiles_m = M / BM, tiles_n = RAGGED_N ? (N + BN - 1) / BN : N / BN;
    const int k_blocks = K / BK;
    const Schedule sched = make_schedule(tiles_m * tiles_n, k_blocks);

    if (threadIdx.x == 0) {
        init_ring(sm);
        mbar_init(free_bar, 1);
        mbar_init(xfer_bar, CONSUMERS * 128);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    cluster_sync();  // both CTAs' barriers exist before either arrives on the other's

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
        int lo = 0, hi = BN / 8;  // the 8-column groups this CTA stores
        if (sched.split == 2) {
            // A shared tile: each CTA of the pair stores half of its columns (groups
            // [lo, hi)), so it sends the partial sums of the other half to the peer's ring and
            // adds the peer's for its own. Both rings are drained: every stage loaded was read.
            const unsigned peer = static_cast<unsigned>(piece) ^ 1u;
            lo = piece * HALF_GROUPS;
            hi = lo + HALF_GROUPS;
            const int peer_lo = HALF_GROUPS - lo;
            fence_proxy_async_shared();  // the ring's TMA writes, before the peer's stores
            consumers_sync();  // both consumers are done with this CTA's ring
            if (ctid == 0) mbar_arrive_remote(peer_address(free_bar, peer));
            mbar_wait_cluster(free_bar, 0);  // and the peer with its own
            const unsigned dst = peer_address(sm.a, peer);
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                if (j < lo || j >= hi) {
                    st_cluster_f32x4(dst + ((j - peer_lo) * CONSUMERS * 128 + ctid) * 16,
                                     total[4 * j], total[4 * j + 1], total[4 * j + 2],
                                     total[4 * j + 3]);
                }
            }
            mbar_arrive_remote(peer_address(xfer_bar, peer));  // every thread, its own stores
            mbar_wait_cluster(xfer_bar, 0);
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                if (j >= lo && j < hi) {
                    const float4 v =
                        ld_shared_f32x4(sm.a + ((j - lo) * CONSUMERS * 128 + ctid) * 16);
                    total[4 * j] += v.x;
                    total[4 * j + 1] += v.y;
                    total[4 * j + 2] += v.z;
                    total[4 * j + 3] += v.w;
                }
            }
        }
        // This CTA's columns below N (the clipped last tile column may leave it none).
        store_staged(total, sm, D, N, consumer, local, tm, tn, lo * 8, min(hi * 8, N - tn * BN));
    }
    if (local < 64) bulk_wait_all();  // the last tile's copies, before the CTA's memory goes
    // No CTA leaves while its peer may still write its ring (the mbarriers already order this;
    // the cluster barrier says it in the form a race checker follows).
    cluster_sync();
}
