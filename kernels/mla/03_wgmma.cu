// 03 MLA decode: 64 heads as wgmma's M, the cache tile by TMA, both products on Hopper's warpgroup MMA
//
// What it computes: the same as 01 and 02. From 64 query heads up (a multiple of 64), one CTA takes
// 64 heads, the M side of wgmma's m64nNk16, as FlashMLA does; below that it launches 02's m1_s5
// kernel, included from 02_bulk_ring.cu (16 heads would leave three quarters of every wgmma empty).
//
// Idea against 02. At 128 heads the work is bound by the tensor cores (242 FLOP a cache byte,
// above the card's ridge), and mma.sync feeds them from registers that ldmatrix fills, 16 x 8 at a
// time. wgmma reads both operands from shared memory (the scores) or one from registers (P V),
// 64 x N x 16 an instruction, asynchronously:
//  - TMA (cp.async.bulk.tensor.2d) moves the cache: a 32-token tile of one page is nine boxes of
//    64 dims x 32 rows, 4 KB each, written in the 128-byte swizzle wgmma reads; the tensor map
//    spans the whole pool (pages x 64 rows of 576 values) and the block table picks the row. Q (64
//    heads x 576) arrives the same way once, with the first tile, in nine 8 KB boxes.
//  - S = Q K^T: each of the two warpgroups takes half of k (18 of the 36 k16 steps, straight from
//    the Q and tile boxes: k step j is box j / 4, 32 bytes into its 128-byte rows), 18
//    wgmma.m64n32k16 into 16 fp32 a thread. The halves are added through shared memory: thread t of
//    one warpgroup holds the same 16 (head, token) entries as thread t of the other, so the
//    exchange is 16 coalesced words each way, double-buffered by tile parity, one CTA barrier a
//    tile. Both warpgroups then hold the same scores and run the same online softmax (a head's 32
//    scores sit on 4 lanes: two shuffles for its max, two at the end for its sum).
//  - O += P V: P stays in registers; the m64n32 accumulator layout is the A-fragment layout of a
//    k16 step (two 8-token column blocks a step), so each k step's four A registers are bf16 pairs
//    of the scores just computed. Each warpgroup owns 256 of the 512 output dims: two
//    wgmma.m64n256k16 a tile with B = V read N-major (transposed) from four of the tile's boxes
//    (leading offset 4 KB from one 64-dim box to the next, 2 KB a k16 step of 16 token rows),
//    128 fp32 accumulators a thread.
//  - a three-slot ring with full and empty mbarriers; thread 0 refills a slot once all 256
//    threads have arrived on its empty barrier; the split merge is 02's (merge_splits).
//
// Expected bound (estimate), B = 1, H = 128, T = 32768: 9.1 GFLOP; at the ~780 TFLOP/s that
// cuBLAS sustains, 11.7 us. A 32-token tile is 36 wgmma.m64n32k16 (64 x 32 x 16 MACs each, ~16
// cycles at 2048 bf16 MACs a cycle an SM) plus 4 wgmma.m64n256k16 (~128 cycles each): ~1100 cycles
// of tensor work, plus ~400 exposed (the exchange barrier, the softmax, waiting on each wgmma
// group); 2 head blocks x 1024 tiles over 132 SMs is 15.5 tiles an SM: ~23k cycles, ~13 us at
// ~1.8 GHz, plus ~3 us to write and merge 64 splits x 128 heads x 2 KB (16 MB, L2-resident) and a
// launch: expect 15-20 us, 60-75% of the FLOP floor, ahead of 02.
//
// Size constraints: as 02; H a multiple of 64 for the wgmma path; the pool's row pitch (1152 B)
// and q's are multiples of 16 (TMA); sm_90a (wgmma): compiled with -arch=sm_90a.
//
// Resources (nvcc 13.0, -arch=sm_90a, --resource-usage, no spills): wgmma_m64_s3 176 registers,
// 218160 bytes of dynamic shared memory (the suite's WGMMA_SMEM; 1 KB of it aligns the ring to
// the 1024-byte swizzle atom).
//
// Measured variant: m64_s3 (at 64 heads and up; 02's m1_s5 below)

#include "02_bulk_ring.cu"

constexpr int WG_HB = 64;                              // heads a CTA: wgmma's M
constexpr int WG_STAGES = 3;                           // ring slots
constexpr int BOX = 64;                                // elements a box row: 128 bytes, the swizzle span
constexpr int KBOXES = DQK / BOX;                      // 9 boxes across the 576 values of a row
constexpr int Q_BOX_BYTES = WG_HB * BOX * 2;           // 8192
constexpr int T_BOX_BYTES = TT * BOX * 2;              // 4096
constexpr int WG_TILE_BYTES = KBOXES * T_BOX_BYTES;    // 36864
constexpr int WG_Q_BYTES = KBOXES * Q_BOX_BYTES;       // 73728
constexpr int XCH_FLOATS = 16 * 128;                   // one warpgroup's half of a score tile
constexpr int XCH_BYTES = 2 * 2 * XCH_FLOATS * 4;      // [tile parity][warpgroup]: 32768
constexpr int ATOM = 1024;                             // 128-byte swizzle atom: 8 rows x 128 bytes
constexpr int WG_SMEM = ATOM + WG_Q_BYTES + WG_STAGES * WG_TILE_BYTES + XCH_BYTES + 2 * WG_STAGES * 8;

static_assert(DQK % BOX == 0 && KSTEPS % 2 == 0, "whole boxes, two k halves");
static_assert(THREADS == 256, "two warpgroups");
static_assert(DV == 2 * 256, "each warpgroup owns one wgmma n256 of the output");
static_assert(WG_SMEM <= 227 * 1024, "one CTA's shared memory");
static_assert((MAX_SPLITS + 4 * SLICE) * 4 <= WG_STAGES * WG_TILE_BYTES, "the merge reuses the ring");

__device__ unsigned int wg_tickets[MAX_GROUPS] = {};
__device__ unsigned int wg_done[MAX_GROUPS] = {};

// The driver's CUtensorMap: 128 opaque bytes, 64-byte aligned; the host fills it.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

// One 2-D box from global memory into shared memory; completes on `bar`. c0 along the contiguous
// dimension (the 576 values), c1 along the rows.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap* map, unsigned bar, int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets (all >> 4),
// layout 1 = 128-byte swizzle.
__device__ __forceinline__ unsigned long long smem_desc(unsigned addr, unsigned leading, unsigned stride) {
    return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
           static_cast<unsigned long long>((leading & 0x3FFFF) >> 4) << 16 |
           static_cast<unsigned long long>((stride & 0x3FFFF) >> 4) << 32 | 1ull << 62;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// d[64 x 32] += A[64 x 16] B[16 x 32], both K-major in shared memory. d[4j + i]: row 16 warp + lane / 4
// (+ 8 for i >= 2), column 8 j + 2 (lane % 4) + i % 2.
__device__ __forceinline__ void wgmma_m64n32k16_ss(float (&d)[16], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(da), "l"(db));
}

// d[64 x 256] += A[64 x 16] B[16 x 256]; A from registers (the mma.sync m16n8k16 A fragment of the
// warp's 16 rows), B N-major in shared memory (imm-trans-b = 1). d[4j + i] as above, j < 32.
__device__ __forceinline__ void wgmma_m64n256k16_rs(float (&d)[128], const unsigned (&a)[4], unsigned long long db) {
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
        "}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n"
        "}\n"
#define D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
              "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
        : D8(0), D8(8), D8(16), D8(24), D8(32), D8(40), D8(48), D8(56),
          D8(64), D8(72), D8(80), D8(88), D8(96), D8(104), D8(112), D8(120)
#undef D8
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    return static_cast<unsigned>(to_bf16(lo)) | (static_cast<unsigned>(to_bf16(hi)) << 16);
}

// Tile n of the CTA's range (32 rows of one page) into ring slot s: nine 64-dim boxes.
__device__ __forceinline__ void wg_fill(unsigned ring, unsigned bars, int s, const TensorMap* tmap_pool,
                                        const int* __restrict__ table_b, int tok) {
    const unsigned full = bars + 8 * s;
    mbar_expect_tx(full, WG_TILE_BYTES);
    const int row = __ldg(table_b + tok / PAGE) * PAGE + tok % PAGE;
#pragma unroll
    for (int box = 0; box < KBOXES; ++box)
        tma_load_2d(ring + s * WG_TILE_BYTES + box * T_BOX_BYTES, tmap_pool, full, box * BOX, row);
}

// Grid (splits, H / 64, B); block 256; dynamic shared memory WG_SMEM.
// tmap_q: q as [B H rows][576], boxes of 64 x 64; tmap_pool: the pool as [pages 64 rows][576], boxes
// of 64 x 32. part_ml, part_acc, out as in 02.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
wgmma_m64_s3(const __grid_constant__ TensorMap tmap_q, const __grid_constant__ TensorMap tmap_pool,
             const int* __restrict__ table, float2* __restrict__ part_ml, float* __restrict__ part_acc,
             unsigned short* __restrict__ out, int H, int T, int tokens_per_split, float scale_log2) {
    extern __shared__ unsigned char smem_raw[];
    // the 128-byte swizzle is a function of address bits 4-9: boxes start on 1024 bytes
    const unsigned raw = smem_addr(smem_raw);
    const unsigned base = (raw + ATOM - 1) & ~static_cast<unsigned>(ATOM - 1);
    const unsigned sq = base;                      // Q: [9 boxes][64 rows][128 B]
    const unsigned ring = sq + WG_Q_BYTES;         // [3 slots][9 boxes][32 rows][128 B]
    float* xch = reinterpret_cast<float*>(smem_raw + (ring - raw) + WG_STAGES * WG_TILE_BYTES);
    const unsigned bars = ring + WG_STAGES * WG_TILE_BYTES + XCH_BYTES;  // full[3], empty[3]

    const int t = threadIdx.x % 128, wg = threadIdx.x / 128;
    const int lane = t % 32, wq = t / 32, tq = lane & 3;
    const int split = blockIdx.x, splits = gridDim.x;
    const int hb = blockIdx.y, b = blockIdx.z;
    const int head0 = hb * WG_HB;
    const int group = b * gridDim.y + hb;
    const int t_begin = split * tokens_per_split;
    const int t_end = min(T, t_begin + tokens_per_split);
    const int tiles = (t_end - t_begin) / TT;
    const int* table_b = table + static_cast<size_t>(b) * (T / PAGE);

    if (threadIdx.x == 0) {
        for (int s = 0; s < WG_STAGES; ++s) {
            mbar_init(bars + 8 * s, 1);                        // full: thread 0's arrive, plus the bytes
            mbar_init(bars + 8 * (WG_STAGES + s), THREADS);    // empty: every thread
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        // Q rides on slot 0's first phase with tile 0: its bytes are expected without an arrive (the
        // slot's one arrive is tile 0's)
        asm volatile("mbarrier.expect_tx.shared::cta.b64 [%0], %1;\n" ::"r"(bars), "r"(WG_Q_BYTES) : "memory");
#pragma unroll
        for (int box = 0; box < KBOXES; ++box)
            tma_load_2d(sq + box * Q_BOX_BYTES, &tmap_q, bars, box * BOX, b * H + head0);
        for (int n = 0; n < min(WG_STAGES, tiles); ++n) wg_fill(ring, bars, n, &tmap_pool, table_b, t_begin + n * TT);
    }
    __syncthreads();

    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.0f;
    float m_lo = __int_as_float(0xff800000u), m_hi = m_lo, l_lo = 0.0f, l_hi = 0.0f;

    for (int i = 0; i < tiles; ++i) {
        const int s = i % WG_STAGES;
        mbar_wait(bars + 8 * s, (i / WG_STAGES) & 1);
        const unsigned tile = ring + s * WG_TILE_BYTES;

        // this warpgroup's half of k: k16 steps 18 wg .. 18 wg + 17
        float sc[16];
#pragma unroll
        for (int j = 0; j < 16; ++j) sc[j] = 0.0f;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < KSTEPS / 2; ++kk) {
            const int ks = wg * (KSTEPS / 2) + kk;
            const unsigned off = (ks % 4) * 32;  // 16 values into the 128-byte row of box ks / 4
            wgmma_m64n32k16_ss(sc, smem_desc(sq + (ks / 4) * Q_BOX_BYTES + off, 16, ATOM),
                               smem_desc(tile + (ks / 4) * T_BOX_BYTES + off, 16, ATOM));
        }
        wgmma_commit();
        wgmma_wait<0>();

        // add the two halves: both warpgroups form x0 + x1 in the same order, so they agree bit for bit
        {
            float* mine = xch + ((i & 1) * 2 + wg) * XCH_FLOATS;
            const float* other = xch + ((i & 1) * 2 + (1 - wg)) * XCH_FLOATS;
#pragma unroll
            for (int j = 0; j < 16; ++j) mine[j * 128 + t] = sc[j];
            __syncthreads();
#pragma unroll
            for (int j = 0; j < 16; ++j) {
                const float x = other[j * 128 + t];
                sc[j] = (wg == 0 ? sc[j] + x : x + sc[j]) * scale_log2;
            }
        }

        // online softmax: row lo = head 16 wq + lane / 4 (entries i = 0, 1), row hi = + 8 (i = 2, 3)
        float mx_lo = fmaxf(sc[0], sc[1]), mx_hi = fmaxf(sc[2], sc[3]);
#pragma unroll
        for (int j = 1; j < 4; ++j) {
            mx_lo = fmaxf(mx_lo, fmaxf(sc[4 * j], sc[4 * j + 1]));
            mx_hi = fmaxf(mx_hi, fmaxf(sc[4 * j + 2], sc[4 * j + 3]));
        }
#pragma unroll
        for (int off = 1; off < 4; off <<= 1) {
            mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, off));
            mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, off));
        }
        const float mn_lo = fmaxf(m_lo, mx_lo), mn_hi = fmaxf(m_hi, mx_hi);
        const float al_lo = fast_exp2(m_lo - mn_lo), al_hi = fast_exp2(m_hi - mn_hi);  // 0 on the first tile
        m_lo = mn_lo;
        m_hi = mn_hi;
        float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            sc[4 * j] = fast_exp2(sc[4 * j] - mn_lo);
            sc[4 * j + 1] = fast_exp2(sc[4 * j + 1] - mn_lo);
            sc[4 * j + 2] = fast_exp2(sc[4 * j + 2] - mn_hi);
            sc[4 * j + 3] = fast_exp2(sc[4 * j + 3] - mn_hi);
            sum_lo += sc[4 * j] + sc[4 * j + 1];
            sum_hi += sc[4 * j + 2] + sc[4 * j + 3];
        }
        l_lo = l_lo * al_lo + sum_lo;  // this thread's 8 tokens; the 4 lanes of a row add up at the end
        l_hi = l_hi * al_hi + sum_hi;
        // A fragments of the two k16 steps: column blocks 2 kk and 2 kk + 1
        unsigned pa[2][4];
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            pa[kk][0] = pack_bf16(sc[8 * kk], sc[8 * kk + 1]);
            pa[kk][1] = pack_bf16(sc[8 * kk + 2], sc[8 * kk + 3]);
            pa[kk][2] = pack_bf16(sc[8 * kk + 4], sc[8 * kk + 5]);
            pa[kk][3] = pack_bf16(sc[8 * kk + 6], sc[8 * kk + 7]);
        }
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            o[4 * j] *= al_lo;
            o[4 * j + 1] *= al_lo;
            o[4 * j + 2] *= al_hi;
            o[4 * j + 3] *= al_hi;
        }

        // O[:, 256 wg + ...] += P V: V's dims 256 wg .. + 255 are boxes 4 wg .. 4 wg + 3
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 2; ++kk)
            wgmma_m64n256k16_rs(o, pa[kk], smem_desc(tile + 4 * wg * T_BOX_BYTES + kk * 16 * 128, T_BOX_BYTES, ATOM));
        wgmma_commit();
        wgmma_wait<0>();

        // done with the slot; thread 0 refills it with tile i + 3 once every thread is
        mbar_arrive(bars + 8 * (WG_STAGES + s));
        if (threadIdx.x == 0 && i + WG_STAGES < tiles) {
            mbar_wait(bars + 8 * (WG_STAGES + s), (i / WG_STAGES) & 1);
            wg_fill(ring, bars, s, &tmap_pool, table_b, t_begin + (i + WG_STAGES) * TT);
        }
    }

    // publish this split's state: rows head0 + 16 wq + lane / 4 (+ 8), dims 256 wg + 8 j + 2 (lane % 4)
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
        l_lo += __shfl_xor_sync(0xffffffffu, l_lo, off);
        l_hi += __shfl_xor_sync(0xffffffffu, l_hi, off);
    }
    {
        const size_t row_lo = static_cast<size_t>(b) * H + head0 + 16 * wq + lane / 4;
        const size_t row_hi = row_lo + 8;
        float* lo = part_acc + (row_lo * splits + split) * DV + 256 * wg + 2 * tq;
        float* hi = part_acc + (row_hi * splits + split) * DV + 256 * wg + 2 * tq;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            *reinterpret_cast<float2*>(lo + 8 * j) = make_float2(o[4 * j], o[4 * j + 1]);
            *reinterpret_cast<float2*>(hi + 8 * j) = make_float2(o[4 * j + 2], o[4 * j + 3]);
        }
        if (wg == 0 && tq == 0) {
            part_ml[row_lo * splits + split] = make_float2(m_lo, l_lo);
            part_ml[row_hi * splits + split] = make_float2(m_hi, l_hi);
        }
    }
    // every tile was consumed, so every copy landed: the ring is the merge's scratch
    merge_splits(part_ml, part_acc, out, static_cast<size_t>(b) * H + head0, WG_HB, splits, &wg_tickets[group],
                 &wg_done[group], reinterpret_cast<float*>(smem_raw + (ring - raw)));
}
