// Shared by fp8gemm 05, 06 and 07 (block-scaled FP8 GEMM on 128 x 192 tiles, the epilogue
// staged through shared memory; 05's header comment explains the design): the tile geometry,
// the device wrappers (mbarriers, TMA and bulk copies, wgmma), and the three pieces each of
// them runs unchanged: the producer's loads of a k range of a tile, the consumers' wgmma and
// fp32 promotion over a k range, and the staged epilogue of a range of the tile's columns.
// A version includes this file, then defines SMEM_BYTES and what else is its own; its kernel
// holds its schedule and what it does between a tile's k loop and its epilogue.

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
// Bytes a staged D row: the + 16 puts a warp's 8 rows on all 32 banks.
constexpr int D_PITCH = BN * 2 + 16;
constexpr int D_STAGE_BYTES = 64 * D_PITCH;  // one consumer's 64 rows, staged for bulk copies
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
static_assert(128 * PRODUCER_REGS + CONSUMERS * 128 * CONSUMER_REGS <= 65536,
              "setmaxnreg moves registers between warpgroups; it does not add any");


#include "hopper.cuh"
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


// Shared-memory addresses of the pieces every version has: the ring (A tiles, B tiles, scale_a
// rows, STAGES of each), the two consumers' staged D rows, and a full and an empty mbarrier a
// stage; a version's own mbarriers follow at `extra_bar`.
struct Smem {
    unsigned a, b, sa, d, full_bar, empty_bar, extra_bar;
    const float* sa_tiles;  // the scale_a rows, for ordinary loads
};

__device__ __forceinline__ Smem smem_layout(unsigned char* smem_raw) {
    const unsigned raw = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
    Smem s;
    s.a = (raw + SWIZZLE_ATOM - 1) & ~static_cast<unsigned>(SWIZZLE_ATOM - 1);
    s.b = s.a + STAGES * A_STAGE_BYTES;
    s.sa = s.b + STAGES * B_STAGE_BYTES;
    s.d = s.sa + STAGES * SA_STAGE_BYTES;
    s.full_bar = s.d + CONSUMERS * D_STAGE_BYTES;
    s.empty_bar = s.full_bar + STAGES * 8;
    s.extra_bar = s.empty_bar + STAGES * 8;
    s.sa_tiles = reinterpret_cast<const float*>(smem_raw + (s.sa - raw));
    return s;
}

// One thread, before the CTA's first barrier: the ring's mbarriers.
__device__ __forceinline__ void init_ring(const Smem& sm) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
        mbar_init(sm.full_bar + 8 * s, 1);
        mbar_init(sm.empty_bar + 8 * s, CONSUMERS * 128);
    }
}

// Producer (one thread): k blocks [kb_begin, kb_end) of tile (tm, tn) into the ring. `it`
// counts this CTA's stages across tiles and pieces, so each stage's slot and parity continue.
// Rows of B past N (the clipped last tile column) arrive as zeros: TMA fills a box's
// out-of-bounds part and still counts the whole box's bytes on the barrier.
__device__ __forceinline__ void load_range(const Smem& sm, const TensorMap* tmap_a,
                                           const TensorMap* tmap_b, const float* scale_a, int M,
                                           int tm, int tn, int kb_begin, int kb_end, int& it) {
    for (int kb = kb_begin; kb < kb_end; ++kb, ++it) {
        const int s = it % STAGES;
        if (it >= STAGES) mbar_wait(sm.empty_bar + 8 * s, ((it / STAGES) - 1) & 1);
        const unsigned bar = sm.full_bar + 8 * s;
        mbar_expect_tx(bar, STAGE_BYTES);
        tma_load_2d(sm.a + s * A_STAGE_BYTES, tmap_a, bar, kb * BK, tm * BM);
        tma_load_2d(sm.b + s * B_STAGE_BYTES, tmap_b, bar, kb * BK, tn * BN);
        bulk_load(sm.sa + s * SA_STAGE_BYTES, scale_a + static_cast<long long>(kb) * M + tm * BM,
                  SA_STAGE_BYTES, bar);
    }
}

// Consumer (each thread of consumer warpgroup `consumer`, `local` its index in it): total =
// the promoted sum over k blocks [kb_begin, kb_end) of tile column tn, for this thread's
// accumulators; `it` as the producer's.
__device__ __forceinline__ void accumulate_range(float (&total)[ACC], float (&chunk)[ACC],
                                                 const Smem& sm, const float* scale_b, int N,
                                                 int k_blocks, int consumer, int local, int tn,
                                                 int kb_begin, int kb_end, int& it) {
    const int warp = local / 32, lane = local % 32;
    const int row_in_tile = consumer * 64 + warp * 16 + lane / 4;  // and row_in_tile + 8
#pragma unroll
    for (int i = 0; i < ACC; ++i) total[i] = 0.0f;
    // The tile's columns n0 .. n0 + BN - 1 lie in scale_b blocks b0 .. b0 + SPAN - 1 (each
    // clamped to the last block: past N only clipped columns would read it).
    const int n0 = tn * BN;
    const int b0 = n0 / SCALE_BLOCK;
    const int n_blocks = N / SCALE_BLOCK;
    const float* sb_rows[SPAN];
#pragma unroll
    for (int b = 0; b < SPAN; ++b)
        sb_rows[b] = scale_b + static_cast<long long>(min(b0 + b, n_blocks - 1)) * k_blocks;

    for (int kb = kb_begin; kb < kb_end; ++kb, ++it) {
        const int s = it % STAGES;
        float sb[SPAN];
#pragma unroll
        for (int b = 0; b < SPAN; ++b) sb[b] = __ldg(sb_rows[b] + kb);  // in flight during the wait
        mbar_wait(sm.full_bar + 8 * s, (it / STAGES) & 1);
        const unsigned a_tile = sm.a + s * A_STAGE_BYTES + consumer * 64 * 128;
        const unsigned b_tile = sm.b + s * B_STAGE_BYTES;
        fence_operands(chunk);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / WGMMA_K; ++kk) {
            // K-major 128-byte rows: a k32 step is 32 bytes along the row; 8-row groups are
            // 1024 bytes apart; the leading offset is unused with the 128-byte swizzle.
            const unsigned long long da = smem_desc(a_tile + kk * WGMMA_K, 16, SWIZZLE_ATOM);
            const unsigned long long db = smem_desc(b_tile + kk * WGMMA_K, 16, SWIZZLE_ATOM);
            wgmma_m64n192k32_e4m3(chunk, da, db, kk > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        fence_operands(chunk);
        const float* sa = sm.sa_tiles + s * (SA_STAGE_BYTES / 4);
        const float sa0 = sa[row_in_tile], sa1 = sa[row_in_tile + 8];
        mbar_arrive(sm.empty_bar + 8 * s);  // tiles and scales of stage s are no longer read
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
}

// Epilogue through shared memory: this consumer's 64 rows of tile (tm, tn), rounded to bf16,
// into its staging buffer, then one bulk copy a row of the columns [c0, c1) to D (multiples
// of 8; c1 at most the tile's columns below N). The copies run while the consumer starts its
// next piece of work; before it writes the buffer again, the threads that issued them wait
// until they have read it. `if (local < 64) bulk_wait_all();` before the CTA exits.
__device__ __forceinline__ void store_staged(const float (&total)[ACC], const Smem& sm,
                                             unsigned* D, int N, int consumer, int local, int tm,
                                             int tn, int c0, int c1) {
    const int warp = local / 32, lane = local % 32;
    const unsigned d_buf = sm.d + consumer * D_STAGE_BYTES;
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
    if (local < 64 && c1 > c0) {
        const long long row = static_cast<long long>(tm) * BM + consumer * 64 + local;
        bulk_store(D + (row * N + tn * BN + c0) / 2, d_buf + local * D_PITCH + 2 * c0,
                   2 * (c1 - c0));
        bulk_commit();
    }
}

// Named barrier 3: the 256 threads of both consumers (1 and 2 are each consumer's own).
__device__ __forceinline__ void consumers_sync() {
    asm volatile("bar.sync 3, 256;\n" ::: "memory");
}

// A persistent grid's work (06, 07): tiles 0 .. whole - 1 in full rounds, whole tiles, CTA c
// taking c, c + G, ... (05's order); then the `tail` tiles of the last round, each cut into
// `split` contiguous k ranges (1: not cut, as 05), held by `split` consecutive CTAs.
struct Schedule {
    int whole;  // tiles of the full rounds
    int tail;   // tiles of the last, part-empty round
    int split;  // k ranges a last-round tile is cut into
};

// This CTA's piece of the last round, if it has one: range `piece` (k blocks [kb_begin,
// kb_end)) of tile t. Its index in that round is c = blockIdx.x: it takes range c % split of
// last-round tile c / split if c < tail x split (which the version keeps at most the grid).
__device__ __forceinline__ bool last_piece(const Schedule& s, int k_blocks, int& t, int& piece,
                                           int& kb_begin, int& kb_end) {
    const int c = static_cast<int>(blockIdx.x);
    if (c >= s.tail * s.split) return false;
    t = s.whole + c / s.split;
    piece = c % s.split;
    kb_begin = piece * k_blocks / s.split;
    kb_end = (piece + 1) * k_blocks / s.split;
    return true;
}
