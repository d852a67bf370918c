// 02 W4A16: 4-bit weights with a bf16 scale per 128 values, dequantised in registers
//
// Idea against 01: the same stream, a quarter of the bytes. W is stored as signed 4-bit integers
// q in -8..7 (kept as q + 8 in a nibble), 8 to a 32-bit word, with one bf16 scale s per row and per
// group of 128 values along K: w = (q - 8) * s (the scales add 1/64 of the packed bytes). The warp
// layout, the cp.async ring and the bf16 mma with fp32 accumulation are 01's; what changes is the
// step between shared memory and the mma:
// - Dequantise without converting: a nibble OR-ed into the low mantissa bits of bf16 128.0 (0x4300)
//   is the bf16 value 128 + q, exactly; one bf16x2 fma subtracts 136 from two values at once,
//   leaving q - 8, exactly. The words are packed so that (word >> 4j) & 0x000F000F puts values 2j
//   and 2j + 1 in the two halves: nibbles 0-3 hold the even values 0, 2, 4, 6 of the word's 8,
//   nibbles 4-7 the odd ones. Per 8 values: 3 shifts, 4 LOP3 (mask and OR in one, written as
//   inline lop3: the compiler emitted two LOP3 for the C expression) and 4 bf16x2 fma.
// - Scale after the group, not before the mma: a lane's 16-byte piece is 32 values and the 4 lanes
//   of a row together are one group of 128, so each piece's 8 mmas run into a fresh fp32 partial
//   that is multiplied by its row's scale and added to the total (4 FMAs a lane a group). The mma
//   inputs stay exact small integers; every rounding is an fp32 one.
// - Two chains, not one: each piece's 8 mmas alternate between two partial sums, and the two pieces
//   of a stage are unrolled (batch 1 and 4), so a warp has independent work while an mma is in
//   flight; with 14 warps an SM there is little else to hide latency behind.
// - At batch 1, x travels with the weights: each stage's 512 bytes of x are copied into the warp's
//   ring (one 16-byte cp.async.ca a lane) by the stage's own copy group, so they arrive with the
//   weights, stages ahead, instead of an __ldg issued in the stage that uses them, whose first miss
//   of every stage waited on the L2. A stage is 256 values of K, four times 01's, so 02 meets four
//   times as many of these waits a byte. Lanes read x that other lanes copied: two __syncwarp a
//   stage. Batch 4 and 16 keep the __ldg (4 and 16 times the bytes would not fit 7 blocks an SM).
// - The weights arrive tiled for the stream (the suite's tile_w4a16 packs them so): the 2 KB a warp
//   copies in one stage (16 rows x 128 bytes) are one block, and the blocks of every warp for the
//   same stage lie side by side. Warps move along K together, so at any moment the grid reads one
//   contiguous window of N / 16 blocks (3.7 MB at the headline), and each copy instruction of a
//   warp reads 512 contiguous bytes. In row order the same stage was 16 runs of 128 bytes a warp,
//   rows 4 KB apart; timed against it in one run, the tiled order was 2-4% faster at every shape.
// The dequantisation costs ~1 integer operation a value: 235 M values / (132 SMs x 64 integer lanes
// x 1.98 GHz) = 14 us, half of the 27 us the bytes take, so memory should still bound it (on CUDA
// cores with fp32 FMAs the same values need ~4 operations each and would meet the memory time).
//
// Expected bound: at batch 1, K = 8192, N = 28672 the work model counts 117.4 MB of packed weights
// + 3.7 MB of scales + x + y = 0.121 GB: 27 us at the ~4.5 TB/s read ceiling (a lead). With a
// quarter of 01's time, fixed costs weigh four times more: launch and ramp (~3 us), the drain at
// the end, the scale loads. Expect 75-85% of read (~33 us), about 3.2x faster than torch's bf16
// F.linear on the dequantised weights, which moves 4x the bytes.
//
// Size constraints: K a multiple of 256 (4 lanes x 2 pieces x 32 values a row a stage; the groups
// of 128 follow), N a multiple of 32, batch 1..16, every tensor 16-byte aligned.

constexpr int WARPS = 2;    // warps a block; each owns 16 rows, so a block owns 32
constexpr int PIECES = 2;   // 16-byte pieces a lane copies of each of its 2 rows a stage
constexpr int STAGES = 3;   // ring depth: the stage in use and STAGES - 1 in flight
constexpr int VALUES_PER_PIECE = 32;  // nibbles in 16 bytes
constexpr int GROUP = 128;            // values sharing one scale along K
constexpr int ROWS_PER_BLOCK = WARPS * 16;
constexpr int X_VECTORS = 4 * PIECES * 4;  // 16-byte vectors of x a token a stage (256 values)
constexpr int X_PITCH = X_VECTORS + 4;     // a slot of the x ring, padded by 64 bytes
// 1792 warps at N = 28672 should all be resident at once (one wave, no tail): 7 blocks of 2 warps
// on each of 132 SMs is 1848. Registers must fit 14 warps: 4 to a scheduler of 16384 registers, so
// at most 128 a thread.
constexpr int BLOCKS_PER_SM = 7;

static_assert(sizeof(uint4) * 2 == VALUES_PER_PIECE, "a 16-byte piece is 32 nibbles");
static_assert(4 * VALUES_PER_PIECE == GROUP, "the 4 lanes of a row cover exactly one group");
static_assert(X_VECTORS == 32, "at batch 1, one 16-byte copy a lane carries a stage's x");
static_assert(BLOCKS_PER_SM * (WARPS * STAGES * (2 * PIECES * 32 + X_PITCH) * 16 + 1024) <= 228 * 1024,
              "7 blocks' rings, and the 1 KB each block reserves, fit in an SM's shared memory");

__device__ __forceinline__ void copy_async_16(void* smem, const void* gmem) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gmem) : "memory");
}

// x is read by every warp of an SM: kept in L1 (.ca), where the weights bypass it (.cg)
__device__ __forceinline__ void copy_async_16_l1(void* smem, const void* gmem) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gmem) : "memory");
}

__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void wait_copies() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// m16n8k16, bf16 in, fp32 accumulate; register roles as in 01.
__device__ __forceinline__ void mma_bf16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                         unsigned a3, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Values 2j and 2j + 1 of a packed word as the bf16 pair (q - 8, q' - 8), exactly.
__device__ __forceinline__ unsigned dequant_pair(unsigned word, int j) {
    unsigned biased;  // (word >> 4j) & 0x000F000F | 0x43004300 = (128 + q, 128 + q'), one LOP3
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(biased) : "r"(word >> (4 * j)), "r"(0x000F000Fu), "r"(0x43004300u));
    unsigned out;
    // 0x3F80 is bf16 1.0 and 0xC308 is bf16 -136.0: biased * 1 - 136
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(out) : "r"(biased), "r"(0x3F803F80u), "r"(0xC308C308u));
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

// grid = N / 32 blocks of 64 threads. wq: N x K/8 words, tiled as above; scales: N x K/128 bf16.
template <int BATCH>
__device__ __forceinline__ void gemv_w4a16(const unsigned short* __restrict__ x,
                                           const unsigned* __restrict__ wq,
                                           const unsigned short* __restrict__ scales,
                                           unsigned short* __restrict__ y, int k, int n) {
    static_assert(BATCH >= 1 && BATCH <= 16, "one or two n8 tiles of batch columns");
    constexpr int NT = (BATCH + 7) / 8;
    constexpr bool X_IN_RING = BATCH == 1;
    __shared__ uint4 ring[WARPS][STAGES][PIECES][2][32];
    // a stage's x, vector v = 16p + 4t + i of the stage kept at 16p + 4i + t: for each (p, i) the
    // 4 lanes of a row read 64 contiguous bytes, so the LDS.128 has no bank conflict
    __shared__ uint4 xring[WARPS][X_IN_RING ? STAGES : 1][X_PITCH];

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int row = blockIdx.x * ROWS_PER_BLOCK + warp * 16 + g;
    const int kv = k / VALUES_PER_PIECE;  // 16-byte pieces of a packed row
    const int groups = k / GROUP;
    constexpr int STEP = 4 * PIECES;

    // The suite stores W tiled (see the header): the 2 KB a warp reads in stage s are one block,
    // and the blocks of all warps for stage s are adjacent. Copy j of a lane (j = 2 * piece + half)
    // is uint4 32 * j + lane of its warp's block, so each copy instruction reads 512 bytes in a row.
    const int warps = n / 16;
    const uint4* wtile = reinterpret_cast<const uint4*>(wq) +
                         static_cast<size_t>(blockIdx.x * WARPS + warp) * 128 + lane;
    const size_t stage_stride = static_cast<size_t>(warps) * 128;  // uint4s between a warp's stages
    const unsigned short* sa = scales + static_cast<size_t>(row) * groups;
    const unsigned short* sb = sa + static_cast<size_t>(8) * groups;
    // x in 16-byte vectors of 8 bf16: the 32 values of a piece are 4 of them
    const uint4* xr[NT];
    bool has_x[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        const int b = g + 8 * nt;
        has_x[nt] = b < BATCH;
        xr[nt] = reinterpret_cast<const uint4*>(x) + static_cast<size_t>(has_x[nt] ? b : 0) * (k / 8) + 4 * t;
    }
    // batch 1: lane L copies vector L of each stage's x, to where the reads above expect it
    const uint4* x_copy = reinterpret_cast<const uint4*>(x) + lane;
    const int x_slot = 16 * (lane >> 4) + 4 * (lane & 3) + ((lane >> 2) & 3);

    auto issue = [&](int c, int slot) {
        if (c < kv) {
            const uint4* block = wtile + static_cast<size_t>(c / STEP) * stage_stride;
#pragma unroll
            for (int p = 0; p < PIECES; ++p) {
                copy_async_16(&ring[warp][slot][p][0][lane], block + 32 * (2 * p));
                copy_async_16(&ring[warp][slot][p][1][lane], block + 32 * (2 * p + 1));
            }
            if constexpr (X_IN_RING) copy_async_16_l1(&xring[warp][slot][x_slot], x_copy + 4 * c);
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
        if constexpr (X_IN_RING) __syncwarp();  // every lane is done reading the slot refilled next
        issue(c + (STAGES - 1) * STEP, slot == 0 ? STAGES - 1 : slot - 1);
        wait_copies<STAGES - 1>();
        if constexpr (X_IN_RING) __syncwarp();  // and the x the other lanes copied has landed
        // Both pieces at once where registers allow: two independent chains of mmas and loads for
        // ptxas to interleave. At batch 16 that would hoist every x load of the stage and run out of
        // the 128 registers, so batch 16 walks the pieces one at a time.
#pragma unroll(NT == 1 ? PIECES : 1)
        for (int p = 0; p < PIECES; ++p) {
            // piece c + 4p + t lies in group (c + 4p + t) / 4 = c / 4 + p
            const float scale_a = bf16_to_float(__ldg(sa + c / 4 + p));
            const float scale_b = bf16_to_float(__ldg(sb + c / 4 + p));
            const uint4 a = ring[warp][slot][p][0][lane];
            const uint4 b = ring[warp][slot][p][1][lane];
            const unsigned a_words[4] = {a.x, a.y, a.z, a.w};
            const unsigned b_words[4] = {b.x, b.y, b.z, b.w};
            // two partial sums (even and odd words), so the 8 mmas form two chains of 4, not one of 8
            float part[2][NT][4];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) part[h][nt][0] = part[h][nt][1] = part[h][nt][2] = part[h][nt][3] = 0.0f;
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                // word i holds values 8i..8i+7 of the piece: two k16 steps, values 0-3 then 4-7
                const unsigned a01 = dequant_pair(a_words[i], 0), a23 = dequant_pair(a_words[i], 1);
                const unsigned a45 = dequant_pair(a_words[i], 2), a67 = dequant_pair(a_words[i], 3);
                const unsigned b01 = dequant_pair(b_words[i], 0), b23 = dequant_pair(b_words[i], 1);
                const unsigned b45 = dequant_pair(b_words[i], 2), b67 = dequant_pair(b_words[i], 3);
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    uint4 xv = make_uint4(0u, 0u, 0u, 0u);
                    if constexpr (X_IN_RING) {
                        if (has_x[nt]) xv = xring[warp][slot][16 * p + 4 * i + t];
                    } else if (has_x[nt]) {
                        xv = __ldg(xr[nt] + 4 * (c + 4 * p) + i);
                    }
                    mma_bf16(part[i & 1][nt], a01, b01, a23, b23, xv.x, xv.y);
                    mma_bf16(part[i & 1][nt], a45, b45, a67, b67, xv.z, xv.w);
                }
            }
            // d0, d1 belong to row g, d2, d3 to row g + 8: each row its own scale
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                acc[nt][0] = fmaf(scale_a, part[0][nt][0] + part[1][nt][0], acc[nt][0]);
                acc[nt][1] = fmaf(scale_a, part[0][nt][1] + part[1][nt][1], acc[nt][1]);
                acc[nt][2] = fmaf(scale_b, part[0][nt][2] + part[1][nt][2], acc[nt][2]);
                acc[nt][3] = fmaf(scale_b, part[0][nt][3] + part[1][nt][3], acc[nt][3]);
            }
        }
        slot = slot == STAGES - 1 ? 0 : slot + 1;
    }
    wait_copies<0>();

#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int col = 8 * nt + 2 * t + e;
            if (col < BATCH) {
                y[static_cast<size_t>(col) * n + row] = to_bf16(acc[nt][e]);
                y[static_cast<size_t>(col) * n + row + 8] = to_bf16(acc[nt][2 + e]);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, BLOCKS_PER_SM)
w4a16_b1(const unsigned short* x, const unsigned* wq, const unsigned short* scales, unsigned short* y,
         int k, int n) {
    gemv_w4a16<1>(x, wq, scales, y, k, n);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, BLOCKS_PER_SM)
w4a16_b4(const unsigned short* x, const unsigned* wq, const unsigned short* scales, unsigned short* y,
         int k, int n) {
    gemv_w4a16<4>(x, wq, scales, y, k, n);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, BLOCKS_PER_SM)
w4a16_b16(const unsigned short* x, const unsigned* wq, const unsigned short* scales, unsigned short* y,
          int k, int n) {
    gemv_w4a16<16>(x, wq, scales, y, k, n);
}
