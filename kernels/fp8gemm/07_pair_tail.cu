// 07 block-scaled FP8 GEMM: 05 with its last round's tiles shared by CTA pairs over DSMEM
//
// Idea against 06: 06 cut the last round's tiles along K as planned, but its fix-up went
// through global memory (fp32 partials stored by the contributors, a fence, a flag, loads by
// the finisher), and that cost nearly all of the round it saved; a diagnostic build of 06
// without the fix-up (never correct, timed only) ran near the estimate. Here the grid is
// launched as clusters of two CTAs (`__cluster_dims__`), and a last-round tile is shared only
// within a pair, over distributed shared memory: when the pairs (G / 2) outnumber the T tiles
// of the last round, pair c / 2 takes tile c / 2 of that round, each CTA half of its k blocks.
// Each then stores half of the tile's columns: it writes the fp32 partial sums of the other
// half (48 KiB) straight into the peer's drained ring (st.shared::cluster), arrives on the
// peer's mbarrier with a cluster-scope release, waits on its own for the peer's half of its
// columns, adds it, and runs 05's staged epilogue on its 96 columns. Before writing, each
// waits until the peer's consumers have left their ring (one remote arrival on a second
// mbarrier). No global workspace, no flags to reset, and no wait ever leaves the pair, whose
// two CTAs the GPU schedules together; full rounds stay 05's whole tiles in the grouped order.
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

constexpr int BM = 128;                 // tile rows: two consumers x 64
constexpr int BN = 192;                 // tile columns: one wgmma m64n192 a consumer
constexpr int BK = 128;                 // k per stage: one scale block, one 128-byte swizzle row
constexpr int STAGES = 4;
constexpr int CONSUMERS = BM / 64;
constexpr int THREADS = (CONSUMERS + 1) * 128;
constexpr int WGMMA_K = 32;             // e4m3 wgmma: k32 per instruction
constexpr int ACC = BN / 2;             // fp32 accumulators a consumer thread, per set
constexpr int A_STAGE_BYTES = BM * BK;
constexpr int B_STAGE_BYTES = BN * BK;
constexpr int SA_STAGE_BYTES = BM * 4;  // 128 fp32 row scales
constexpr int STAGE_BYTES = A_STAGE_BYTES + B_STAGE_BYTES + SA_STAGE_BYTES;
constexpr int SWIZZLE_ATOM = 1024;      // 8 rows x 128 bytes
constexpr int D_PITCH = BN * 2 + 16;    // bytes a staged D row: + 16 puts a warp's 8 rows on 32 banks
constexpr int D_STAGE_BYTES = 64 * D_PITCH;  // one consumer's 64 rows, staged for bulk copies
constexpr int BARRIERS = 2 * STAGES + 2;  // full and empty a stage; the pair's free and xfer
constexpr int SMEM_BYTES =
    STAGES * STAGE_BYTES + CONSUMERS * D_STAGE_BYTES + BARRIERS * 8 + SWIZZLE_ATOM;
constexpr int GROUP_M = 8;              // tile rows visited together (L2 reuse)
constexpr int SCALE_BLOCK = 128;        // the recipe's block edge
constexpr int RAGGED_N = 1;             // N a multiple of 128 only: the last tile column is clipped
constexpr int PRODUCER_REGS = 24;       // setmaxnreg: 128 x 24 + 256 x 240 <= 65,536
constexpr int CONSUMER_REGS = 240;
// A tile starts at column n0 = tn * BN, so n0 % 128 is a multiple of BN_ALIGN (the largest
// power of two dividing BN, at most 128), and the tile touches SPAN scale_b blocks at most.
constexpr int BN_ALIGN = (BN & -BN) < SCALE_BLOCK ? (BN & -BN) : SCALE_BLOCK;
constexpr int SPAN = (SCALE_BLOCK - BN_ALIGN + BN + SCALE_BLOCK - 1) / SCALE_BLOCK;

static_assert(BK == 128, "a K-major row of A or B is exactly one 128-byte swizzle row");
static_assert(BK == SCALE_BLOCK, "one scale_a column and one scale_b column per stage");
static_assert(BM == CONSUMERS * 64, "each consumer warpgroup owns 64 rows (wgmma m64)");
static_assert(BN == 192 && SPAN == 2 && BN_ALIGN == 64,
              "the wgmma and the two promotion cases below are written for n192");
static_assert(A_STAGE_BYTES % SWIZZLE_ATOM == 0 && B_STAGE_BYTES % SWIZZLE_ATOM == 0,
              "every tile must start on a 1024-byte swizzle atom");
static_assert(D_PITCH % 16 == 0 && (D_PITCH / 4) % 8 == 4,
              "staged D rows 16-byte aligned for bulk copies, rows 4 banks apart");
static_assert(SA_STAGE_BYTES % 16 == 0, "a bulk copy moves whole 16-byte units");
static_assert(STAGE_BYTES < (1 << 20), "an mbarrier counts at most 2^20 - 1 transaction bytes");
static_assert(SMEM_BYTES <= 227 * 1024, "an H100/H200 block gets at most 227 KB of shared memory");
static_assert(128 * PRODUCER_REGS + CONSUMERS * 128 * CONSUMER_REGS <= 65536,
              "setmaxnreg moves registers between warpgroups; it does not add any");

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

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
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

// One 2-D tile from global memory into shared memory; completes on `bar`.
// c0 is the coordinate along the contiguous dimension (k), c1 along the rows.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap* map, unsigned bar,
                                            int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// A contiguous run of bytes (a multiple of 16, 16-byte aligned) into shared memory; completes
// on `bar` like a TMA tile.
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned bytes,
                                          unsigned bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
        ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(src)), "r"(bytes), "r"(bar)
        : "memory");
}

// A contiguous run of bytes (a multiple of 16, 16-byte aligned) from shared to global memory,
// asynchronously, in this thread's current bulk group.
__device__ __forceinline__ void bulk_store(void* dst, unsigned src, unsigned bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n"
                 ::"l"(reinterpret_cast<unsigned long long>(dst)), "r"(src), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Wait until this thread's bulk copies have read their shared-memory source (N = 0: all).
__device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

// Wait until this thread's bulk copies are complete, writes included.
__device__ __forceinline__ void bulk_wait_all() {
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// Make this thread's ordinary shared-memory writes visible to the async proxy (bulk copies).
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void st_shared_u32(unsigned addr, unsigned value) {
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(value) : "memory");
}

// Named barriers 1 and 2 (0 is __syncthreads): the 128 threads of consumer c alone.
__device__ __forceinline__ void consumer_sync(int consumer) {
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + consumer) : "memory");
}

// wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets
// (all >> 4), layout 1 = 128-byte swizzle.
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


// Pin the accumulator registers at this point of the program: the compiler must not move
// reads of `d` above a wgmma wait, nor writes below a wgmma that reads it.
__device__ __forceinline__ void fence_operands(float (&d)[ACC]) {
#pragma unroll
    for (int i = 0; i < ACC; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Accumulator d[4j + i] of a m64nNk32 wgmma: row 16*warp + lane/4 (+8 for i >= 2), column
// 8j + 2*(lane%4) + (i % 2); scale_d = 0 overwrites d.
#define D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
              "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

// d[64x192] (+)= A[64x32] * B[32x192], e4m3 in, fp32 accumulate; both operands K-major.
__device__ __forceinline__ void wgmma_m64n192k32_e4m3(float (&d)[96], unsigned long long desc_a,
                                                      unsigned long long desc_b, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 {"
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
        "%88, %89, %90, %91, %92, %93, %94, %95"
        "}, %96, %97, p, 1, 1;\n"
        "}\n"
        : D8(0), D8(8), D8(16), D8(24), D8(32), D8(40), D8(48), D8(56), D8(64), D8(72), D8(80),
          D8(88)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

#undef D8

// Round a pair of fp32 values to bf16 (nearest, ties to even) and pack them:
// lo at the lower address.
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
}

// Tile `t` of a tiles_m x tiles_n grid, in groups of GROUP_M tile rows.
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
    const int per_group = GROUP_M * tiles_n;
    const int first_m = (t / per_group) * GROUP_M;
    const int rows = min(tiles_m - first_m, GROUP_M);
    const int in_group = t % per_group;
    tm = first_m + in_group % rows;
    tn = in_group / rows;
}

// total += chunk * scale for a tile whose first column lies OFF columns into its first
// scale_b block: the columns of 8-column group j lie in block (OFF + 8j) / 128 of the tile's
// blocks (a boundary is a multiple of 16 columns, so no group straddles one); f0[b] and
// f1[b] are scale_a of rows r and r + 8 times scale_b of block b. OFF is a compile-time
// constant, so every group's factor is chosen at compile time: no select in the loop.
template <int OFF>
__device__ __forceinline__ void promote(float (&total)[ACC], const float (&chunk)[ACC],
                                        const float (&f0)[SPAN], const float (&f1)[SPAN]) {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int b = (OFF + 8 * j) / SCALE_BLOCK;
        total[4 * j] = fmaf(chunk[4 * j], f0[b], total[4 * j]);
        total[4 * j + 1] = fmaf(chunk[4 * j + 1], f0[b], total[4 * j + 1]);
        total[4 * j + 2] = fmaf(chunk[4 * j + 2], f1[b], total[4 * j + 2]);
        total[4 * j + 3] = fmaf(chunk[4 * j + 3], f1[b], total[4 * j + 3]);
    }
}


constexpr int HALF_GROUPS = BN / 16;    // 8-column groups a CTA of a pair stores: half the tile
constexpr int XFER_BYTES = HALF_GROUPS * CONSUMERS * 128 * 16;  // fp32 partials a CTA sends

static_assert(XFER_BYTES <= STAGES * A_STAGE_BYTES,
              "the peer's half of the partial sums lands in the A tiles of the drained ring");

// Both CTAs of the pair, every thread: after it, each CTA's barriers exist for the other.
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

// Named barrier 3: the 256 threads of both consumers (1 and 2 are each consumer's own).
__device__ __forceinline__ void consumers_sync() {
    asm volatile("bar.sync 3, 256;\n" ::: "memory");
}

// The grid's work: tiles 0 .. whole - 1 in full rounds, whole tiles, CTA c taking c, c + G,
// ... (05's order); then the `tail` tiles of the last round, each taken by one CTA, or, when
// the pairs outnumber them, each by both CTAs of pair c / 2, one half of its k blocks each.
struct Schedule {
    int whole;  // tiles of the full rounds
    int tail;   // tiles of the last, part-empty round
    int split;  // 2: a last-round tile is shared by a pair, 1: not (as 05)
};

__device__ __forceinline__ Schedule make_schedule(int tiles, int k_blocks) {
    const int grid = static_cast<int>(gridDim.x);
    Schedule s;
    s.tail = tiles % grid;
    s.whole = tiles - s.tail;
    s.split = s.tail > 0 && 2 * s.tail <= grid && k_blocks >= 2 ? 2 : 1;
    return s;
}

// The next piece of this CTA's work: tile t, k blocks [kb_begin, kb_end), `piece` 0 or 1 (the
// half it holds of a shared tile, also its rank in the pair; 0 for a whole tile); false when
// none is left. `cursor` starts at blockIdx.x. In the last round c = blockIdx.x, and a pair's
// CTAs 2i and 2i + 1 are ranks 0 and 1 of one cluster.
__device__ __forceinline__ bool next_piece(const Schedule& s, int k_blocks, int& cursor, int& t,
                                           int& piece, int& kb_begin, int& kb_end) {
    if (cursor < s.whole) {
        t = cursor;
        piece = 0;
        kb_begin = 0;
        kb_end = k_blocks;
        cursor += static_cast<int>(gridDim.x);
        return true;
    }
    const int c = cursor - s.whole;
    if (c >= s.tail * s.split) return false;
    t = s.whole + c / s.split;
    piece = c % s.split;
    kb_begin = piece * k_blocks / s.split;
    kb_end = (piece + 1) * k_blocks / s.split;
    cursor = s.whole + s.tail * s.split;  // past this CTA's last piece
    return true;
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(THREADS, 1)
fp8_gemm_pair_tail(const __grid_constant__ TensorMap tmap_a,  // A: M x K e4m3, box 128 x 128
                   const __grid_constant__ TensorMap tmap_b,  // B: N x K e4m3, box 192 x 128
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
    const unsigned d_smem = sa_smem + STAGES * SA_STAGE_BYTES;  // staged D rows, per consumer
    const unsigned full_bar = d_smem + CONSUMERS * D_STAGE_BYTES;
    const unsigned empty_bar = full_bar + STAGES * 8;
    const unsigned free_bar = empty_bar + STAGES * 8;  // the peer's ring may take my partials
    const unsigned xfer_bar = free_bar + 8;             // the peer's partials are in my ring
    const float* sa_tiles = reinterpret_cast<const float*>(smem_raw + (sa_smem - raw));

    const int warpgroup = threadIdx.x / 128;
    const int tiles_m = M / BM, tiles_n = RAGGED_N ? (N + BN - 1) / BN : N / BN;
    const int k_blocks = K / BK;
    const Schedule sched = make_schedule(tiles_m * tiles_n, k_blocks);

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full_bar + 8 * s, 1);
            mbar_init(empty_bar + 8 * s, CONSUMERS * 128);
        }
        mbar_init(free_bar, 1);
        mbar_init(xfer_bar, CONSUMERS * 128);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    cluster_sync();  // both CTAs' barriers exist before either arrives on the other's

    if (warpgroup == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS) : "memory");
        // Producer: one thread walks every k block of every piece of this CTA. Rows of B past N
        // (the clipped last tile column) arrive as zeros: TMA fills a box's out-of-bounds part
        // and still counts the whole box's bytes on the barrier.
        if (threadIdx.x == 0) {
            int it = 0, cursor = blockIdx.x, t, piece, kb_begin, kb_end;
            while (next_piece(sched, k_blocks, cursor, t, piece, kb_begin, kb_end)) {
                int tm, tn;
                tile_coords(t, tiles_m, tiles_n, tm, tn);
                for (int kb = kb_begin; kb < kb_end; ++kb, ++it) {
                    const int s = it % STAGES;
                    if (it >= STAGES) mbar_wait(empty_bar + 8 * s, ((it / STAGES) - 1) & 1);
                    const unsigned bar = full_bar + 8 * s;
                    mbar_expect_tx(bar, STAGE_BYTES);
                    tma_load_2d(a_smem + s * A_STAGE_BYTES, &tmap_a, bar, kb * BK, tm * BM);
                    tma_load_2d(b_smem + s * B_STAGE_BYTES, &tmap_b, bar, kb * BK, tn * BN);
                    bulk_load(sa_smem + s * SA_STAGE_BYTES,
                              scale_a + static_cast<long long>(kb) * M + tm * BM,
                              SA_STAGE_BYTES, bar);
                }
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS) : "memory");
    const int consumer = warpgroup - 1;
    const int local = threadIdx.x % 128;
    const int ctid = threadIdx.x - 128;  // 0 .. 255 across both consumers
    const int warp = local / 32, lane = local % 32;
    const int row_in_tile = consumer * 64 + warp * 16 + lane / 4;  // and row_in_tile + 8
    const int n_blocks = N / SCALE_BLOCK;
    float chunk[ACC], total[ACC];
    int it = 0, cursor = blockIdx.x, t, piece, kb_begin, kb_end;
    while (next_piece(sched, k_blocks, cursor, t, piece, kb_begin, kb_end)) {
        int tm, tn;
        tile_coords(t, tiles_m, tiles_n, tm, tn);
#pragma unroll
        for (int i = 0; i < ACC; ++i) total[i] = 0.0f;
        // The tile's columns n0 .. n0 + BN - 1 lie in scale_b blocks b0 .. b0 + SPAN - 1 (each
        // clamped to the last block: past N only clipped columns would read it).
        const int n0 = tn * BN;
        const int b0 = n0 / SCALE_BLOCK;
        const float* sb_rows[SPAN];
#pragma unroll
        for (int b = 0; b < SPAN; ++b)
            sb_rows[b] = scale_b + static_cast<long long>(min(b0 + b, n_blocks - 1)) * k_blocks;

        for (int kb = kb_begin; kb < kb_end; ++kb, ++it) {
            const int s = it % STAGES;
            float sb[SPAN];
#pragma unroll
            for (int b = 0; b < SPAN; ++b) sb[b] = __ldg(sb_rows[b] + kb);  // in flight while the stage fills
            mbar_wait(full_bar + 8 * s, (it / STAGES) & 1);
            const unsigned a_tile = a_smem + s * A_STAGE_BYTES + consumer * 64 * 128;
            const unsigned b_tile = b_smem + s * B_STAGE_BYTES;
            fence_operands(chunk);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / WGMMA_K; ++kk) {
                // K-major 128-byte rows: a k32 step is 32 bytes along the row; 8-row groups
                // are 1024 bytes apart; the leading offset is unused with the 128-byte swizzle.
                const unsigned long long da = smem_desc(a_tile + kk * WGMMA_K, 16, SWIZZLE_ATOM);
                const unsigned long long db = smem_desc(b_tile + kk * WGMMA_K, 16, SWIZZLE_ATOM);
                wgmma_m64n192k32_e4m3(chunk, da, db, kk > 0);
            }
            wgmma_commit();
            wgmma_wait<0>();
            fence_operands(chunk);
            const float* sa = sa_tiles + s * (SA_STAGE_BYTES / 4);
            const float sa0 = sa[row_in_tile], sa1 = sa[row_in_tile + 8];
            mbar_arrive(empty_bar + 8 * s);  // tiles and scales of stage s are no longer read
            float f0[SPAN], f1[SPAN];
#pragma unroll
            for (int b = 0; b < SPAN; ++b) {
                f0[b] = sa0 * sb[b];
                f1[b] = sa1 * sb[b];
            }
            // Promotion, with the tile's offset into its first scale_b block as a compile-time
            // constant in each branch (uniform: every thread of the CTA takes the same one).
            if (n0 % SCALE_BLOCK == 64) {
                promote<64>(total, chunk, f0, f1);  // odd tile columns: 64 columns, then 128
            } else {
                promote<0>(total, chunk, f0, f1);  // even tile columns: 128 columns, then 64
            }
        }

        int lo = 0, hi = BN / 8;  // the 8-column groups this CTA stores
        if (t >= sched.whole && sched.split == 2) {
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
            const unsigned dst = peer_address(a_smem, peer);
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
                        ld_shared_f32x4(a_smem + ((j - lo) * CONSUMERS * 128 + ctid) * 16);
                    total[4 * j] += v.x;
                    total[4 * j + 1] += v.y;
                    total[4 * j + 2] += v.z;
                    total[4 * j + 3] += v.w;
                }
            }
        }

        const int cols = N - n0;  // BN or more, except in the clipped last tile column
        {
            // Epilogue through shared memory, as 05: this consumer's 64 rows, rounded to bf16,
            // into its staging buffer, then one bulk copy a row (its columns below N) to D.
            // The copies run while the consumer starts its next piece; before it writes the
            // buffer again, the threads that issued them wait until they have read it.
            const unsigned d_buf = d_smem + consumer * D_STAGE_BYTES;
            if (local < 64) bulk_wait_read();
            consumer_sync(consumer);
            const unsigned d_row = d_buf + (warp * 16 + lane / 4) * D_PITCH + 4 * (lane % 4);
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                st_shared_u32(d_row + 16 * j, pack_bf16x2(total[4 * j], total[4 * j + 1]));
                st_shared_u32(d_row + 8 * D_PITCH + 16 * j,
                              pack_bf16x2(total[4 * j + 2], total[4 * j + 3]));
            }
            fence_proxy_async_shared();
            consumer_sync(consumer);
            const int c0 = lo * 8, c1 = min(hi * 8, cols);  // this CTA's columns, below N
            if (local < 64 && c1 > c0) {
                const long long row = static_cast<long long>(tm) * BM + consumer * 64 + local;
                bulk_store(D + (row * N + n0 + c0) / 2, d_buf + local * D_PITCH + 2 * c0,
                           2 * (c1 - c0));
                bulk_commit();
            }
        }
    }
    if (local < 64) bulk_wait_all();  // the last tile's copies, before the CTA's memory goes
}
