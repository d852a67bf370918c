// 01 wgmma ping-pong: FlashAttention-3-style forward, TMA ring, producer and two consumer warpgroups
//
// Idea against attention/02 (FlashAttention-2 on mma.sync): feed the Hopper tensor cores the
// way they want to be fed and keep them busy through the softmax. Three warpgroups a CTA of 128
// query rows. The producer warpgroup gives its registers back (setmaxnreg 24) and one of its
// threads issues every load: Q once (a TMA box of 128 rows x 64 columns per 64 columns of D),
// then K and V tiles of 128 keys into a ring of STAGES slots each, every slot guarded by a
// "full" mbarrier (TMA transaction bytes) and an "empty" one (256 consumer arrivals). The two
// consumer warpgroups (setmaxnreg 240) own 64 query rows each and compute with wgmma only:
// S = Q K^T with both operands read from shared memory by descriptor (K rows are K-major, no
// transpose), then O += P V with P taken from registers as the A operand (the fp32 accumulator
// layout of S, rounded to bf16 pairs, is the register A layout of the next product) and V read
// MN-major (transposed B). Two overlaps hide the softmax: inside a warpgroup, each turn issues
// S of tile j and P V of tile j-1 together, then runs the softmax of tile j while P V of j-1
// is still on the tensor cores; across the two warpgroups, named barriers 1 and 2 hand a
// "turn" back and forth, so one warpgroup's exp2 and row sums run while the other's GEMMs run
// (FlashAttention-3's ping-pong). Online softmax in the log2 domain (ex2.approx), fp32 row
// state in registers, O normalised once at the end and stored as bf16 pairs.
//
// Expected bound (estimate), headline B = 8, H = 16, S = 4096, D = 128 on an H200: 4*B*H*S^2*D
// = 1.10 TFLOP, 1.4 ms at the ~780 TFLOP/s bf16 GEMM rate measured on this card; the bytes (Q,
// K, V read, O written: 537 MB) take 0.13 ms. Per 128x128 tile a consumer pair does 8.4 MFLOP
// of MMA, about 2,050 tensor-core clocks at ~4,096 dense bf16 FLOP/clock/SM, and 16,384 exp2 on
// the 16-lane MUFU pipe, about 1,020 clocks: the exponentials are half the MMA time, so without
// overlap the kernel could not pass ~2/3 of the GEMM rate. With both overlaps, what remains is
// the issue gaps at each turn hand-over, the per-tile barrier waits and the epilogue: estimate
// 70-85% of the GEMM rate, ~550-660 TFLOP/s (1.7-2.0 ms), about the cuDNN kernel behind SDPA.
// Causal halves the FLOPs but the diagonal tiles and the shorter rows of early query blocks
// (fewer tiles to pipeline over) cost more per FLOP: estimate 75-90% of the non-causal rate.
// D = 64 halves the MMA per exp2 (same 128x128 tiles of S, half the K of Q K^T and the N of
// P V), so the exponentials are as long as the MMAs: estimate 50-65% of the GEMM rate.
//
// Resources (nvcc 13.0 -gencode arch=compute_90a,code=sm_90a --resource-usage; NVRTC compiles
// the same source): 168 registers at compile time for every entry (the 384-thread cap; the
// consumers run at 240 after setmaxnreg), no spills, no stack; dynamic shared memory D = 128:
// 164,936 bytes (Q 32 KiB, 2 stages of K and V 32 KiB each, 9 mbarriers, 1 KiB alignment
// slack); D = 64: 148,616 bytes (4 stages of 16 KiB tiles). ptxas reports no wgmma
// serialisation: every mbarrier wait sits before the wgmma.fence of its turn.
//
// Constraints: D = 64 or 128 (separate entry points); S a multiple of 128 (full tiles, no tail
// masking); Q, K, V, O contiguous [B, H, S, D] bf16 as 16-bit words with B*H*S < 2^31 (the TMA
// row coordinate); causal masks key j > query i within one sequence (S_q = S_k); sm_90a.
// Measured variant: FA3_STAGES_D128 = 2 (the suite reads the define below), FA3_PINGPONG = 1
// (02 compiles this file with 0).

#define NEG_INF __int_as_float(0xff800000)  // -infinity (NVRTC has no math.h)

#ifndef FA3_STAGES_D128
#define FA3_STAGES_D128 2
#endif
#ifndef FA3_PINGPONG
#define FA3_PINGPONG 1                  // 0: the consumers issue their GEMMs without turns (02)
#endif

constexpr int BM = 128;                 // query rows a CTA: two consumer warpgroups x 64
constexpr int BN = 128;                 // keys a K/V tile
constexpr int CONSUMERS = 2;
constexpr int THREADS = (CONSUMERS + 1) * 128;
constexpr int BOX_COLS = 64;            // bf16 along D a TMA box: 128 bytes, the swizzle span
constexpr int BOX_BYTES = 128 * BOX_COLS * 2;  // 128 rows (query rows or keys) x 128 bytes
constexpr int SWIZZLE_ATOM = 1024;      // 8 rows x 128 bytes
constexpr int WGMMA_K = 16;
constexpr int PRODUCER_REGS = 24;       // setmaxnreg: 24 x 128 + 240 x 256 = 64,512 registers,
constexpr int CONSUMER_REGS = 240;      // what 384 threads at the 168-register cap hold
constexpr bool PINGPONG = FA3_PINGPONG != 0;
constexpr int BAR_TURN = 1;             // named barriers 1 and 2: the consumers' turns (0 is
                                        // __syncthreads)

static_assert(BM == CONSUMERS * 64, "each consumer warpgroup owns 64 query rows (wgmma m64)");
static_assert(BM == BN, "the causal diagonal is then exactly the last key tile of a CTA");
static_assert(BOX_BYTES % SWIZZLE_ATOM == 0, "every box starts on a 1024-byte swizzle atom");
static_assert(PRODUCER_REGS * 128 + CONSUMER_REGS * 128 * CONSUMERS <= 65536,
              "the register file of one SM");

template <int D>
struct Layout {
    static constexpr int BOXES = D / BOX_COLS;        // TMA boxes a tile (one per 64 columns)
    static constexpr int TILE_BYTES = BOXES * BOX_BYTES;  // a Q, K or V tile
    static constexpr int STAGES = D == 128 ? FA3_STAGES_D128 : 4;
    static constexpr int Q_OFF = 0;
    static constexpr int K_OFF = TILE_BYTES;
    static constexpr int V_OFF = K_OFF + STAGES * TILE_BYTES;
    static constexpr int BAR_OFF = V_OFF + STAGES * TILE_BYTES;
    static constexpr int BARS = 1 + 4 * STAGES;       // Q full; K full, K empty, V full, V empty
    static constexpr int SMEM_BYTES = BAR_OFF + 8 * BARS + SWIZZLE_ATOM;  // + alignment slack
    static_assert(D % BOX_COLS == 0 && D <= 256, "D a multiple of 64, one wgmma n at most 256");
    static_assert(TILE_BYTES * (1 + 2 * STAGES) < (1 << 20), "mbarrier transaction count");
    static_assert(SMEM_BYTES <= 227 * 1024, "an H100/H200 block gets at most 227 KB of shared memory");
};

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

// One box of 128 rows x 64 bf16 from global into shared memory (128-byte swizzle); completes
// on bar. c0 is the column (along D), c1 the row of the [B*H*S, D] matrix.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap* map, unsigned bar,
                                            int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// Named barriers over a subset of the CTA's warps: sync waits, arrive only signals.
__device__ __forceinline__ void bar_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void bar_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets (all
// >> 4), layout 1 = 128-byte swizzle.
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

#define D8(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
                 "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

// S[64x128] (+)= Q[64x16] K[128x16]^T: both operands in shared memory, both K-major (rows
// contiguous along D, no transpose). scale_d = 0 overwrites the accumulator (first k-step).
// Accumulator d[4j + i]: row 16*warp + lane/4 (+8 for i >= 2), column 8j + 2*(lane%4) + i%2.
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], unsigned long long desc_a,
                                              unsigned long long desc_b, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, 0, 0;\n"
        "}\n"
        : D8(d, 0), D8(d, 8), D8(d, 16), D8(d, 24), D8(d, 32), D8(d, 40), D8(d, 48), D8(d, 56)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// O[64xN] += P[64x16] V[16xN]: P from registers (four bf16x2 words in the accumulator layout
// of a 64x16 slice of S), V from shared memory, MN-major (rows contiguous along D:
// imm-trans-b = 1).
__device__ __forceinline__ void wgmma_rs(float (&d)[64], const unsigned* a,
                                         unsigned long long desc_b) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n"
        "}\n"
        : D8(d, 0), D8(d, 8), D8(d, 16), D8(d, 24), D8(d, 32), D8(d, 40), D8(d, 48), D8(d, 56)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

__device__ __forceinline__ void wgmma_rs(float (&d)[32], const unsigned* a,
                                         unsigned long long desc_b) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n"
        "}\n"
        : D8(d, 0), D8(d, 8), D8(d, 16), D8(d, 24)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}
#undef D8

__device__ __forceinline__ float exp2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// Round a pair of fp32 values to bf16 (nearest, ties to even) and pack them: lo in the low half.
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
}

template <int D, bool CAUSAL>
__device__ __forceinline__ void attention_cta(const TensorMap* tmap_q, const TensorMap* tmap_k,
                                              const TensorMap* tmap_v, unsigned* O, int S,
                                              float scale_log2) {
    using L = Layout<D>;
    constexpr int STAGES = L::STAGES;
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
    const unsigned base = (raw + SWIZZLE_ATOM - 1) & ~static_cast<unsigned>(SWIZZLE_ATOM - 1);
    const unsigned q_smem = base + L::Q_OFF;
    const unsigned k_smem = base + L::K_OFF;
    const unsigned v_smem = base + L::V_OFF;
    const unsigned q_full = base + L::BAR_OFF;
    const unsigned k_full = q_full + 8;
    const unsigned k_empty = k_full + 8 * STAGES;
    const unsigned v_full = k_empty + 8 * STAGES;
    const unsigned v_empty = v_full + 8 * STAGES;

    // Causal: the CTAs with the most key tiles start first.
    const int m_block = CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int head = blockIdx.z * gridDim.y + blockIdx.y;   // b * H + h
    const int head_row = head * S;                          // first row of this head in [B*H*S, D]
    const int tiles = CAUSAL ? m_block + 1 : S / BN;
    const int warpgroup = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        mbar_init(q_full, 1);
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(k_full + 8 * s, 1);
            mbar_init(v_full + 8 * s, 1);
            mbar_init(k_empty + 8 * s, CONSUMERS * 128);
            mbar_init(v_empty + 8 * s, CONSUMERS * 128);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warpgroup == 0) {
        // Producer: one thread issues every TMA load; the warpgroup keeps 24 registers a thread.
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
        if (threadIdx.x == 0) {
            mbar_expect_tx(q_full, L::TILE_BYTES);
#pragma unroll
            for (int box = 0; box < L::BOXES; ++box)
                tma_load_2d(q_smem + box * BOX_BYTES, tmap_q, q_full, box * BOX_COLS,
                            head_row + m_block * BM);
            for (int j = 0; j < tiles; ++j) {
                const int s = j % STAGES;
                const unsigned parity = ((j / STAGES) - 1) & 1;
                const int row = head_row + j * BN;
                if (j >= STAGES) mbar_wait(k_empty + 8 * s, parity);
                mbar_expect_tx(k_full + 8 * s, L::TILE_BYTES);
#pragma unroll
                for (int box = 0; box < L::BOXES; ++box)
                    tma_load_2d(k_smem + s * L::TILE_BYTES + box * BOX_BYTES, tmap_k, k_full + 8 * s,
                                box * BOX_COLS, row);
                if (j >= STAGES) mbar_wait(v_empty + 8 * s, parity);
                mbar_expect_tx(v_full + 8 * s, L::TILE_BYTES);
#pragma unroll
                for (int box = 0; box < L::BOXES; ++box)
                    tma_load_2d(v_smem + s * L::TILE_BYTES + box * BOX_BYTES, tmap_v, v_full + 8 * s,
                                box * BOX_COLS, row);
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
    const int consumer = warpgroup - 1;
    const int local = threadIdx.x % 128;
    const int warp = local / 32, lane = local % 32;
    const int my_turn = BAR_TURN + consumer, other_turn = BAR_TURN + 1 - consumer;

    float o[D / 2];           // O[64 x D] of this warpgroup, accumulator layout
    float sc[BN / 2];         // S[64 x BN] of the current tile, then P in fp32
    unsigned p[BN / 4];       // P as bf16 pairs: the A operand of P V
    float m[2] = {NEG_INF, NEG_INF};  // running max of the two rows, log2 units
    float l[2] = {0.0f, 0.0f};            // running sums, this thread's columns only
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) p[i] = 0u;

    const int row_in_cta = consumer * 64 + warp * 16 + lane / 4;  // and + 8
    const int q_row = m_block * BM + row_in_cta;                  // sequence position

    mbar_wait(q_full, 0);
    // Consumer 0 takes the first turn at the tensor cores.
    if (PINGPONG && consumer == 1) bar_arrive(BAR_TURN, 2 * 128);

    const unsigned q_tile = q_smem + consumer * 64 * 128;
    // S of tile j = Q K_j^T, 8 (D = 128) k-steps of 16 along D, committed as one group.
    // The caller has waited for K_j (k_full) and fenced: no divergent wait between the fence
    // and the MMAs, else the compiler serialises them.
    auto issue_s = [&](int j) {
        const int s = j % STAGES;
        const unsigned k_tile = k_smem + s * L::TILE_BYTES;
#pragma unroll
        for (int kk = 0; kk < D / WGMMA_K; ++kk) {
            const unsigned off = (kk / 4) * BOX_BYTES + (kk % 4) * WGMMA_K * 2;
            wgmma_ss_n128(sc, smem_desc(q_tile + off, 16, SWIZZLE_ATOM),
                          smem_desc(k_tile + off, 16, SWIZZLE_ATOM), kk > 0);
        }
        wgmma_commit();
    };
    // O += P_j V_j, 8 k-steps of 16 keys, committed as one group.
    auto issue_pv = [&](int j) {
        const int s = j % STAGES;
        const unsigned v_tile = v_smem + s * L::TILE_BYTES;
#pragma unroll
        for (int kk = 0; kk < BN / WGMMA_K; ++kk)
            wgmma_rs(o, p + 4 * kk, smem_desc(v_tile + kk * WGMMA_K * 128, BOX_BYTES, SWIZZLE_ATOM));
        wgmma_commit();
    };
    // Online softmax of tile j in place (S becomes P in fp32); returns nothing, leaves the
    // rescale factors of the two rows in alpha.
    float alpha[2];
    auto softmax = [&](int j) {
        if (CAUSAL && j == tiles - 1) {
            // The diagonal tile: key j*BN + column is visible to rows at or after it.
#pragma unroll
            for (int n = 0; n < BN / 8; ++n)
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int key = j * BN + 8 * n + 2 * (lane % 4) + (i % 2);
                    if (key > q_row + (i >= 2 ? 8 : 0)) sc[4 * n + i] = NEG_INF;
                }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float mx = NEG_INF;
#pragma unroll
            for (int n = 0; n < BN / 8; ++n)
                mx = fmaxf(mx, fmaxf(sc[4 * n + 2 * r], sc[4 * n + 2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m[r], mx * scale_log2);
            alpha[r] = exp2_approx(m[r] - m_new);
            m[r] = m_new;
            float sum = 0.0f;
#pragma unroll
            for (int n = 0; n < BN / 8; ++n) {
                float* e = sc + 4 * n + 2 * r;
                e[0] = exp2_approx(fmaf(e[0], scale_log2, -m_new));
                e[1] = exp2_approx(fmaf(e[1], scale_log2, -m_new));
                sum += e[0] + e[1];
            }
            l[r] = l[r] * alpha[r] + sum;
        }
    };
    // Rescale O by 2^(m_old - m_new) and round P to bf16 A fragments: the accumulator layout
    // of S columns 16k..16k+15 is the A-operand layout of a 64x16 slice, so registers
    // 8k..8k+7 pack, in order, into A words 4k..4k+3.
    auto rescale_and_pack = [&]() {
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
            o[4 * n + 0] *= alpha[0];
            o[4 * n + 1] *= alpha[0];
            o[4 * n + 2] *= alpha[1];
            o[4 * n + 3] *= alpha[1];
        }
#pragma unroll
        for (int i = 0; i < BN / 4; ++i) p[i] = pack_bf16x2(sc[2 * i], sc[2 * i + 1]);
    };

    // Each turn: wait for this warpgroup's turn at the tensor cores, issue its GEMMs, hand
    // the turn to the other warpgroup (whose GEMMs then run while this one does its softmax).
    auto take_turn = [&]() {
        if (PINGPONG) bar_sync(my_turn, 2 * 128);
    };
    auto pass_turn = [&]() {
        if (PINGPONG) bar_arrive(other_turn, 2 * 128);
    };
    mbar_wait(k_full, 0);
    take_turn();
    wgmma_fence();
    issue_s(0);
    pass_turn();
    wgmma_wait<0>();
    mbar_arrive(k_empty);
    softmax(0);
    rescale_and_pack();
    for (int j = 1; j < tiles; ++j) {
        mbar_wait(k_full + 8 * (j % STAGES), (j / STAGES) & 1);
        mbar_wait(v_full + 8 * ((j - 1) % STAGES), ((j - 1) / STAGES) & 1);
        take_turn();
        wgmma_fence();
        issue_s(j);
        issue_pv(j - 1);
        pass_turn();
        wgmma_wait<1>();                         // S_j is done, P_{j-1} V_{j-1} may still run
        mbar_arrive(k_empty + 8 * (j % STAGES));
        softmax(j);
        wgmma_wait<0>();
        mbar_arrive(v_empty + 8 * ((j - 1) % STAGES));
        rescale_and_pack();
    }
    mbar_wait(v_full + 8 * ((tiles - 1) % STAGES), ((tiles - 1) / STAGES) & 1);
    take_turn();
    wgmma_fence();
    issue_pv(tiles - 1);
    if (consumer == 0) pass_turn();  // consumer 1 takes the last turn
    wgmma_wait<0>();
    mbar_arrive(v_empty + 8 * ((tiles - 1) % STAGES));

    // Epilogue: finish the row sums across the quad that shares a row, normalise, store bf16.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        l[r] = 1.0f / l[r];
    }
    const size_t row0 = static_cast<size_t>(head_row + q_row) * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
        const int col = 8 * n + 2 * (lane % 4);
        O[(row0 + col) / 2] = pack_bf16x2(o[4 * n] * l[0], o[4 * n + 1] * l[0]);
        O[(row0 + 8 * D + col) / 2] = pack_bf16x2(o[4 * n + 2] * l[1], o[4 * n + 3] * l[1]);
    }
}

// Grid (S / BM, H, B), 384 threads. Q, K, V: tensor maps over [B*H*S, D] bf16 with boxes of 128
// rows x 64 columns; O: [B, H, S, D] bf16 as packed pairs. scale_log2 = log2(e) / sqrt(D).
#define FA3_ENTRY(name, d, causal)                                                             \
    extern "C" __global__ void __launch_bounds__(THREADS, 1)                                   \
    name(const __grid_constant__ TensorMap tmap_q, const __grid_constant__ TensorMap tmap_k,   \
         const __grid_constant__ TensorMap tmap_v, unsigned* O, int S, float scale_log2) {     \
        attention_cta<d, causal>(&tmap_q, &tmap_k, &tmap_v, O, S, scale_log2);                 \
    }

FA3_ENTRY(fa3_fwd_d128, 128, false)
FA3_ENTRY(fa3_fwd_d128_causal, 128, true)
FA3_ENTRY(fa3_fwd_d64, 64, false)
FA3_ENTRY(fa3_fwd_d64_causal, 64, true)
