// 02 cluster multicast: 01 with pairs of CTAs sharing each B tile through TMA multicast
//
// Idea against 01: clusters of two CTAs on neighbouring tile rows and the same tile column
// (`__cluster_dims__(2, 1, 1)`, so an ordinary launch forms them). Each CTA loads its own A tile
// (128 x 64) and half of the B tile both need (two of the four 64 x 64 boxes), multicast into
// the same offset of both CTAs' shared memory (`.multicast::cluster`); every full barrier still
// counts 48 KiB, half of B arriving from the peer's copy. A stage is free again only when the
// consumers of both CTAs are done with it, so each consumer warp arrives on the empty barrier of
// its own CTA and on the peer's (mapa + mbarrier.arrive.shared::cluster): 16 arrivals a stage.
// Before it exits, each producer waits for the last STAGES releases, so no peer arrives on the
// barrier of a CTA that has left. The persistent loop walks cluster tiles (256 x 256), so the
// grid must be a multiple of 2 CTAs and at most the clusters that fit at once, which the
// launcher asks the driver (cuOccupancyMaxActiveClusters).
//
// Expected bound (estimate): per SM, each 1,024-cycle k-step reads 48 KiB from L2 in 01 and
// 32 KiB here; at ~780 TFLOP/s that is ~9.2 against ~6.1 TB/s of L2 reads across 132 SMs, so
// 01 may be held back by the L2 at the large sizes and this version not: +0-3% at 4096^3,
// more at 8192^3, where the two panels a wave uses stop fitting in the 50 MB L2.
//
// Resources (nvcc 13.0, -arch=sm_90a --resource-usage): as 01, 168 registers at compile time
// (232 for consumers at run time), no spills; 230,464 bytes of dynamic shared memory.
//
// Constraints: M a multiple of 256 (a cluster's two tile rows), N of 256, K of 64; row pitches
// multiples of 16 bytes; sm_90a; C holds bf16 bit patterns, tensor map boxes 64 x 64.

constexpr int BM = 128;                 // block tile rows (2 consumers x 64)
constexpr int BN = 256;                 // block tile columns (one wgmma n256)
constexpr int BK = 64;                  // k per stage: 64 bf16 = one 128-byte swizzle row
constexpr int STAGES = 4;
constexpr int CLUSTER = 2;             // CTAs of a cluster: tile rows sharing a B tile
constexpr int CONSUMERS = BM / 64;      // math warpgroups, 64 rows each
constexpr int THREADS = (CONSUMERS + 1) * 128;
constexpr int WGMMA_K = 16;
constexpr int BOX = 64;                 // TMA box width: 64 bf16 = 128 bytes, the swizzle span
constexpr int A_STAGE_BYTES = BM * BK * 2;
constexpr int B_BOX_BYTES = BK * BOX * 2;
constexpr int B_STAGE_BYTES = BK * BN * 2;
constexpr int STAGE_BYTES = A_STAGE_BYTES + B_STAGE_BYTES;
constexpr int B_BOXES_PER_CTA = BN / BOX / CLUSTER;  // B boxes each CTA loads and multicasts
constexpr int C_COLS = 128;            // columns of C staged per pass (a half tile)
constexpr int C_BOX_BYTES = 64 * BOX * 2;  // 64 rows x 128 bytes
constexpr int C_STAGE_BYTES = 64 * C_COLS * 2;  // one consumer's staging buffer
constexpr int SWIZZLE_ATOM = 1024;      // 8 rows x 128 bytes
constexpr int BARRIERS = 2 * STAGES;
constexpr int SMEM_BYTES =
    STAGES * STAGE_BYTES + CONSUMERS * C_STAGE_BYTES + BARRIERS * 8 + SWIZZLE_ATOM;
constexpr int GROUP_M = 16;            // tile rows visited together (L2 reuse)
constexpr int EMPTY_ARRIVALS = CONSUMERS * 4 * CLUSTER;  // one a consumer warp, every CTA

static_assert(BK * 2 == 128, "a K-major row of A must be exactly one 128-byte swizzle row");
static_assert(BM == CONSUMERS * 64, "each consumer warpgroup owns 64 rows (wgmma m64)");
static_assert(BN % (BOX * CLUSTER) == 0, "the CTAs of a cluster split B's boxes evenly");
static_assert(CLUSTER == 1 || CLUSTER == 2, "pairs of CTAs at most");
static_assert(BN % C_COLS == 0 && C_COLS % 16 == 0 && C_COLS % BOX == 0,
              "C is staged in whole 64-column boxes, 16 columns a stmatrix");
static_assert(GROUP_M % CLUSTER == 0, "a group holds whole clusters");
static_assert(A_STAGE_BYTES % SWIZZLE_ATOM == 0 && B_BOX_BYTES % SWIZZLE_ATOM == 0,
              "every tile and box must start on a 1024-byte swizzle atom");
static_assert(STAGE_BYTES < (1 << 20), "an mbarrier counts at most 2^20 - 1 transaction bytes");
static_assert(SMEM_BYTES <= 227 * 1024, "an H100/H200 block gets at most 227 KB of shared memory");

// The driver's CUtensorMap: 128 opaque bytes, 64-byte aligned; the host fills it.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}

// The qualifiers of the consumers' stage release: none here, so the arrival has the default
// semantics, `.release` at CTA scope. 03 compiles this file with ".release.cluster" instead.
#ifndef GH_RELEASE_SEMANTICS
#define GH_RELEASE_SEMANTICS ""
#endif

// Arrive on the barrier at the same shared-memory offset in CTA `rank` of the cluster.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive" GH_RELEASE_SEMANTICS ".shared::cluster.b64 _, [remote];\n"
        "}\n" ::"r"(bar), "r"(rank)
        : "memory");
}

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done = 0;
    do {
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n"
            "}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

__device__ __forceinline__ unsigned cluster_rank() {
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}

// One 2-D tile from global memory into this CTA's shared memory; completes on `bar`.
// c0 is the coordinate along the contiguous dimension, c1 along the other.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap* map, unsigned bar,
                                            int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// The same tile into the same offset of every CTA in `mask`, each completing on its own `bar`.
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

// One 2-D box of shared memory out to global memory, tracked by this thread's bulk groups.
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, unsigned src, int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
        ::"l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(src)
        : "memory");
}

__device__ __forceinline__ void bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Wait until this thread's stores have finished reading shared memory (the buffer is reusable).
__device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

__device__ __forceinline__ void bulk_wait_all() {
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// Barrier `id` (1..15) for the 128 threads of one consumer warpgroup.
__device__ __forceinline__ void warpgroup_sync(int id) {
    asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

// wgmma shared-memory matrix descriptor: start address, leading and stride
// byte offsets (all >> 4), layout 1 = 128-byte swizzle.
__device__ __forceinline__ unsigned long long smem_desc(unsigned addr, unsigned leading,
                                                        unsigned stride) {
    return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4)
         | static_cast<unsigned long long>((leading & 0x3FFFF) >> 4) << 16
         | static_cast<unsigned long long>((stride & 0x3FFFF) >> 4) << 32
         | 1ull << 62;
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// d[64x256] += A[64x16] * B[16x256]; A K-major (not transposed), B N-major
// (imm-trans-b = 1). Accumulator d[4j + i]: row 16*warp + lane/4 (+8 for
// i >= 2), column 8j + 2*(lane%4) + (i % 2).
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], unsigned long long desc_a,
                                                 unsigned long long desc_b) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7,"
        "%8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23,"
        "%24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39,"
        "%40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55,"
        "%56, %57, %58, %59, %60, %61, %62, %63,"
        "%64, %65, %66, %67, %68, %69, %70, %71,"
        "%72, %73, %74, %75, %76, %77, %78, %79,"
        "%80, %81, %82, %83, %84, %85, %86, %87,"
        "%88, %89, %90, %91, %92, %93, %94, %95,"
        "%96, %97, %98, %99, %100, %101, %102, %103,"
        "%104, %105, %106, %107, %108, %109, %110, %111,"
        "%112, %113, %114, %115, %116, %117, %118, %119,"
        "%120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, 0, 1;\n"
        "}\n"
#define D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
              "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
        : D8(0), D8(8), D8(16), D8(24), D8(32), D8(40), D8(48), D8(56),
          D8(64), D8(72), D8(80), D8(88), D8(96), D8(104), D8(112), D8(120)
#undef D8
        : "l"(desc_a), "l"(desc_b));
}

// Round a pair of fp32 values to bf16 (nearest, ties to even) and pack them:
// lo at the lower address.
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
}

// Four 8 x 8 bf16 blocks to shared memory; lane l gives the address of row l % 8 of block l / 8,
// and register i holds this lane's pair of block i (row lane / 4, columns 2 (lane % 4) + 0, 1).
__device__ __forceinline__ void stmatrix_x4(unsigned addr, unsigned r0, unsigned r1, unsigned r2,
                                            unsigned r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
                 ::"r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

// Cluster tile `t` (CLUSTER tile rows x one tile column) of a grid of cluster tiles, in groups
// of GROUP_M tile rows, row index fastest within a group.
__device__ __forceinline__ void cluster_tile_coords(int t, int rows_c, int tiles_n, int& cm,
                                                    int& tn) {
    constexpr int GROUP_C = GROUP_M / CLUSTER;
    const int per_group = GROUP_C * tiles_n;
    const int first = (t / per_group) * GROUP_C;
    const int rows = min(rows_c - first, GROUP_C);
    const int in_group = t % per_group;
    cm = first + in_group % rows;
    tn = in_group / rows;
}

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
gemm_bf16_cluster_multicast(const __grid_constant__ TensorMap tmap_a,  // A: M x K, box 64 x 128
                            const __grid_constant__ TensorMap tmap_b,  // B: K x N, box 64 x 64
                            const __grid_constant__ TensorMap tmap_c,  // C: M x N, box 64 x 64
                            int M, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
    const unsigned base = (raw + SWIZZLE_ATOM - 1) & ~static_cast<unsigned>(SWIZZLE_ATOM - 1);
    const unsigned a_smem = base;
    const unsigned b_smem = a_smem + STAGES * A_STAGE_BYTES;
    const unsigned c_smem = b_smem + STAGES * B_STAGE_BYTES;
    const unsigned full_bar = c_smem + CONSUMERS * C_STAGE_BYTES;
    const unsigned empty_bar = full_bar + STAGES * 8;

    const int warpgroup = threadIdx.x / 128;
    const unsigned rank = CLUSTER > 1 ? cluster_rank() : 0;
    const int cluster_id = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;
    const int rows_c = M / (BM * CLUSTER), tiles_n = N / BN;
    const int cluster_tiles = rows_c * tiles_n;
    const int k_tiles = K / BK;

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full_bar + 8 * s, 1);
            mbar_init(empty_bar + 8 * s, EMPTY_ARRIVALS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    // Both CTAs' barriers exist before either CTA multicasts or arrives remotely.
    cluster_sync();

    if (warpgroup == 0) {
        // The producer needs few registers: hand them to the consumers.
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x == 0) {
            int it = 0;
            for (int t = cluster_id; t < cluster_tiles; t += clusters) {
                int cm, tn;
                cluster_tile_coords(t, rows_c, tiles_n, cm, tn);
                const int tm = cm * CLUSTER + static_cast<int>(rank);
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % STAGES;
                    // Free in every CTA of the cluster (the multicast writes them all).
                    if (it >= STAGES) mbar_wait(empty_bar + 8 * s, ((it / STAGES) - 1) & 1);
                    const unsigned bar = full_bar + 8 * s;
                    mbar_expect_tx(bar, STAGE_BYTES);
                    tma_load_2d(a_smem + s * A_STAGE_BYTES, &tmap_a, bar, kt * BK, tm * BM);
#pragma unroll
                    for (int i = 0; i < B_BOXES_PER_CTA; ++i) {
                        const int box = static_cast<int>(rank) * B_BOXES_PER_CTA + i;
                        const unsigned dst = b_smem + s * B_STAGE_BYTES + box * B_BOX_BYTES;
                        if constexpr (CLUSTER > 1) {
                            tma_load_2d_multicast(dst, &tmap_b, bar, tn * BN + box * BOX, kt * BK,
                                                  static_cast<unsigned short>((1u << CLUSTER) - 1));
                        } else {
                            tma_load_2d(dst, &tmap_b, bar, tn * BN + box * BOX, kt * BK);
                        }
                    }
                }
            }
            // Wait for the last STAGES releases: after them no peer arrives here again.
            for (int i = 0; i < STAGES; ++i, ++it) {
                if (it >= STAGES) mbar_wait(empty_bar + 8 * (it % STAGES), ((it / STAGES) - 1) & 1);
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int consumer = warpgroup - 1;
    const int local = threadIdx.x % 128;
    const int warp = local / 32, lane = local % 32;
    const unsigned c_buf = c_smem + consumer * C_STAGE_BYTES;
    // stmatrix addresses: lane gives row (lane % 8) of 8x8 block lane / 8; blocks 0, 1 are rows
    // +0 and +8 of a column group of 8, blocks 2, 3 the same rows of the next column group.
    const int st_row = warp * 16 + (lane % 8) + 8 * ((lane / 8) % 2);
    const int st_col = 8 * (lane / 16);  // 0 or 8 within a 16-column step
    float acc[128];
    int it = 0;
    for (int t = cluster_id; t < cluster_tiles; t += clusters) {
        int cm, tn;
        cluster_tile_coords(t, rows_c, tiles_n, cm, tn);
        const int tm = cm * CLUSTER + static_cast<int>(rank);
#pragma unroll
        for (int i = 0; i < 128; ++i) acc[i] = 0.0f;

        int previous = -1;  // the stage whose MMAs may still be running
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
            const int s = it % STAGES;
            mbar_wait(full_bar + 8 * s, (it / STAGES) & 1);
            const unsigned a_tile = a_smem + s * A_STAGE_BYTES + consumer * 64 * 128;
            const unsigned b_tile = b_smem + s * B_STAGE_BYTES;
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / WGMMA_K; ++kk) {
                const unsigned long long da = smem_desc(a_tile + kk * WGMMA_K * 2, 16, SWIZZLE_ATOM);
                const unsigned long long db =
                    smem_desc(b_tile + kk * WGMMA_K * 128, B_BOX_BYTES, SWIZZLE_ATOM);
                wgmma_m64n256k16(acc, da, db);
            }
            wgmma_commit();
            // Stage t's group may run on; stage t-1's has finished reading its tiles.
            wgmma_wait<1>();
            if (previous >= 0 && lane == 0) {
#pragma unroll
                for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(empty_bar + 8 * previous, r);
            }
            previous = s;
        }
        wgmma_wait<0>();
        if (previous >= 0 && lane == 0) {
#pragma unroll
            for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(empty_bar + 8 * previous, r);
        }

        // Epilogue: C_COLS columns at a time, bf16 through the swizzled staging buffer, out by TMA.
#pragma unroll
        for (int h = 0; h < BN / C_COLS; ++h) {
            if (local == 0) bulk_wait_read();  // the last store out of this buffer has read it
            warpgroup_sync(1 + consumer);
#pragma unroll
            for (int p = 0; p < C_COLS / 16; ++p) {
                const int j = (h * C_COLS) / 8 + 2 * p;  // first of the two 8-column groups
                const int col = 16 * p + st_col;         // within the staged columns
                const unsigned addr = c_buf + (col / BOX) * C_BOX_BYTES + st_row * 128 +
                                      ((((col % BOX) / 8) ^ (st_row % 8)) << 4);
                stmatrix_x4(addr, pack_bf16x2(acc[4 * j], acc[4 * j + 1]),
                            pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]),
                            pack_bf16x2(acc[4 * j + 4], acc[4 * j + 5]),
                            pack_bf16x2(acc[4 * j + 6], acc[4 * j + 7]));
            }
            // The generic-proxy writes above must be visible to the TMA engine's reads.
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            warpgroup_sync(1 + consumer);
            if (local == 0) {
#pragma unroll
                for (int box = 0; box < C_COLS / BOX; ++box) {
                    tma_store_2d(&tmap_c, c_buf + box * C_BOX_BYTES,
                                 tn * BN + h * C_COLS + box * BOX, tm * BM + consumer * 64);
                }
                bulk_commit();
            }
        }
    }
    if (local == 0) bulk_wait_all();
}
