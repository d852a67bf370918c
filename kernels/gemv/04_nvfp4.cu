// 04 NVFP4: E2M1 weights, an E4M3 scale per 16 values and an FP32 tensor scale, batch 1
//
// Idea against 02: the same stream at nearly the same bytes, in the 4-bit float format Blackwell's
// tensor cores read. A weight is e2m1 x s_block x t: the E2M1 code (1 sign, 2 exponent bits of
// bias 1, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives), two to a byte with the
// even value in the low nibble; one E4M3 byte s_block per 16 consecutive values of a row; one fp32
// t for the tensor. 4.5 bits a weight against 02's 4.125: the scales are 1/8 of the code bytes,
// where 02's are 1/32. NVFP4 rather than MXFP4 (E8M0 scale per 32, 4.25 bits): it is the more
// accurate of the two (kernels/microscaling/artifacts/01_quant_error.txt: 9% against 14% weight
// error on heavy-tailed weights) and the heavier in scale bytes, so it is the case that shows
// whether the scale stream costs what its bytes say. The H200 has no FP4 tensor cores: the codes
// are widened in registers and multiplied on the fp16 ones, as in 02.
//
// The work layout, the ring, x in the ring and the grid are 02's batch-1 path (four warps a 16-row
// tile, each a quarter of K; the first blocks own two tiles; the words tiled for the stream by the
// suite's tile_w4a16, since a word of 8 codes has 02's shape). What differs is the step between
// shared memory and the mma:
// - The widening is a fixed bit placement, a lookup of the 16 codes with no table: a nibble
//   s e1 e0 m written to fp16 bits 15 (sign) and 11..9 (exponent bits 1..0 and the top mantissa
//   bit) is exactly the E2M1 value times 2^-14, subnormals included (code 1, 0.5, becomes fp16
//   subnormal 2^-15). With the standard packing, nibble j and nibble j + 4 of a word (values j
//   and j + 4) land in the two halves of one register by the same shifts: sign by 12 - 4j, the
//   three magnitude bits by 9 - 4j, two masks, two LOP3 a pair (1 integer operation a value,
//   against 02's 5 per 8; the shifts ptxas may put on the multiplier).
// - The block scale multiplies the pair before the mma (one HMUL2 a pair): the E4M3 byte widens
//   exactly to fp16 (cvt.rn.f16x2.e4m3x2, two scales at once), and e2m1 x 2^-14 x s_block is exact
//   in fp16: at most 2 significant bits times 4, and a multiple of 2^-24 where it is subnormal.
//   The mma (m16n8k16, fp16 in, fp32 accumulate) then sums exact products, and t x 2^14 multiplies
//   each row's fp32 total once. Scaling before the mma lets each k16 step span two blocks, so a
//   lane's 16 bytes keep 32 consecutive values (x in 16-byte vectors) and no per-block partials.
// - The pairs are (value j, value j + 4), so the lane that converts a stage's x vector to fp16 in
//   the ring writes it as pairs (x0, x4), (x1, x5), (x2, x6), (x3, x7): free, since it converts
//   anyway. No zero point: nothing is folded out, and the offset shuffles of 02 are gone.
// - The suite stores the scale bytes of a row swizzled by stage (256 values, 16 bytes): lane t's
//   four (pieces 0 and 1, two blocks each) are bytes 4t..4t+3, one 32-bit load a row a stage.
//
// Expected bound: at batch 1, K = 8192, N = 28672 the work model counts 117.4 MB of codes +
// 14.7 MB of scale bytes + x + y = 0.132 GB: 29 us at the ~4.5 TB/s read ceiling. 02 reads
// 0.121 GB. Per value the loop issues ~1.1 integer operations (2 LOP3 a pair, a shift of 8 on
// the integer pipe) against 02's 0.63: 235 M x 1.1 / (132 SMs x 64 lanes x 1.78 GHz) = 17 us of
// the integer pipe under 29 us of memory, plus 0.5 HMUL2 a value on the fp16 pipe. Expect 70-80%
// of read (36-41 us), 1.05-1.15x 02's time (its bytes and a little more issue), about 0.9x 03's
// time, and about 3x faster than torch's bf16 F.linear on the dequantised weights (3.6x the bytes).
// Outcome of the first measurement (kernels/gemv/DESIGN.md): below the band, about two thirds of
// the read ceiling. Scratch builds that dropped the HMUL2, or the widening as well (wrong y, timing
// only), ran near 02's time and near the ceiling: the loop is bound by issue on the fp16/FMA pipe,
// the block-scale multiply the largest part of it, not by bytes.
//
// Size constraints: batch 1 only; K a multiple of 1024 (four slices of whole 256-value stages),
// N a multiple of 16, every tensor 16-byte aligned, |x| <= 65504 (fp16 holds bf16 x exactly from
// 2^-14 up; below that x is rounded to a multiple of 2^-24, far under y's bf16 rounding). The grid
// is N / 16 - d blocks of 128 threads, 0 <= d <= N / 32, the first d of them two tiles each.

constexpr int KSPLIT = 4;    // warps a block, all on one 16-row tile, each a slice of K
constexpr int PIECES = 2;    // 16-byte pieces a lane copies of each of its 2 rows a stage
constexpr int STAGES = 2;    // the stage in use and one in flight, as 02 at batch 1
constexpr int VALUES_PER_PIECE = 32;       // nibbles in 16 bytes
constexpr int SCALE_BLOCK = 16;            // values sharing one E4M3 scale
constexpr int X_VECTORS = 4 * PIECES * 4;  // 16-byte vectors of x a stage (256 values)
// 6 blocks (24 warps) an SM and the two pieces of a stage unrolled: at most 80 registers a thread,
// so two independent chains of widening, HMUL2 and mma are in flight. Timed beside 7 blocks with the
// pieces one at a time (02's choice, 72 registers; unrolled at 7 blocks it spills): a few percent
// faster at the headline.
constexpr int BLOCKS_PER_SM = 6;

static_assert(sizeof(uint4) * 2 == VALUES_PER_PIECE, "a 16-byte piece is 32 nibbles");
static_assert(VALUES_PER_PIECE == 2 * SCALE_BLOCK, "a piece is two scale blocks");
static_assert(X_VECTORS == 32, "one 16-byte copy a lane carries a stage's x");
static_assert(BLOCKS_PER_SM * (KSPLIT * STAGES * (2 * PIECES * 32 + X_VECTORS) * 16 + 1024) <=
                  228 * 1024,
              "7 blocks' rings, and the 1 KB each block reserves, fit in an SM's shared memory");

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

// A 16-byte shared-memory read by the lanes where `active` holds; elsewhere undefined (see 02).
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

__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void wait_copies() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void mma_f16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                        unsigned a3, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Values j and j + 4 of a word (nibbles j and j + 4, j = 0..3) as the fp16 pair
// (e2m1_j x 2^-14, e2m1_{j+4} x 2^-14): sign to bit 15 of each half, magnitude to bits 11..9.
template <int J>
__device__ __forceinline__ unsigned e2m1_pair(unsigned q) {
    static_assert(J >= 0 && J < 4, "a word holds 4 pairs");
    const unsigned sign = q << (12 - 4 * J);
    const unsigned mag = J == 3 ? q >> 3 : q << (9 - 4 * J);
    return (sign & 0x80008000u) | (mag & 0x0E000E00u);
}

// The two E4M3 bytes in the low 16 bits of `bytes` as an fp16 pair, the lower byte in the low half
// (exact: every E4M3 value is an fp16 value).
__device__ __forceinline__ unsigned e4m3x2_to_f16x2(unsigned bytes) {
    const unsigned short pair = static_cast<unsigned short>(bytes);
    unsigned out;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(out) : "h"(pair));
    return out;
}

__device__ __forceinline__ unsigned mul_f16x2(unsigned a, unsigned b) {
    unsigned out;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(out) : "r"(a), "r"(b));
    return out;
}

// Two floats as an fp16 pair, the first in the low half.
__device__ __forceinline__ unsigned to_f16x2(float lo, float hi) {
    unsigned out;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(out) : "f"(hi), "f"(lo));
    return out;
}

__device__ __forceinline__ unsigned short to_bf16(float v) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}

// One word of row g (qa) and of row g + 8 (qb), each pair times its block's scale (fp16, both
// halves the same), against x pairs xa = (x0, x4), (x1, x5) and xb = (x2, x6), (x3, x7).
__device__ __forceinline__ void word_mma(float (&acc)[4], unsigned qa, unsigned qb, unsigned sa,
                                         unsigned sb, uint4 xv) {
    mma_f16(acc, mul_f16x2(e2m1_pair<0>(qa), sa), mul_f16x2(e2m1_pair<0>(qb), sb),
            mul_f16x2(e2m1_pair<1>(qa), sa), mul_f16x2(e2m1_pair<1>(qb), sb), xv.x, xv.y);
    mma_f16(acc, mul_f16x2(e2m1_pair<2>(qa), sa), mul_f16x2(e2m1_pair<2>(qb), sb),
            mul_f16x2(e2m1_pair<3>(qa), sa), mul_f16x2(e2m1_pair<3>(qb), sb), xv.z, xv.w);
}

// grid = N / 16 - doubles blocks of 128 threads. wq: N x K/8 words of 8 codes, tiled as 02's;
// scales: N x K/64 words, each row's 16 scale bytes of a stage swizzled (see the header);
// tscale: the fp32 tensor scale.
extern "C" __global__ void __launch_bounds__(KSPLIT * 32, BLOCKS_PER_SM)
nvfp4_b1(const unsigned short* __restrict__ x, const unsigned* __restrict__ wq,
         const unsigned* __restrict__ scales, const float* __restrict__ tscale,
         unsigned short* __restrict__ y, int k, int n) {
    __shared__ uint4 ring[KSPLIT][STAGES][PIECES][2][32];
    // a stage's x, vector v = 16p + 4t + i kept at 16p + 4i + t, as in 02
    __shared__ uint4 xring[KSPLIT][STAGES][X_VECTORS];

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int doubles = n / 16 - static_cast<int>(gridDim.x);
    const bool dbl = static_cast<int>(blockIdx.x) < doubles;
    const int ks = dbl ? 2 : KSPLIT;  // warps on this warp's tile
    const int slice = warp % ks;
    const int tile = dbl ? 2 * blockIdx.x + warp / 2 : doubles + blockIdx.x;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int row = tile * 16 + g;
    const int kv = k / VALUES_PER_PIECE / ks;  // 16-byte pieces of a row in this warp's part
    constexpr int STEP = 4 * PIECES;
    const int first_stage = slice * (kv / STEP);

    const size_t stage_stride = static_cast<size_t>(n / 16) * 128;  // uint4s between a tile's stages
    const uint4* wtile = reinterpret_cast<const uint4*>(wq) +
                         static_cast<size_t>(first_stage) * stage_stride +
                         static_cast<size_t>(tile) * 128 + lane;
    const int scale_words = k / 64;  // a row's scale bytes as 32-bit words, 4 a stage
    const unsigned* sa = scales + static_cast<size_t>(row) * scale_words + first_stage * 4 + t;
    const unsigned* sb = sa + static_cast<size_t>(8) * scale_words;
    const uint4* x_copy = reinterpret_cast<const uint4*>(x) + slice * (k / ks / 8) + lane;
    const int x_slot = 16 * (lane >> 4) + 4 * (lane & 3) + ((lane >> 2) & 3);
    constexpr unsigned RING_SLOT = sizeof(ring[0][0]), XRING_SLOT = sizeof(xring[0][0]);
    constexpr unsigned COPY = sizeof(ring[0][0][0][0]);  // 512 bytes between a lane's copies
    const unsigned ring_at = shared_addr(&ring[warp][0][0][0][lane]);
    const unsigned x_copy_at = shared_addr(&xring[warp][0][0]) + 16 * x_slot;
    const unsigned x_read_at = shared_addr(&xring[warp][0][0]) + 16 * t;

    auto issue = [&](int c, int slot) {
        if (c < kv) {
            const uint4* block = wtile + static_cast<size_t>((c / STEP) * 8) * n;  // stage_stride = 8n
#pragma unroll
            for (int p = 0; p < PIECES; ++p) {
                copy_async_16(ring_at + slot * RING_SLOT + (2 * p) * COPY, block + 32 * (2 * p));
                copy_async_16(ring_at + slot * RING_SLOT + (2 * p + 1) * COPY, block + 32 * (2 * p + 1));
            }
            copy_async_16_l1(x_copy_at + slot * XRING_SLOT, x_copy + 4 * c);
        }
        commit_copies();
    };

    // two sums (even and odd words of a piece), so consecutive mmas do not wait on each other
    float acc[2][4] = {};

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) issue(s * STEP, s);

    int slot = 0;
#pragma unroll 1
    for (int c = 0; c < kv; c += STEP) {
        __syncwarp();  // every lane is done reading the slot refilled next
        issue(c + (STAGES - 1) * STEP, slot == 0 ? STAGES - 1 : slot - 1);
        wait_copies<STAGES - 1>();
        // this lane's four scale bytes of rows g and g + 8: pieces 0 and 1, two blocks each
        const unsigned scale_a = __ldg(sa + (c / STEP) * 4);
        const unsigned scale_b = __ldg(sb + (c / STEP) * 4);
        {
            // the lane's own vector of x to fp16, paired as the weights are: (x0, x4), (x1, x5), ...
            const unsigned mine = x_copy_at + slot * XRING_SLOT;
            const uint4 v = load_shared(mine);
            const float x0 = __uint_as_float(v.x << 16), x1 = __uint_as_float(v.x & 0xFFFF0000u);
            const float x2 = __uint_as_float(v.y << 16), x3 = __uint_as_float(v.y & 0xFFFF0000u);
            const float x4 = __uint_as_float(v.z << 16), x5 = __uint_as_float(v.z & 0xFFFF0000u);
            const float x6 = __uint_as_float(v.w << 16), x7 = __uint_as_float(v.w & 0xFFFF0000u);
            store_shared(mine, make_uint4(to_f16x2(x0, x4), to_f16x2(x1, x5), to_f16x2(x2, x6),
                                          to_f16x2(x3, x7)));
            __syncwarp();  // the x the other lanes copied and converted is in place
        }
#pragma unroll
        for (int p = 0; p < PIECES; ++p) {
            // words 0-1 of the piece are block 0 (the low half), words 2-3 block 1 (the high half)
            const unsigned fa = e4m3x2_to_f16x2(scale_a >> (16 * p));
            const unsigned fb = e4m3x2_to_f16x2(scale_b >> (16 * p));
            const unsigned sa0 = __byte_perm(fa, 0, 0x1010), sa1 = __byte_perm(fa, 0, 0x3232);
            const unsigned sb0 = __byte_perm(fb, 0, 0x1010), sb1 = __byte_perm(fb, 0, 0x3232);
            const uint4 a = load_shared(ring_at + slot * RING_SLOT + (2 * p) * COPY);
            const uint4 b = load_shared(ring_at + slot * RING_SLOT + (2 * p + 1) * COPY);
            // only column 0 of the product is stored, and lanes 0-3 alone supply it (see 02)
            const unsigned xat = x_read_at + slot * XRING_SLOT + 16 * (16 * p);
            word_mma(acc[0], a.x, b.x, sa0, sb0, load_shared_if(xat, g == 0));
            word_mma(acc[1], a.y, b.y, sa0, sb0, load_shared_if(xat + 16 * 4, g == 0));
            word_mma(acc[0], a.z, b.z, sa1, sb1, load_shared_if(xat + 16 * 8, g == 0));
            word_mma(acc[1], a.w, b.w, sa1, sb1, load_shared_if(xat + 16 * 12, g == 0));
        }
        slot = slot == STAGES - 1 ? 0 : slot + 1;
    }
    wait_copies<0>();

    // the slices meet as in 02: warps of slice > 0 leave column 0 of rows g and g + 8 in the ring,
    // the slice-0 warp of the tile adds them
    float sum[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) sum[e] = acc[0][e] + acc[1][e];
    __syncthreads();
    float* red = reinterpret_cast<float*>(&ring[0][0][0][0][0]);
    if (slice > 0) {  // warp w's sums in region w - 1
#pragma unroll
        for (int e = 0; e < 4; e += 2) red[((warp - 1) * 4 + e) * 32 + lane] = sum[e];
    }
    __syncthreads();
    if (slice > 0) return;
    for (int w = warp + 1; w < warp + ks; ++w)
#pragma unroll
        for (int e = 0; e < 4; e += 2) sum[e] += red[((w - 1) * 4 + e) * 32 + lane];

    if (t == 0) {  // column 0 (batch 1): e = 0 is row g, e = 2 row g + 8
        const float scale = __ldg(tscale) * 16384.0f;  // t x 2^14 undoes the codes' 2^-14
        y[row] = to_bf16(scale * sum[0]);
        y[row + 8] = to_bf16(scale * sum[2]);
    }
}
