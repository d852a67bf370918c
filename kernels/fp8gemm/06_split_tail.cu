// 06 block-scaled FP8 GEMM: 05 with the tiles of its part-empty last round split along K
//
// Idea against 05: a persistent grid of G CTAs that hands out whole tiles runs ceil(tiles / G)
// rounds, and the last holds only tiles % G of them (at 4096^3: 704 tiles on 132 CTAs are 5
// full rounds and 44 tiles, 88 SMs idle in the sixth). Here every full round stays 05's,
// whole tiles in the grouped order; only the T tiles of the last round are cut into
// S = min(G / T, k blocks, 4) contiguous k-block ranges (none when S < 2), so S x T <= G CTAs
// share that round. CTA c < S x T takes range c / T of last-round tile c % T: CTA c < T holds
// the first range and finishes the tile; CTAs c + T, c + 2T, ... hold the rest and contribute.
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
// flags are module globals sized for MAX_CTAS CTAs, so the launch is 05's, unchanged.
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
constexpr int SMEM_BYTES =
    STAGES * STAGE_BYTES + CONSUMERS * D_STAGE_BYTES + 2 * STAGES * 8 + SWIZZLE_ATOM;
constexpr int GROUP_M = 8;              // tile rows visited together (L2 reuse)
constexpr int SCALE_BLOCK = 128;        // the recipe's block edge
constexpr int RAGGED_N = 1;             // N a multiple of 128 only: the last tile column is clipped
constexpr int PRODUCER_REGS = 24;       // setmaxnreg: 128 x 24 + 256 x 240 <= 65,536
constexpr int CONSUMER_REGS = 240;
// A tile starts at column n0 = tn * BN, so n0 % 128 is a multiple of BN_ALIGN (the largest
// power of two dividing BN, at most 128), and the tile touches SPAN scale_b blocks at most.
constexpr int BN_ALIGN = (BN & -BN) < SCALE_BLOCK ? (BN & -BN) : SCALE_BLOCK;
constexpr int SPAN = (SCALE_BLOCK - BN_ALIGN + BN + SCALE_BLOCK - 1) / SCALE_BLOCK;
constexpr int MAX_CTAS = 132;           // workspace slots and flags: one a CTA (H100 SXM, H200)
constexpr int MAX_SPLIT = 4;            // k ranges a last-round tile is cut into, at most
constexpr int PARTIAL_FLOAT4 = BM * BN / 4;  // a tile of fp32 partial sums, in 16-byte words

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
static_assert(ACC % 4 == 0 && PARTIAL_FLOAT4 == 2 * 128 * (ACC / 4),
              "a partial slot is the 256 consumer threads' accumulators, 16 bytes at a time");

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


// One slot of fp32 partial sums a CTA, stored so that the 256 consumer threads write and read
// consecutive 16-byte words (float4 i of consumer thread t at index i * 256 + t), and one flag
// a slot: 1 from a contributor's release until its finisher has read the slot, else 0.
__device__ float4 split_partials[MAX_CTAS * PARTIAL_FLOAT4];
__device__ unsigned split_flags[MAX_CTAS];

// Named barrier 3: the 256 threads of both consumers (1 and 2 are each consumer's own).
__device__ __forceinline__ void consumers_sync() {
    asm volatile("bar.sync 3, 256;\n" ::: "memory");
}

__device__ __forceinline__ void flag_release(unsigned* flag) {
    asm volatile("st.release.gpu.global.u32 [%0], 1;\n" ::"l"(flag) : "memory");
}

__device__ __forceinline__ void flag_acquire(const unsigned* flag) {
    unsigned value = 0;
    do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(value) : "l"(flag) : "memory");
    } while (value == 0);
}

// The grid's work: tiles 0 .. whole - 1 in full rounds, whole tiles, CTA c taking c, c + G,
// ... (05's order); then the `tail` tiles of the last round, each cut into `split` k ranges.
struct Schedule {
    int whole;  // tiles of the full rounds
    int tail;   // tiles of the last, part-empty round
    int split;  // k ranges a last-round tile is cut into (1: not cut, as 05)
};

__device__ __forceinline__ Schedule make_schedule(int tiles, int k_blocks) {
    const int grid = static_cast<int>(gridDim.x);
    Schedule s;
    s.tail = tiles % grid;
    s.whole = tiles - s.tail;
    s.split = s.tail == 0 ? 1 : min(min(grid / s.tail, k_blocks), MAX_SPLIT);
    return s;
}

// The next piece of this CTA's work: tile t, k blocks [kb_begin, kb_end), range `piece` of the
// tile (0 for whole tiles and for the range that finishes a split tile); false when none is
// left. `cursor` starts at blockIdx.x. In the last round the CTA's index is c = blockIdx.x, and
// it takes range c / tail of tile whole + c % tail if c < tail x split (at most the grid).
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
    t = s.whole + c % s.tail;
    piece = c / s.tail;
    kb_begin = piece * k_blocks / s.split;
    kb_end = (piece + 1) * k_blocks / s.split;
    cursor = s.whole + s.tail * s.split;  // past this CTA's last piece
    return true;
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
    const unsigned raw = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
    const unsigned base = (raw + SWIZZLE_ATOM - 1) & ~static_cast<unsigned>(SWIZZLE_ATOM - 1);
    const unsigned a_smem = base;
    const unsigned b_smem = a_smem + STAGES * A_STAGE_BYTES;
    const unsigned sa_smem = b_smem + STAGES * B_STAGE_BYTES;
    const unsigned d_smem = sa_smem + STAGES * SA_STAGE_BYTES;  // staged D rows, per consumer
    const unsigned full_bar = d_smem + CONSUMERS * D_STAGE_BYTES;
    const unsigned empty_bar = full_bar + STAGES * 8;
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
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

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
            continue;  // no epilogue: the finisher stores the tile
        }
        if (t >= sched.whole) {
            // The finisher of a split tile: add each contributor's partial sums, in range order.
            for (int p = 1; p < sched.split; ++p) {
                const int peer = static_cast<int>(blockIdx.x) + p * sched.tail;
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
        }

        const int cols = N - n0;  // BN or more, except in the clipped last tile column
        {
            // Epilogue through shared memory, as 05: this consumer's 64 rows, rounded to bf16,
            // into its staging buffer, then one bulk copy a row (the row's columns below N) to
            // D. The copies run while the consumer starts its next piece; before it writes the
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
            if (local < 64) {
                const long long row = static_cast<long long>(tm) * BM + consumer * 64 + local;
                bulk_store(D + (row * N + n0) / 2, d_buf + local * D_PITCH, 2 * min(cols, BN));
                bulk_commit();
            }
        }
    }
    if (local < 64) bulk_wait_all();  // the last tile's copies, before the CTA's memory goes
}
