// 01 MLA decode: every query head against one shared latent cache, split over the context, on mma.sync
//
// What it computes (DeepSeek-V3's multi-head latent attention at decode, with the up-projections
// absorbed into the query and the output): each token of the cache is one row of 576 bf16 values,
// the 512-value latent c followed by the 64-value rotary key. Each of the H query heads has a
// 576-value query (its absorbed nope part and its rope part); score(h, t) = q_h . row_t, and
// out_h = softmax_t(score(h, .) * scale) . c_t, 512 values a head. The cache is paged: a block
// table maps each sequence's 64-token page i to a page of a shared pool, as in vLLM or FlashMLA.
//
// Every head reads the same rows, so a CTA takes HB = 16 * MT heads at once and reads each row once
// for all of them: the row is the B operand of both products, S = Q K^T (m = heads, n = tokens, k =
// 576) and O = P V (m = heads, n = the 512 latent dims, k = tokens). The cache is streamed through
// shared memory in tiles of 32 tokens (36 KB, half a page, contiguous in the pool) with cp.async
// 16-byte copies into STAGES buffers, rows padded from 1152 to 1168 bytes so that ldmatrix's eight
// row addresses fall in eight different bank groups. The 8 warps split S by token octet and half
// of k (4 x 2), add the halves through shared memory, and run the online softmax with one warp a
// head (a lane a token); then each warp owns 64 of the 512 output dims for all HB heads and
// accumulates P V in registers (MT x 8 tiles of m16n8, 32 MT floats a thread).
//
// The splits are merged in the same launch. Each CTA writes its unnormalised state (m, l and 512
// fp32 values a head) and takes a ticket from its (batch, head block) counter. A single last CTA
// would have to read splits x HB x 2 KB back (4 MB at 128 splits of 16 heads) through one SM, a
// few microseconds; instead the last NM CTAs to finish each merge a slice (one head's 128 dims):
// they wait, spinning on the counter, until every split has published, which is safe because the
// launcher keeps the grid within one wave of resident CTAs, so every CTA they wait for is already
// running.
//
// Variants (entry points; the header's last line names the measured one): split_latent_m<MT>_s<STAGES>,
// MT = 1 (16 heads a CTA), 2 or 4; STAGES = 3 or 4 buffers; suffix x (MT = 4): the warps split the
// scores by m-tile and k half instead of token octet and k half, so each Q fragment is loaded once
// a k step rather than once per token octet.
//
// Expected bound (estimate), B = 1, T = 32768 tokens: 32768 x 1152 B = 37.7 MB, 8.8 us at the
// about 4.29 TB/s copy ceiling. The FLOPs are 2 x H x T x (576 + 512): at H = 16, 1.14 GFLOP,
// 30 FLOP a byte, far under the tensor cores' ridge, so bytes bound it; at H = 128, 9.1 GFLOP, 242
// FLOP a byte, above the ridge (about 780 TFLOP/s / 4.29 TB/s = 182), so even a perfect kernel is
// compute-bound there (11.7 us at 780 TFLOP/s), and mma.sync, without Hopper's wgmma, reaches
// perhaps 60% of that rate. Expect at H = 16: the stream plus about 1.5 us of start and merge,
// ~10.5 us, 84% of copy; at H = 128: ~25 us.
//
// Size constraints: T a multiple of 64 (whole pages); H a multiple of HB; tokens_per_split a
// multiple of 64; splits <= MAX_SPLITS; B * H / HB <= MAX_GROUPS counters; the grid must fit in
// one wave of resident CTAs (the launcher checks); launches must not overlap.
//
// Outcome of the first run (scratch and suite, direction only here; DESIGN.md points at the
// cases): correct at every shape (float64 reference), and far from the floors. One CTA an SM was
// latency-bound: its 8 warps pass three barriers a tile in lock step, so the tile's dependent mma
// chains and the softmax's shuffle chains are exposed, and at 16 heads the stream ran near half of
// copy with 8 sequences. At 128 heads, 16 heads a CTA (eight CTAs reading each tile, seven of them
// from the L2) took as long as 8 sequences of 16 heads, the same count of CTA-tiles: the L2
// re-reads cost nothing visible, the latency everything; four m-tiles a CTA were faster there.
// m1_s2 (added after that run) halves the ring so that two CTAs share an SM and hide each other's
// waits; it is measured at every head count. The grid is sized from the driver's occupancy
// figure, so it stays within one wave.
//
// Resources (nvcc 13.0, -arch=sm_90, no spills; dynamic shared memory from the suite's smem_bytes):
// m1_s2 117 registers, 99904 bytes; m1_s3 117, 137280; m1_s4 117, 174656; m2_s4 170, 199808; m4_s3
// 252 and m4_s3x 254, 212736. compute-sanitizer memcheck: clean (m1_s4 and m4_s3 at B 1 H 16 T 64,
// B 1 H 128 T 128, B 2 H 16 T 256).
//
// Measured variant: m1_s2 (the entry the suite times at every head count; the others are built for
// comparison)

constexpr int DQK = 576;              // latent 512 + rope 64
constexpr int DV = 512;               // the latent part, also the value
constexpr int PAGE = 64;              // tokens a page
constexpr int TT = 32;                // tokens a tile
constexpr int WARPS = 8;
constexpr int THREADS = WARPS * 32;
constexpr int ROW = DQK + 8;          // padded smem row (elements): 1168 B, 73 16-byte units
constexpr int CHUNKS = DQK / 8;       // 16-byte chunks a row: 72
constexpr int SROW = TT + 8;          // fp32 score row stride (40 words)
constexpr int PROW = TT + 8;          // bf16 probability row stride (80 B, 5 units)
constexpr int KSTEPS = DQK / 16;      // 36
constexpr int MAX_SPLITS = 256;
constexpr int MAX_GROUPS = 4096;
constexpr int SLICE = 128;            // dims of one head a merger handles

static_assert(TT * CHUNKS % THREADS == 0, "each thread copies the same number of chunks a tile");
static_assert(PAGE % TT == 0, "a tile never crosses a page");
static_assert(KSTEPS % 2 == 0, "two warps split k in halves");

__device__ unsigned int mla_tickets[MAX_GROUPS] = {};
__device__ unsigned int mla_done[MAX_GROUPS] = {};

__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned short to_bf16(float x) {
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ unsigned take_ticket(unsigned* counter) {
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(old) : "l"(counter) : "memory");
    return old;
}

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Copies tile `i` of the CTA's range (32 rows of 576 values, contiguous in the pool) into `dst`.
__device__ __forceinline__ void load_tile(unsigned short* dst, const unsigned short* __restrict__ pool,
                                          const int* __restrict__ table_b, int tok0) {
    const int page = __ldg(table_b + tok0 / PAGE);
    const unsigned short* src = pool + (static_cast<size_t>(page) * PAGE + tok0 % PAGE) * DQK;
#pragma unroll
    for (int j = 0; j < TT * CHUNKS / THREADS; ++j) {
        const int idx = threadIdx.x + j * THREADS;
        const int r = idx / CHUNKS, c = idx % CHUNKS;
        cp_async16(dst + r * ROW + c * 8, src + r * DQK + c * 8);
    }
}

// Grid (splits, H / HB, B); block 256; dynamic shared memory as smem_bytes<MT, STAGES>().
// part_ml[(b * H + h) * splits + s] = (m, l); part_acc[((b * H + h) * splits + s) * DV + d].
template <int MT, int STAGES, bool SPLIT_M = false>
__device__ __forceinline__ void mla_body(const unsigned short* __restrict__ q,
                                         const unsigned short* __restrict__ pool,
                                         const int* __restrict__ table, float2* __restrict__ part_ml,
                                         float* __restrict__ part_acc, unsigned short* __restrict__ out,
                                         int H, int T, int tokens_per_split, float scale_log2) {
    constexpr int HB = 16 * MT;
    extern __shared__ __align__(16) unsigned char smem[];
    unsigned short* sQ = reinterpret_cast<unsigned short*>(smem);          // [HB][ROW]
    unsigned short* sKV = sQ + HB * ROW;                                     // [STAGES][TT][ROW]
    float* sS = reinterpret_cast<float*>(sKV + STAGES * TT * ROW);          // [2][HB][SROW]
    unsigned short* sP = reinterpret_cast<unsigned short*>(sS + 2 * HB * SROW);  // [HB][PROW]
    float* sAlpha = reinterpret_cast<float*>(sP + HB * PROW);               // [HB]
    __shared__ unsigned int ticket;

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane >> 2, tq = lane & 3;
    const int split = blockIdx.x, splits = gridDim.x;
    const int hb = blockIdx.y, b = blockIdx.z;
    const int head0 = hb * HB;
    const int group = b * gridDim.y + hb;
    const int t_begin = split * tokens_per_split;
    const int t_end = min(T, t_begin + tokens_per_split);
    const int tiles = (t_end - t_begin) / TT;
    const int* table_b = table + static_cast<size_t>(b) * (T / PAGE);

    // Q of the CTA's heads, with the first tile (one commit group)
    {
        const unsigned short* qsrc = q + (static_cast<size_t>(b) * H + head0) * DQK;
        for (int idx = threadIdx.x; idx < HB * CHUNKS; idx += THREADS) {
            const int r = idx / CHUNKS, c = idx % CHUNKS;
            cp_async16(sQ + r * ROW + c * 8, qsrc + r * DQK + c * 8);
        }
    }
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) load_tile(sKV + s * TT * ROW, pool, table_b, t_begin + s * TT);
        cp_commit();
    }

    // softmax state of heads warp + 8 j (j < HB / 8), the same in every lane of the warp
    float m_run[HB / WARPS], l_run[HB / WARPS];
#pragma unroll
    for (int j = 0; j < HB / WARPS; ++j) {
        m_run[j] = __int_as_float(0xff800000u);
        l_run[j] = 0.0f;
    }
    float acc[MT][8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int n = 0; n < 8; ++n) acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.0f;

    // S work of this warp: token octet n8 = warp % 4, k half = warp / 4 (SPLIT_M: see the loop)
    const int n8 = warp % 4, khalf = warp / 4;
    static_assert(!SPLIT_M || MT == 4, "the m-split gives each of the 8 warps an m-tile and a k half");

    for (int i = 0; i < tiles; ++i) {
        cp_wait<STAGES - 2>();
        __syncthreads();  // tile i landed for all; every warp is done with tile i - 1's buffer
        {
            const int nt = i + STAGES - 1;
            if (nt < tiles) load_tile(sKV + (nt % STAGES) * TT * ROW, pool, table_b, t_begin + nt * TT);
            cp_commit();
        }
        const unsigned short* kv = sKV + (i % STAGES) * TT * ROW;

        if constexpr (!SPLIT_M) {
            // S = Q K^T over this warp's 8 tokens and half of k, for all MT m-tiles
            float c[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) c[mt][0] = c[mt][1] = c[mt][2] = c[mt][3] = 0.0f;
            // B: lanes 0-7 rows (tokens) 0-7 at dims k0, lanes 8-15 at k0 + 8, 16-23 at k0 + 16, 24-31 at k0 + 24
            const unsigned short* kb = kv + (n8 * 8 + (lane & 7)) * ROW + (lane >> 3) * 8;
            // A: lanes 0-15 rows 0-15 at k0, lanes 16-31 rows 0-15 at k0 + 8
            const unsigned short* qa = sQ + (lane & 15) * ROW + (lane >> 4) * 8;
#pragma unroll 3
            for (int ks = khalf * (KSTEPS / 2); ks < (khalf + 1) * (KSTEPS / 2); ks += 2) {
                unsigned bk[4];
                ldsm_x4(bk, kb + ks * 16);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    unsigned a0[4], a1[4];
                    ldsm_x4(a0, qa + mt * 16 * ROW + ks * 16);
                    ldsm_x4(a1, qa + mt * 16 * ROW + (ks + 1) * 16);
                    mma16816(c[mt], a0, bk[0], bk[1]);
                    mma16816(c[mt], a1, bk[2], bk[3]);
                }
            }
            float* ss = sS + khalf * HB * SROW;
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                *reinterpret_cast<float2*>(ss + (mt * 16 + g) * SROW + n8 * 8 + 2 * tq) = make_float2(c[mt][0], c[mt][1]);
                *reinterpret_cast<float2*>(ss + (mt * 16 + g + 8) * SROW + n8 * 8 + 2 * tq) = make_float2(c[mt][2], c[mt][3]);
            }
        } else {
            // MT = 4: warp w takes m-tile w / 2 and k half w % 2, all 4 token octets: per pair of
            // k steps 2 A loads and 4 B loads feed 8 mma (the other split needs 9 loads for 8)
            const int mt = warp / 2, kh = warp % 2;
            float c[4][4];
#pragma unroll
            for (int o = 0; o < 4; ++o) c[o][0] = c[o][1] = c[o][2] = c[o][3] = 0.0f;
            const unsigned short* kb = kv + (lane & 7) * ROW + (lane >> 3) * 8;
            const unsigned short* qa = sQ + (mt * 16 + (lane & 15)) * ROW + (lane >> 4) * 8;
#pragma unroll 3
            for (int ks = kh * (KSTEPS / 2); ks < (kh + 1) * (KSTEPS / 2); ks += 2) {
                unsigned a0[4], a1[4];
                ldsm_x4(a0, qa + ks * 16);
                ldsm_x4(a1, qa + (ks + 1) * 16);
#pragma unroll
                for (int o = 0; o < 4; ++o) {
                    unsigned bk[4];
                    ldsm_x4(bk, kb + o * 8 * ROW + ks * 16);
                    mma16816(c[o], a0, bk[0], bk[1]);
                    mma16816(c[o], a1, bk[2], bk[3]);
                }
            }
            float* ss = sS + kh * HB * SROW;
#pragma unroll
            for (int o = 0; o < 4; ++o) {
                *reinterpret_cast<float2*>(ss + (mt * 16 + g) * SROW + o * 8 + 2 * tq) = make_float2(c[o][0], c[o][1]);
                *reinterpret_cast<float2*>(ss + (mt * 16 + g + 8) * SROW + o * 8 + 2 * tq) = make_float2(c[o][2], c[o][3]);
            }
        }
        __syncthreads();

        // online softmax: warp w takes heads w + 8 j, lane = token
#pragma unroll
        for (int j = 0; j < HB / WARPS; ++j) {
            const int h = warp + WARPS * j;
            const float s = (sS[h * SROW + lane] + sS[HB * SROW + h * SROW + lane]) * scale_log2;
            float mx = s;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float m_new = fmaxf(m_run[j], mx);
            const float alpha = fast_exp2(m_run[j] - m_new);  // 0 on the first tile (m = -inf)
            const float p = fast_exp2(s - m_new);
            float ps = p;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, off);
            l_run[j] = l_run[j] * alpha + ps;
            m_run[j] = m_new;
            sP[h * PROW + lane] = to_bf16(p);
            if (lane == 0) sAlpha[h] = alpha;
        }
        __syncthreads();

        // O = O * alpha + P V over this warp's 64 dims
        {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                const float a_lo = sAlpha[mt * 16 + g], a_hi = sAlpha[mt * 16 + g + 8];
#pragma unroll
                for (int n = 0; n < 8; ++n) {
                    acc[mt][n][0] *= a_lo;
                    acc[mt][n][1] *= a_lo;
                    acc[mt][n][2] *= a_hi;
                    acc[mt][n][3] *= a_hi;
                }
            }
            const int d0 = warp * 64;
#pragma unroll
            for (int kk = 0; kk < TT / 16; ++kk) {
                unsigned pa[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
                    ldsm_x4(pa[mt], sP + (mt * 16 + (lane & 15)) * PROW + kk * 16 + (lane >> 4) * 8);
                // B = V[k = tokens][n = dims] row-major: trans; lanes 0-7 tokens 0-7, 8-15 tokens 8-15
                // (dims n0), 16-23 tokens 0-7 and 24-31 tokens 8-15 (dims n0 + 8)
                const unsigned short* vb = kv + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * ROW + d0 + (lane >> 4) * 8;
#pragma unroll
                for (int n = 0; n < 8; n += 2) {
                    unsigned bv[4];
                    ldsm_x4_t(bv, vb + n * 8);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma16816(acc[mt][n], pa[mt], bv[0], bv[1]);
                        mma16816(acc[mt][n + 1], pa[mt], bv[2], bv[3]);
                    }
                }
            }
        }
    }
    cp_wait<0>();

    // publish this split's state
    {
        const size_t base = static_cast<size_t>(b) * H + head0;
#pragma unroll
        for (int j = 0; j < HB / WARPS; ++j) {
            const int h = warp + WARPS * j;
            if (lane == 0) part_ml[(base + h) * splits + split] = make_float2(m_run[j], l_run[j]);
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
            for (int n = 0; n < 8; ++n) {
                const int d = warp * 64 + n * 8 + 2 * tq;
                float* lo = part_acc + ((base + mt * 16 + g) * splits + split) * DV + d;
                float* hi = part_acc + ((base + mt * 16 + g + 8) * splits + split) * DV + d;
                *reinterpret_cast<float2*>(lo) = make_float2(acc[mt][n][0], acc[mt][n][1]);
                *reinterpret_cast<float2*>(hi) = make_float2(acc[mt][n][2], acc[mt][n][3]);
            }
        }
    }
    __threadfence();
    __syncthreads();
    const int slices = HB * (DV / SLICE);
    const int mergers = min(splits, slices);
    if (threadIdx.x == 0) ticket = take_ticket(&mla_tickets[group]);
    __syncthreads();
    const int first_merger = splits - mergers;
    if (static_cast<int>(ticket) < first_merger) return;

    // one of the last `mergers` CTAs: wait for every split, then merge slices j, j + mergers, ...
    if (threadIdx.x == 0) {
        while (load_acquire(&mla_tickets[group]) < static_cast<unsigned>(splits)) {
        }
    }
    __syncthreads();
    float* wbuf = reinterpret_cast<float*>(sKV);  // [MAX_SPLITS] weights of the slice's head
    float* red = wbuf + MAX_SPLITS;               // [4][SLICE] partial sums
    for (int sl = static_cast<int>(ticket) - first_merger; sl < slices; sl += mergers) {
        const int h = sl / (DV / SLICE), dbase = (sl % (DV / SLICE)) * SLICE;
        const size_t row = static_cast<size_t>(b) * H + head0 + h;
        if (warp == 0) {
            float big = __int_as_float(0xff800000u);
            for (int s = lane; s < splits; s += 32) big = fmaxf(big, __ldcg(&part_ml[row * splits + s]).x);
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) big = fmaxf(big, __shfl_xor_sync(0xffffffffu, big, off));
            float sum = 0.0f;
            for (int s = lane; s < splits; s += 32) {
                const float2 ml = __ldcg(&part_ml[row * splits + s]);
                const float w = fast_exp2(ml.x - big);
                wbuf[s] = w;
                sum = fmaf(w, ml.y, sum);
            }
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            const float inv = 1.0f / sum;
            for (int s = lane; s < splits; s += 32) wbuf[s] *= inv;
        }
        __syncthreads();
        // thread (sg, d2): splits sg, sg + 4, ...; dims dbase + 2 d2, + 1
        const int sg = threadIdx.x / (SLICE / 2), d2 = threadIdx.x % (SLICE / 2);
        float2 val = make_float2(0.0f, 0.0f);
        const float* src = part_acc + row * splits * DV + dbase + 2 * d2;
#pragma unroll 8
        for (int s = sg; s < splits; s += 4) {
            const float2 a = __ldcg(reinterpret_cast<const float2*>(src + static_cast<size_t>(s) * DV));
            const float w = wbuf[s];
            val.x = fmaf(w, a.x, val.x);
            val.y = fmaf(w, a.y, val.y);
        }
        *reinterpret_cast<float2*>(red + sg * SLICE + 2 * d2) = val;
        __syncthreads();
        if (threadIdx.x < SLICE / 2) {
            float2 r = make_float2(0.0f, 0.0f);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const float2 v = *reinterpret_cast<const float2*>(red + k * SLICE + 2 * threadIdx.x);
                r.x += v.x;
                r.y += v.y;
            }
            const unsigned packed = to_bf16(r.x) | (static_cast<unsigned>(to_bf16(r.y)) << 16);
            reinterpret_cast<unsigned*>(out + row * DV + dbase)[threadIdx.x] = packed;
        }
        __syncthreads();
    }
    // the last merger to finish puts both counters back to zero for the next launch
    if (threadIdx.x == 0) {
        __threadfence();
        if (take_ticket(&mla_done[group]) == static_cast<unsigned>(mergers - 1)) {
            mla_tickets[group] = 0;
            mla_done[group] = 0;
            __threadfence();
        }
    }
}

static_assert(THREADS == 4 * (SLICE / 2), "the merge splits the splits four ways");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
split_latent_m1_s3(const unsigned short* __restrict__ q, const unsigned short* __restrict__ pool,
                     const int* __restrict__ table, float2* __restrict__ part_ml, float* __restrict__ part_acc,
                     unsigned short* __restrict__ out, int H, int T, int tokens_per_split, float scale_log2) {
    mla_body<1, 3>(q, pool, table, part_ml, part_acc, out, H, T, tokens_per_split, scale_log2);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1)
split_latent_m1_s4(const unsigned short* __restrict__ q, const unsigned short* __restrict__ pool,
                     const int* __restrict__ table, float2* __restrict__ part_ml, float* __restrict__ part_acc,
                     unsigned short* __restrict__ out, int H, int T, int tokens_per_split, float scale_log2) {
    mla_body<1, 4>(q, pool, table, part_ml, part_acc, out, H, T, tokens_per_split, scale_log2);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1)
split_latent_m2_s4(const unsigned short* __restrict__ q, const unsigned short* __restrict__ pool,
                     const int* __restrict__ table, float2* __restrict__ part_ml, float* __restrict__ part_acc,
                     unsigned short* __restrict__ out, int H, int T, int tokens_per_split, float scale_log2) {
    mla_body<2, 4>(q, pool, table, part_ml, part_acc, out, H, T, tokens_per_split, scale_log2);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1)
split_latent_m4_s3(const unsigned short* __restrict__ q, const unsigned short* __restrict__ pool,
                     const int* __restrict__ table, float2* __restrict__ part_ml, float* __restrict__ part_acc,
                     unsigned short* __restrict__ out, int H, int T, int tokens_per_split, float scale_log2) {
    mla_body<4, 3>(q, pool, table, part_ml, part_acc, out, H, T, tokens_per_split, scale_log2);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1)
split_latent_m4_s3x(const unsigned short* __restrict__ q, const unsigned short* __restrict__ pool,
                    const int* __restrict__ table, float2* __restrict__ part_ml, float* __restrict__ part_acc,
                    unsigned short* __restrict__ out, int H, int T, int tokens_per_split, float scale_log2) {
    mla_body<4, 3, true>(q, pool, table, part_ml, part_acc, out, H, T, tokens_per_split, scale_log2);
}
// Two CTAs an SM: 2 tiles of 36 KB and 16 heads fit in 98 KB of shared memory and 117 registers a
// thread, so two CTAs share an SM and each one's barriers and dependent mma chains hide under the
// other's work.
extern "C" __global__ void __launch_bounds__(THREADS, 2)
split_latent_m1_s2(const unsigned short* __restrict__ q, const unsigned short* __restrict__ pool,
                   const int* __restrict__ table, float2* __restrict__ part_ml, float* __restrict__ part_acc,
                   unsigned short* __restrict__ out, int H, int T, int tokens_per_split, float scale_log2) {
    mla_body<1, 2>(q, pool, table, part_ml, part_acc, out, H, T, tokens_per_split, scale_log2);
}
