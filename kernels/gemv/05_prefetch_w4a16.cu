// 05 W4A16 with an L2 prefetch ahead of the ring: 02's kernel, the stream asked for early
//
// Idea against 04: 04 is a different format (FP4 with block scales); this version returns to 02's
// int4 weights and changes only how early the bytes are asked for. 02 sits near 81% of the read
// ceiling at the headline after twelve passes over its instruction mix; its ring is 2 stages deep
// (a third stage cost registers at the 72 a thread that 28 warps an SM allow, and was slower), so a
// warp has at most one 2 KB stage of weights in flight ahead of the one it works on. Hopper's
// cp.async.bulk.prefetch.L2 asks the L2 to fetch a contiguous range with no destination register
// or shared memory and nothing to wait for; the weights are tiled so that a tile's stage is one
// contiguous 2 KB block, so one instruction from lane 0 a stage asks for the block AHEAD stages on,
// and the ring's own copies then mostly hit the L2. At AHEAD = 8 an SM (28 warps) has 28 x 8 x 2
// KB = 448 KB requested ahead; all 132 SMs, 59 MB, a little over the 50 MB L2, so 4 is the
// prediction's centre and 8, 16 bracket it (p0 is 02's loop compiled here, for a same-run
// comparison). Batch 4 and 16 keep 02's loop (p0), with p4 built at batch 4.
//
// Expected bound: 02's work model, 0.121 GB at batch 1, K = 8192, N = 28672: 27 us at the ~4.5
// TB/s read ceiling (a lead). If the prefetch hides the one-stage ring's exposed latency, 85-88% of
// read (~31 us) against 02's 81%.
//
// Size constraints: as 02 (K a multiple of 1024, N a multiple of 32 (16 at batch 1), batch 1..16,
// 16-byte aligned tensors, |x| <= 65504 at batch 1; the suite's tiled weight layout).
//
// Outcome (scratch, same run, direction only; the measured figures are the suite's): every
// prefetch distance lost at the headline, p4 the most and p16 the least; p0 timed level with 02.
// The suite measures p4, the prediction's centre, so the loss has a recorded figure.
//
// Resources (nvcc 13.0, -arch=sm_90, no spills): b1_p0 70 registers, b1_p4/p8/p16 72, 20480 bytes
// of static shared memory; b4_p0 90, b4_p4 92, b16_p0 87 (8192 bytes). compute-sanitizer memcheck:
// clean (batch 1 and 4, K = 1024, N = 512).
//
// Measured variants: b1=p4 b4=p0 b16=p0

constexpr int WARPS = 2;      // warps a block at batch 4 and 16, one tile each
constexpr int KSPLIT_B1 = 4;  // warps a block at batch 1, all on one 16-row tile, each a slice of K
constexpr int PIECES = 2;     // 16-byte pieces a lane copies of each of its 2 rows a stage
// Ring depth: the stage in use and STAGES - 1 in flight. At batch 1 the K split multiplies the
// warps, so one stage ahead a warp holds what two stages ahead held with one warp a tile; 3 deep
// was 5% slower (two warps a tile). Batch 4 and 16 share the depth and stay within ~1% of their
// old 3-deep ring.
constexpr int STAGES = 2;
// Pieces of a stage unrolled at batch 1. Unrolled (2), the loop needs 2 registers over the 72 that
// 28 warps an SM allow and spills; one at a time it fits, and timed level with the unrolled
// build at the headline (4% behind it at K = 4096, N = 14336).
constexpr int UNROLL_B1 = 1;
constexpr int VALUES_PER_PIECE = 32;  // nibbles in 16 bytes
constexpr int GROUP = 128;            // values sharing one scale along K
constexpr int X_VECTORS = 4 * PIECES * 4;  // 16-byte vectors of x a token a stage (256 values)
// At batch 1, 7 blocks of 4 warps an SM: 28 warps, 7 to a scheduler of 16384 registers, so at most
// 72 a thread (32 warps at 64 registers timed the same). Batch 4 and 16 launch 896 blocks, 7 an SM
// (128 registers).
constexpr int BLOCKS_PER_SM = 7;
constexpr int BLOCKS_PER_SM_BATCHED = 7;

static_assert(sizeof(uint4) * 2 == VALUES_PER_PIECE, "a 16-byte piece is 32 nibbles");
static_assert(4 * VALUES_PER_PIECE == GROUP, "the 4 lanes of a row cover exactly one group");
static_assert(X_VECTORS == 32, "at batch 1, one 16-byte copy a lane carries a stage's x");
static_assert(PIECES == 2, "a stage is two groups: the batch-1 offsets are two values");
static_assert(BLOCKS_PER_SM * (KSPLIT_B1 * STAGES * (2 * PIECES * 32 + X_VECTORS) * 16 + 1024) <=
                  228 * 1024,
              "7 batch-1 blocks' rings, and the 1 KB each block reserves, fit in an SM's shared memory");

// Shared memory is addressed by 32-bit offsets taken once before the loop (shared_addr), and the
// loop adds constants to them. Left to the compiler (generic pointers into the ring arrays), each
// stage rebuilt every address from the shared window's base: the batch-1 loop issued ~293
// instructions a warp-stage, ~259 with the offsets (nvcc 13.0, sm_90a, counted in the SASS).
__device__ __forceinline__ unsigned shared_addr(const void* smem) {
    return static_cast<unsigned>(__cvta_generic_to_shared(smem));
}

__device__ __forceinline__ void copy_async_16(unsigned dst, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gmem) : "memory");
}

// x is read by every warp of an SM: kept in L1 (.ca), where the weights bypass it (.cg)
__device__ __forceinline__ void copy_async_16_l1(unsigned dst, const void* gmem) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gmem) : "memory");
}

// Volatile with a memory clobber, so that no shared-memory access moves across a __syncwarp.
__device__ __forceinline__ uint4 load_shared(unsigned addr) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(addr)
                 : "memory");
    return v;
}

__device__ __forceinline__ void store_shared(unsigned addr, uint4 v) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w)
                 : "memory");
}

__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void wait_copies() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// m16n8k16, fp32 accumulate; A rows g and g + 8, B column g, as in 01.
__device__ __forceinline__ void mma_bf16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                         unsigned a3, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_f16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                        unsigned a3, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// (word & mask) | magic in one LOP3 (the C expression compiles to two)
__device__ __forceinline__ unsigned and_or(unsigned word, unsigned mask, unsigned magic) {
    unsigned out;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(out) : "r"(word), "r"(mask), "r"(magic));
    return out;
}

// Values 2j and 2j + 1 of a packed word as the bf16 pair (q - 8, q' - 8), exactly.
__device__ __forceinline__ unsigned dequant_pair(unsigned word, int j) {
    const unsigned biased = and_or(word >> (4 * j), 0x000F000Fu, 0x43004300u);  // (128 + q, 128 + q')
    unsigned out;
    // 0x3F80 is bf16 1.0 and 0xC308 is bf16 -136.0: biased * 1 - 136
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(out) : "r"(biased), "r"(0x3F803F80u), "r"(0xC308C308u));
    return out;
}

// A 16-byte shared-memory read by the lanes where `active` holds; elsewhere the result is left
// undefined (no register is zeroed for it: at batch 1 that kept the loop inside 72 registers).
// Volatile with a memory clobber, so it stays after the __syncwarp that publishes the data.
__device__ __forceinline__ uint4 load_shared_if(unsigned addr, bool active) {
    uint4 v;
    asm volatile(
        "{\n\t.reg .pred on;\n\tsetp.ne.b32 on, %5, 0;\n\t"
        "@on ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n\t}"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "r"(addr), "r"(static_cast<int>(active))
        : "memory");
    return v;
}

// Two floats as an fp16 pair, the first in the low half.
__device__ __forceinline__ unsigned to_f16x2(float lo, float hi) {
    unsigned out;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(out) : "f"(hi), "f"(lo));
    return out;
}

__device__ __forceinline__ float bf16_to_float(unsigned short h) {
    return __uint_as_float(static_cast<unsigned>(h) << 16);
}

__device__ __forceinline__ unsigned short to_bf16(float v) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}

// grid = N / 16 - doubles blocks of 128 threads (batch 1) or N / 32 blocks of 64 threads. wq: N x K/8
// words, tiled as above; scales: N x K/128 bf16.
// Asks the L2 to fetch `bytes` contiguous bytes from device memory: no registers, no shared memory,
// nothing to wait for (the bulk-copy engine's prefetch).
__device__ __forceinline__ void prefetch_l2(const void* p, unsigned bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

template <int BATCH, int AHEAD>
__device__ __forceinline__ void gemv_w4a16(const unsigned short* __restrict__ x,
                                           const unsigned* __restrict__ wq,
                                           const unsigned short* __restrict__ scales,
                                           unsigned short* __restrict__ y, int k, int n) {
    static_assert(BATCH >= 1 && BATCH <= 16, "one or two n8 tiles of batch columns");
    constexpr int NT = (BATCH + 7) / 8;
    constexpr bool FP16 = BATCH == 1;  // x in the ring, converted to fp16; the zero point folded
    constexpr int BLOCK_WARPS = BATCH == 1 ? KSPLIT_B1 : WARPS;
    constexpr int KSPLIT = BATCH == 1 ? KSPLIT_B1 : 1;  // warps over one tile, each over its own part of K
    constexpr int TILES = BLOCK_WARPS / KSPLIT;         // 16-row tiles a block
    __shared__ uint4 ring[BLOCK_WARPS][STAGES][PIECES][2][32];
    // a stage's x, vector v = 16p + 4t + i of the stage kept at 16p + 4i + t: for each (p, i) the
    // 4 lanes of a row read 64 contiguous bytes, so the LDS.128 has no bank conflict
    __shared__ uint4 xring[BLOCK_WARPS][FP16 ? STAGES : 1][FP16 ? X_VECTORS : 1];

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;  // owner of a ring
    // Batch 1: the grid is N / 16 - doubles blocks, the first `doubles` of them two tiles each, two
    // warps a tile; every other block one tile, KSPLIT warps (see the header)
    const int doubles = KSPLIT > 1 ? n / 16 - static_cast<int>(gridDim.x) : 0;
    const bool dbl = KSPLIT > 1 && static_cast<int>(blockIdx.x) < doubles;
    const int ks = KSPLIT == 1 ? 1 : dbl ? 2 : KSPLIT;  // warps on this warp's tile
    const int slice = KSPLIT == 1 ? 0 : warp % ks;  // which slice of K this warp sums
    const int tile = KSPLIT == 1 ? blockIdx.x * TILES + warp
                     : dbl ? 2 * blockIdx.x + warp / 2 : doubles + blockIdx.x;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int row = tile * 16 + g;
    const int kv = k / VALUES_PER_PIECE / ks;  // 16-byte pieces of a row in this warp's part
    const int groups = k / GROUP;
    constexpr int STEP = 4 * PIECES;

    // The suite stores W tiled (see the header): the 2 KB of tile w in stage s are uint4s
    // (s * N/16 + w) * 128 .. + 127, copy j of a lane (j = 2 * piece + half of the tile's rows) is
    // uint4 32 * j + lane of that block. This warp starts at stage slice * (stages a slice).
    const size_t stage_stride = static_cast<size_t>(n / 16) * 128;  // uint4s between a tile's stages
    const uint4* wtile = reinterpret_cast<const uint4*>(wq) +
                         static_cast<size_t>(slice) * (kv / STEP) * stage_stride +
                         static_cast<size_t>(tile) * 128 + lane;
    const unsigned short* sa = scales + static_cast<size_t>(row) * groups + slice * (groups / ks);
    const unsigned short* sb = sa + static_cast<size_t>(8) * groups;
    const uint4* xslice = reinterpret_cast<const uint4*>(x) + slice * (k / ks / 8);
    // x in 16-byte vectors of 8 bf16: the 32 values of a piece are 4 of them
    const uint4* xr[NT];
    bool has_x[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        const int b = g + 8 * nt;
        has_x[nt] = b < BATCH;
        xr[nt] = xslice + static_cast<size_t>(has_x[nt] ? b : 0) * (k / 8) + 4 * t;
    }
    // batch 1: lane L copies vector L of each stage's x, to where the reads below expect it
    const uint4* x_copy = xslice + lane;
    const int x_slot = 16 * (lane >> 4) + 4 * (lane & 3) + ((lane >> 2) & 3);
    // slot s of the rings starts RING_SLOT (XRING_SLOT) bytes after slot 0
    constexpr unsigned RING_SLOT = sizeof(ring[0][0]), XRING_SLOT = sizeof(xring[0][0]);
    constexpr unsigned COPY = sizeof(ring[0][0][0][0]);  // 512 bytes between a lane's copies
    const unsigned ring_at = shared_addr(&ring[warp][0][0][0][lane]);
    const unsigned x_copy_at = FP16 ? shared_addr(&xring[warp][0][0]) + 16 * x_slot : 0u;
    const unsigned x_read_at = FP16 ? shared_addr(&xring[warp][0][0]) + 16 * t : 0u;

    auto issue = [&](int c, int slot) {
        if (c < kv) {
            // stage_stride = 8n, written so: from n, ptxas reads the multiplier off the constant bank
            // instead of keeping it in a register (which spilled at 72)
            const uint4* block = wtile + static_cast<size_t>((c / STEP) * 8) * n;
#pragma unroll
            for (int p = 0; p < PIECES; ++p) {
                copy_async_16(ring_at + slot * RING_SLOT + (2 * p) * COPY, block + 32 * (2 * p));
                copy_async_16(ring_at + slot * RING_SLOT + (2 * p + 1) * COPY, block + 32 * (2 * p + 1));
            }
            if constexpr (FP16) copy_async_16_l1(x_copy_at + slot * XRING_SLOT, x_copy + 4 * c);
        }
        // lane 0 asks the L2 for this tile's 2 KB block AHEAD stages further on (lane 0's wtile is
        // the block's first byte)
        if constexpr (AHEAD > 0) {
            const int ca = c + AHEAD * STEP;
            if (lane == 0 && ca < kv) prefetch_l2(wtile + static_cast<size_t>((ca / STEP) * 8) * n, 2048u);
        }
        commit_copies();
    };

    float acc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) issue(s * STEP, s);

    int slot = 0;
#pragma unroll 1
    for (int c = 0; c < kv; c += STEP) {
        if constexpr (FP16) __syncwarp();  // every lane is done reading the slot refilled next
        issue(c + (STAGES - 1) * STEP, slot == 0 ? STAGES - 1 : slot - 1);
        wait_copies<STAGES - 1>();
        // batch 1: the stage's two scales of rows g and g + 8 (groups c / 4 and c / 4 + 1, adjacent
        // bf16) as one 32-bit load a row: 4-byte aligned, since K is a multiple of 512
        unsigned scale_pair[2] = {0u, 0u};
        if constexpr (FP16) {
            scale_pair[0] = __ldg(reinterpret_cast<const unsigned*>(sa + c / 4));
            scale_pair[1] = __ldg(reinterpret_cast<const unsigned*>(sb + c / 4));
        }
        float offset[2];  // batch 1: what the biases add to the product of each group of the stage
        if constexpr (FP16) {
            // The lane's own vector of x (values 8i..8i+7 of piece 4p + t, p = lane / 16): to fp16,
            // values 2, 3, 6, 7 divided by 16 to meet the codes that sit 16 times too high.
            const unsigned mine = x_copy_at + slot * XRING_SLOT;
            const uint4 v = load_shared(mine);
            const float x0 = __uint_as_float(v.x << 16), x1 = __uint_as_float(v.x & 0xFFFF0000u);
            const float x2 = __uint_as_float(v.y << 16), x3 = __uint_as_float(v.y & 0xFFFF0000u);
            const float x4 = __uint_as_float(v.z << 16), x5 = __uint_as_float(v.z & 0xFFFF0000u);
            const float x6 = __uint_as_float(v.w << 16), x7 = __uint_as_float(v.w & 0xFFFF0000u);
            store_shared(mine, make_uint4(to_f16x2(x0, x1), to_f16x2(x2 * 0.0625f, x3 * 0.0625f),
                                          to_f16x2(x4, x5), to_f16x2(x6 * 0.0625f, x7 * 0.0625f)));
            // (1024 + q) x and (1024 + 16q) x / 16 exceed (q - 8) x by 1032 x and 72 x
            float off = fmaf(1032.0f, (x0 + x1) + (x4 + x5), 72.0f * ((x2 + x3) + (x6 + x7)));
#pragma unroll
            for (int m = 1; m < 16; m <<= 1) off += __shfl_xor_sync(0xffffffffu, off, m);
            offset[0] = __shfl_sync(0xffffffffu, off, 0);   // lanes 0-15 hold group 0 of the stage
            offset[1] = __shfl_sync(0xffffffffu, off, 16);  // lanes 16-31 group 1
            __syncwarp();  // the x the other lanes copied and converted is in place
        }
        // Both pieces at once where registers allow: two independent chains of mmas and loads for
        // ptxas to interleave. At batch 16 that would hoist every x load of the stage and run out of
        // registers, so batch 16 walks the pieces one at a time; batch 1 as UNROLL_B1 says.
#pragma unroll(BATCH == 1 ? UNROLL_B1 : NT == 1 ? PIECES : 1)
        for (int p = 0; p < PIECES; ++p) {
            // piece c + 4p + t lies in group (c + 4p + t) / 4 = c / 4 + p of this slice
            const float scale_a =
                FP16 ? __uint_as_float(p == 0 ? scale_pair[0] << 16 : scale_pair[0] & 0xFFFF0000u)
                     : bf16_to_float(__ldg(sa + c / 4 + p));
            const float scale_b =
                FP16 ? __uint_as_float(p == 0 ? scale_pair[1] << 16 : scale_pair[1] & 0xFFFF0000u)
                     : bf16_to_float(__ldg(sb + c / 4 + p));
            const uint4 a = load_shared(ring_at + slot * RING_SLOT + (2 * p) * COPY);
            const uint4 b = load_shared(ring_at + slot * RING_SLOT + (2 * p + 1) * COPY);
            const unsigned a_words[4] = {a.x, a.y, a.z, a.w};
            const unsigned b_words[4] = {b.x, b.y, b.z, b.w};
            // two partial sums (even and odd words), so the 8 mmas form two chains of 4, not one of 8;
            // both start from zero, so the chains need not wait for the offset's shuffles
            float part[2][NT][4] = {};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                // word i holds values 8i..8i+7 of the piece: two k16 steps, values 0-3 then 4-7
                if constexpr (FP16) {
                    const unsigned a_hi = a_words[i] >> 8, b_hi = b_words[i] >> 8;
                    const unsigned a01 = and_or(a_words[i], 0x000F000Fu, 0x64006400u);
                    const unsigned a23 = and_or(a_words[i], 0x00F000F0u, 0x64006400u);
                    const unsigned a45 = and_or(a_hi, 0x000F000Fu, 0x64006400u);
                    const unsigned a67 = and_or(a_hi, 0x00F000F0u, 0x64006400u);
                    const unsigned b01 = and_or(b_words[i], 0x000F000Fu, 0x64006400u);
                    const unsigned b23 = and_or(b_words[i], 0x00F000F0u, 0x64006400u);
                    const unsigned b45 = and_or(b_hi, 0x000F000Fu, 0x64006400u);
                    const unsigned b67 = and_or(b_hi, 0x00F000F0u, 0x64006400u);
                    // only column 0 of the product is stored, and lanes 0-3 alone supply it: the
                    // others read nothing (a read by all 32 lanes costs the shared-memory pipe up to
                    // 4 times the wavefronts of one by 4); their columns 1-7 are never stored
                    const uint4 xv = load_shared_if(x_read_at + slot * XRING_SLOT + 16 * (16 * p + 4 * i), g == 0);
                    mma_f16(part[i & 1][0], a01, b01, a23, b23, xv.x, xv.y);
                    mma_f16(part[i & 1][0], a45, b45, a67, b67, xv.z, xv.w);
                } else {
                    const unsigned a01 = dequant_pair(a_words[i], 0), a23 = dequant_pair(a_words[i], 1);
                    const unsigned a45 = dequant_pair(a_words[i], 2), a67 = dequant_pair(a_words[i], 3);
                    const unsigned b01 = dequant_pair(b_words[i], 0), b23 = dequant_pair(b_words[i], 1);
                    const unsigned b45 = dequant_pair(b_words[i], 2), b67 = dequant_pair(b_words[i], 3);
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) {
                        uint4 xv = make_uint4(0u, 0u, 0u, 0u);
                        if (has_x[nt]) xv = __ldg(xr[nt] + 4 * (c + 4 * p) + i);
                        mma_bf16(part[i & 1][nt], a01, b01, a23, b23, xv.x, xv.y);
                        mma_bf16(part[i & 1][nt], a45, b45, a67, b67, xv.z, xv.w);
                    }
                }
            }
            // d0, d1 belong to row g, d2, d3 to row g + 8: each row its own scale; at batch 1 the
            // group's offset comes off here, after the mmas
            const float bias = FP16 ? (p == 0 ? offset[0] : offset[1]) : 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                float sum[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    sum[e] = part[0][nt][e] + part[1][nt][e];
                    if constexpr (FP16) sum[e] -= bias;
                }
                acc[nt][0] = fmaf(scale_a, sum[0], acc[nt][0]);
                acc[nt][1] = fmaf(scale_a, sum[1], acc[nt][1]);
                acc[nt][2] = fmaf(scale_b, sum[2], acc[nt][2]);
                acc[nt][3] = fmaf(scale_b, sum[3], acc[nt][3]);
            }
        }
        slot = slot == STAGES - 1 ? 0 : slot + 1;
    }
    wait_copies<0>();

    // at batch 1 the slices meet: the ring is free now, so each tile's warps of slice > 0 leave their
    // sums in it and its slice-0 warp adds them (e = 0 and 2: column 2t of rows g and g + 8, where
    // t = 0 holds column 0)
    float red_part[NT][4] = {};
    if constexpr (KSPLIT > 1) {
        __syncthreads();
        float* red = reinterpret_cast<float*>(&ring[0][0][0][0][0]);
        if (slice > 0) {  // warp w's sums in region w - 1
#pragma unroll
            for (int e = 0; e < 4; e += 2) red[((warp - 1) * 4 + e) * 32 + lane] = acc[0][e];
        }
        __syncthreads();
        if (slice > 0) return;
        for (int w = warp + 1; w < warp + ks; ++w)
#pragma unroll
            for (int e = 0; e < 4; e += 2) red_part[0][e] += red[((w - 1) * 4 + e) * 32 + lane];
    }

#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int col = 8 * nt + 2 * t + e;
            if (col < BATCH) {
                y[static_cast<size_t>(col) * n + row] = to_bf16(acc[nt][e] + red_part[nt][e]);
                y[static_cast<size_t>(col) * n + row + 8] =
                    to_bf16(acc[nt][2 + e] + red_part[nt][2 + e]);
            }
        }
    }
}

// prefetch_w4a16_b1_p<AHEAD>: batch 1 with the L2 prefetch AHEAD stages ahead (p0: 02 itself)
extern "C" __global__ void __launch_bounds__(KSPLIT_B1 * 32, BLOCKS_PER_SM)
prefetch_w4a16_b1_p0(const unsigned short* x, const unsigned* wq, const unsigned short* scales,
                     unsigned short* y, int k, int n) {
    gemv_w4a16<1, 0>(x, wq, scales, y, k, n);
}

extern "C" __global__ void __launch_bounds__(KSPLIT_B1 * 32, BLOCKS_PER_SM)
prefetch_w4a16_b1_p4(const unsigned short* x, const unsigned* wq, const unsigned short* scales,
                     unsigned short* y, int k, int n) {
    gemv_w4a16<1, 4>(x, wq, scales, y, k, n);
}

extern "C" __global__ void __launch_bounds__(KSPLIT_B1 * 32, BLOCKS_PER_SM)
prefetch_w4a16_b1_p8(const unsigned short* x, const unsigned* wq, const unsigned short* scales,
                     unsigned short* y, int k, int n) {
    gemv_w4a16<1, 8>(x, wq, scales, y, k, n);
}

extern "C" __global__ void __launch_bounds__(KSPLIT_B1 * 32, BLOCKS_PER_SM)
prefetch_w4a16_b1_p16(const unsigned short* x, const unsigned* wq, const unsigned short* scales,
                      unsigned short* y, int k, int n) {
    gemv_w4a16<1, 16>(x, wq, scales, y, k, n);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, BLOCKS_PER_SM_BATCHED)
prefetch_w4a16_b4_p0(const unsigned short* x, const unsigned* wq, const unsigned short* scales,
                     unsigned short* y, int k, int n) {
    gemv_w4a16<4, 0>(x, wq, scales, y, k, n);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, BLOCKS_PER_SM_BATCHED)
prefetch_w4a16_b4_p4(const unsigned short* x, const unsigned* wq, const unsigned short* scales,
                     unsigned short* y, int k, int n) {
    gemv_w4a16<4, 4>(x, wq, scales, y, k, n);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, BLOCKS_PER_SM_BATCHED)
prefetch_w4a16_b16_p0(const unsigned short* x, const unsigned* wq, const unsigned short* scales,
                      unsigned short* y, int k, int n) {
    gemv_w4a16<16, 0>(x, wq, scales, y, k, n);
}
