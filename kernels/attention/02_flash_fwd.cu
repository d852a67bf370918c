// 02 flash forward: FlashAttention-2 tiling on mma.sync, the score matrix never leaves the chip
//
// Idea against 01: never write S. One CTA owns 128 query rows of one (batch, head); its 8 warps own
// 16 rows each and keep that Q slice in registers as mma fragments for the whole kernel. K and V
// stream through shared memory in tiles of 64 keys (cp.async, two stages each; K runs two tiles
// ahead, V one). Per tile a warp computes its 16x64 block of S with 64 mma.sync.m16n8k16
// (K read by ldmatrix without transpose: K rows are exactly the "col" B operand), updates the
// online softmax in the log2 domain (running max m and sum l per row, the output rescaled by
// 2^(m_old - m_new)), then reuses the score accumulators as the A operand of P V: the m16n8
// accumulator layout of two adjacent n-tiles is the m16k16 A layout, so P goes from fp32 registers
// to bf16 registers with no shared memory trip (64 more mma, V through ldmatrix.trans). Tiles are
// stored with each 16-byte chunk at chunk ^ (row % 8), so the 8 rows one ldmatrix reads sit in 8
// different bank groups. fp32 accumulation throughout; P is rounded to bf16 for the PV product.
// The loop is software-pipelined by one stage: step j runs the softmax of tile j, then Q K^T of
// tile j + 1, then P V of tile j, in one basic block, so the compiler interleaves the exp2 and
// shuffles of one tile with the mma and ldmatrix of the next (the barrier at the top of each
// tile keeps all warps in the same phase, so without this no warp has an mma to issue while the
// softmax runs). The cost: the next tile's scores live beside P, 247 registers instead of 215.
//
// Expected bound (estimate), headline B = 8, H = 16, S = 4096, D = 128 on an H200: 4*B*H*S^2*D =
// 1.10 TFLOP, 1.4 ms at the ~800 TFLOP/s bf16 GEMM ceiling measured on this card; the minimum bytes
// (Q, K, V read, O written: 537 MB) take 0.13 ms, so compute bounds it. This kernel cannot reach
// that rate: (1) mma.sync is the pre-Hopper instruction (a lead: about two thirds of the wgmma
// rate); (2) each warp owns only 16 rows, so per 64-key tile every warp re-reads the whole K and V
// tile from shared memory: 8 warps x 32 KB = 256 KB of ldmatrix traffic for 2 MFLOP, 8 FLOP per
// shared byte, at 128 B/clock/SM about 1000 FLOP/clock against ~4000 for dense bf16 on the tensor
// cores, i.e. shared-memory bandwidth caps it near a quarter to half of peak once the mma and
// ldmatrix issue overlap; (3) 32 exp2 per thread per tile on the 16-lane/clock MUFU pipe (about
// 15% of a tile with the tensor pipe idle before the pipelining, some of it hidden after), and one
// barrier per tile. Expect 250-370 TFLOP/s (3.0-4.4 ms), about 60-90% of SDPA if SDPA runs
// FlashAttention-2 (~350-400 TFLOP/s), about half if it dispatches to a Hopper-specific kernel.
//
// Size constraints: D = 128 exactly; S a multiple of 128 (BM) and so of 64 (BN): full tiles, no
// masking; non-causal; Q, K, V, O contiguous [B, H, S, D] bf16 carried as 16-bit words;
// B * H * S * D < 2^31 (32-bit element offsets within a head are widened once per CTA).

constexpr int D = 128;            // head dimension
constexpr int BM = 128;           // query rows per CTA
constexpr int BN = 64;            // keys per K/V tile
constexpr int WARPS = BM / 16;    // one m16 slice of rows per warp
constexpr int THREADS = WARPS * 32;
constexpr int CHUNKS = D / 8;     // 16-byte chunks per row of a tile
constexpr int ROW_STEP = THREADS / CHUNKS;  // rows one cp.async pass covers
constexpr int Q_TILE = BM * D;    // bf16 elements
constexpr int KV_TILE = BN * D;
constexpr int STAGES = 2;
constexpr int SMEM_BYTES = (Q_TILE + 2 * STAGES * KV_TILE) * 2;
constexpr int KSTEPS_D = D / 16;  // k-steps of the QK^T product
constexpr int NTILES_S = BN / 8;  // n8 tiles of one row block of S
constexpr int KSTEPS_N = BN / 16; // k-steps of the PV product
constexpr int NTILES_O = D / 8;   // n8 tiles of one row block of O

static_assert(D == 128, "the fragment arrays and the swizzle assume 256-byte rows of 16 chunks");
static_assert(BM % 16 == 0 && BN % 16 == 0, "m16n8k16 tiles; K and V are read two n8 tiles at once");
static_assert(CHUNKS % 8 == 0, "the swizzle permutes chunks within runs of 8 (128 bytes)");
static_assert(THREADS % CHUNKS == 0 && ROW_STEP % 8 == 0,
              "each copy pass advances a multiple of 8 rows, so a thread's swizzle stays fixed");
static_assert(BM % ROW_STEP == 0 && BN % ROW_STEP == 0, "every thread copies whole passes");
static_assert(BM % BN == 0, "S a multiple of BM is then a multiple of BN");
static_assert(SMEM_BYTES <= 227 * 1024, "an H100/H200 block gets at most 227 KB of shared memory");

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// d += a * b for one m16n8k16 tile: A row-major, B "col" (k pairs per register), fp32 accumulate.
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float fast_exp2(float x) {  // exp2(-inf) = 0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// Two floats rounded to bf16 (nearest even) in one 32-bit word, `lo` in the low half.
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// The warp's 16x64 block of S = Q K^T for the K tile at shared address kst. K is [key][d] in shared
// memory, which is the "col" B layout (k = d pairs per register); matrices of one ldmatrix.x4:
// (keys 0-7, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 0-7), (keys 8-15, d 8-15).
__device__ __forceinline__ void scores(float (&s)[NTILES_S][4], const unsigned (&qf)[KSTEPS_D][4],
                                       unsigned kst, int quad, int rr) {
#pragma unroll
    for (int i = 0; i < NTILES_S; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < KSTEPS_D; ++kk) {
#pragma unroll
        for (int np = 0; np < NTILES_S / 2; ++np) {
            unsigned kf[4];
            const int row = np * 16 + (quad >> 1) * 8 + rr;
            const int chunk = (kk * 2 + (quad & 1)) ^ rr;
            ldmatrix_x4(kf, kst + 2 * (row * D + chunk * 8));
            mma_16816(s[2 * np], qf[kk], kf[0], kf[1]);
            mma_16816(s[2 * np + 1], qf[kk], kf[2], kf[3]);
        }
    }
}

// Online softmax of one tile's scores. Accumulator layout: s[n][0..1] are row g, columns 2t and
// 2t + 1 of n-tile n (t = lane % 4); s[n][2..3] the same columns of row g + 8. A row's 64 values
// are spread over the 4 lanes of a quad, so row reductions finish with two xor shuffles. The
// running max m is in log2 units; l is this lane's partial row sum, reduced at the end. P =
// 2^(s * scale - m) is packed to bf16 as the A fragments of P V (k-step kk covers keys 16 kk ..
// 16 kk + 15 = n-tiles 2 kk and 2 kk + 1 of S), and O is rescaled by 2^(m_old - m_new).
__device__ __forceinline__ void softmax_tile(const float (&s)[NTILES_S][4], unsigned (&pf)[KSTEPS_N][4],
                                             float (&o)[NTILES_O][4], float& m_lo, float& m_hi,
                                             float& l_lo, float& l_hi, float scale_log2) {
    float mx_lo = s[0][0], mx_hi = s[0][2];
#pragma unroll
    for (int n = 0; n < NTILES_S; ++n) {
        mx_lo = fmaxf(mx_lo, fmaxf(s[n][0], s[n][1]));
        mx_hi = fmaxf(mx_hi, fmaxf(s[n][2], s[n][3]));
    }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
        mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, off));
        mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, off));
    }
    const float new_lo = fmaxf(m_lo, mx_lo * scale_log2);
    const float new_hi = fmaxf(m_hi, mx_hi * scale_log2);
    const float alpha_lo = fast_exp2(m_lo - new_lo);  // 0 on the first tile (m = -inf)
    const float alpha_hi = fast_exp2(m_hi - new_hi);
    m_lo = new_lo;
    m_hi = new_hi;

    float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
    for (int n = 0; n < NTILES_S; ++n) {
        const float p0 = fast_exp2(fmaf(s[n][0], scale_log2, -new_lo));
        const float p1 = fast_exp2(fmaf(s[n][1], scale_log2, -new_lo));
        const float p2 = fast_exp2(fmaf(s[n][2], scale_log2, -new_hi));
        const float p3 = fast_exp2(fmaf(s[n][3], scale_log2, -new_hi));
        sum_lo += p0 + p1;
        sum_hi += p2 + p3;
        pf[n / 2][(n % 2) * 2] = pack_bf16(p0, p1);
        pf[n / 2][(n % 2) * 2 + 1] = pack_bf16(p2, p3);
    }
    l_lo = l_lo * alpha_lo + sum_lo;
    l_hi = l_hi * alpha_hi + sum_hi;
#pragma unroll
    for (int i = 0; i < NTILES_O; ++i) {
        o[i][0] *= alpha_lo;
        o[i][1] *= alpha_lo;
        o[i][2] *= alpha_hi;
        o[i][3] *= alpha_hi;
    }
}

// O += P V for the V tile at shared address vst. V is [key][d]: the row-major B operand, read
// transposed; matrices of one ldmatrix.x4.trans: (keys 0-7, d 0-7), (keys 8-15, d 0-7), (keys 0-7,
// d 8-15), (keys 8-15, d 8-15).
__device__ __forceinline__ void accumulate_pv(float (&o)[NTILES_O][4], const unsigned (&pf)[KSTEPS_N][4],
                                              unsigned vst, int quad, int rr) {
#pragma unroll
    for (int kk = 0; kk < KSTEPS_N; ++kk) {
#pragma unroll
        for (int dp = 0; dp < NTILES_O / 2; ++dp) {
            unsigned vf[4];
            const int row = kk * 16 + (quad & 1) * 8 + rr;
            const int chunk = (dp * 2 + (quad >> 1)) ^ rr;
            ldmatrix_x4_trans(vf, vst + 2 * (row * D + chunk * 8));
            mma_16816(o[2 * dp], pf[kk], vf[0], vf[1]);
            mma_16816(o[2 * dp + 1], pf[kk], vf[2], vf[3]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
flash_fwd(const unsigned short* __restrict__ Q, const unsigned short* __restrict__ K,
          const unsigned short* __restrict__ V, unsigned short* __restrict__ O, int S,
          float scale_log2) {
    extern __shared__ __align__(128) unsigned short smem[];
    const unsigned qs = smem_addr(smem);                     // [BM][D], swizzled
    const unsigned ks = qs + 2 * Q_TILE;                      // [STAGES][BN][D]
    const unsigned vs = ks + 2 * STAGES * KV_TILE;            // [STAGES][BN][D]

    const int tid = threadIdx.x;
    const int lane = tid % 32, warp = tid / 32;
    const int q0 = blockIdx.x * BM;
    // grid = (S / BM, H, B): the CTAs of one (batch, head) are consecutive, so K and V of that
    // head are read from DRAM about once and then served by the L2 to its S / BM CTAs.
    const size_t head = static_cast<size_t>(blockIdx.z) * gridDim.y + blockIdx.y;
    const unsigned short* Kh = K + head * S * D;
    const unsigned short* Vh = V + head * S * D;
    const unsigned short* Qb = Q + head * S * D + static_cast<size_t>(q0) * D;
    unsigned short* Ob = O + head * S * D + static_cast<size_t>(q0) * D;

    // Copy assignment: thread tid moves chunk tid % 16 of rows tid / 16 + 16 i.
    const int cp_row = tid / CHUNKS, cp_chunk = tid % CHUNKS;
    const int cp_src = cp_row * D + cp_chunk * 8;
    const int cp_dst = cp_row * D + ((cp_chunk ^ (cp_row % 8)) * 8);

    auto load_tile = [&](unsigned base, int stage, const unsigned short* src, int tile) {
        const unsigned short* from = src + static_cast<size_t>(tile) * BN * D + cp_src;
        const unsigned dst = base + 2 * (stage * KV_TILE + cp_dst);
#pragma unroll
        for (int r = 0; r < BN; r += ROW_STEP) cp_async_16(dst + 2 * r * D, from + r * D);
    };

    // Tile j's K sits in stage j % 2 of ks, its V in stage j % 2 of vs. Loads run one tile ahead
    // for V and two for K: the loop step for tile j multiplies K of tile j + 1 while V of tile j
    // is in use. Group 1: Q and K 0; group 2: V 0 and K 1 (S >= 128, so there are two tiles).
#pragma unroll
    for (int r = 0; r < BM; r += ROW_STEP) cp_async_16(qs + 2 * (cp_dst + r * D), Qb + cp_src + r * D);
    load_tile(ks, 0, Kh, 0);
    cp_async_commit();
    load_tile(vs, 0, Vh, 0);
    load_tile(ks, 1, Kh, 1);
    cp_async_commit();
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // group 1 has landed
    __syncthreads();

    // ldmatrix addressing: lane l gives row l % 8 of 8x8 matrix l / 8 = quad. Every row touched
    // has row % 8 == l % 8, so the swizzle is an XOR with rr.
    const int quad = lane / 8, rr = lane % 8;

    // The warp's 16 rows of Q as A fragments, one per 16 columns of D. Matrix order of an m16k16
    // A tile: (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).
    unsigned qf[KSTEPS_D][4];
#pragma unroll
    for (int kk = 0; kk < KSTEPS_D; ++kk) {
        const int row = warp * 16 + (quad & 1) * 8 + rr;
        const int chunk = (kk * 2 + (quad >> 1)) ^ rr;
        ldmatrix_x4(qf[kk], qs + 2 * (row * D + chunk * 8));
    }

    float o[NTILES_O][4];
#pragma unroll
    for (int i = 0; i < NTILES_O; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    // Each lane holds two rows: g = lane / 4 and g + 8 of the warp's 16. m is in log2 units.
    float m_lo = __int_as_float(0xff800000u), m_hi = m_lo;
    float l_lo = 0.0f, l_hi = 0.0f;

    float s[NTILES_S][4];
    scores(s, qf, ks, quad, rr);  // tile 0

    // Step j: the softmax of tile j and the Q K^T of tile j + 1 do not depend on each other, so the
    // compiler can interleave the exp2 and shuffles of one with the mma and ldmatrix of the other
    // inside one basic block; then P V of tile j. The last tile has no next Q K^T and is peeled.
    const int tiles = S / BN;
    unsigned pf[KSTEPS_N][4];
    for (int j = 0; j + 1 < tiles; ++j) {
        cp_async_wait_all();  // V of tile j and K of tile j + 1 have landed (this thread's part)
        __syncthreads();      // everyone's have; everyone is done with K of j and V of j - 1
        load_tile(vs, (j + 1) % STAGES, Vh, j + 1);               // into V of j - 1's stage
        if (j + 2 < tiles) load_tile(ks, j % STAGES, Kh, j + 2);  // into K of j's stage
        cp_async_commit();

        softmax_tile(s, pf, o, m_lo, m_hi, l_lo, l_hi, scale_log2);
        scores(s, qf, ks + 2 * (((j + 1) % STAGES) * KV_TILE), quad, rr);
        accumulate_pv(o, pf, vs + 2 * ((j % STAGES) * KV_TILE), quad, rr);
    }
    cp_async_wait_all();
    __syncthreads();
    softmax_tile(s, pf, o, m_lo, m_hi, l_lo, l_hi, scale_log2);
    accumulate_pv(o, pf, vs + 2 * (((tiles - 1) % STAGES) * KV_TILE), quad, rr);

#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
        l_lo += __shfl_xor_sync(0xffffffffu, l_lo, off);
        l_hi += __shfl_xor_sync(0xffffffffu, l_hi, off);
    }
    const float inv_lo = 1.0f / l_lo, inv_hi = 1.0f / l_hi;
    const int g = lane / 4, t4 = lane % 4;
    unsigned short* row_lo = Ob + (warp * 16 + g) * D;
    unsigned short* row_hi = row_lo + 8 * D;
#pragma unroll
    for (int i = 0; i < NTILES_O; ++i) {
        const int col = i * 8 + t4 * 2;
        *reinterpret_cast<unsigned*>(row_lo + col) = pack_bf16(o[i][0] * inv_lo, o[i][1] * inv_lo);
        *reinterpret_cast<unsigned*>(row_hi + col) = pack_bf16(o[i][2] * inv_hi, o[i][3] * inv_hi);
    }
}
