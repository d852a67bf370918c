// 04 MLA decode at 16 heads: one barrier a tile, three tiles in three stages at once
//
// What it computes: the same as 01-03 (MLA decode against a paged 576-value latent cache; the
// output is 512 values a head). It is built for the bandwidth-bound shapes, 16 query heads.
//
// Idea against 01. 01 passes three CTA barriers a 32-token tile, scores -> softmax -> P V, so each
// tile's work is one dependent chain: the score mma chain, then the softmax's shuffle chains, then
// the P V products, each phase waiting for the slowest warp of the one before. Here the three
// stages belong to three different tiles and run in the same phase, separated by one barrier:
// in phase i every warp
//   - multiplies P of tile i (its softmax came out of phase i - 1) by V of tile i into its output
//     dims, after rescaling them by tile i's alpha;
//   - computes its part of the scores of tile i + 2 into a double-buffered score tile;
//   - runs the online softmax of tile i + 1 (whose scores came out of phase i - 1) for its heads,
//     writing P and alpha of tile i + 1 into a double-buffered probability tile.
// None of the three reads what another writes in the same phase, so a warp's mma, shuffles and
// shared-memory loads of the three stages overlap each other and the other warps', and one
// barrier closes the phase. Three tiles are held (i, i + 1, i + 2) and the ring's other slots are
// in flight: with R slots, R - 3 tiles (cp.async, 16 bytes a thread-copy, issued right after the
// barrier into the slot tile i - 1 just freed). The page of the tile issued next phase is read
// from the block table one phase early, so no warp waits on it.
//
// The warps split the scores of a tile by token octet (4) and by k (WARPS / 4 parts, k-step pairs
// dealt round-robin, two accumulators so that the mma chain is half as deep); the softmax takes
// 16 / WARPS heads a warp (a lane a token, as in 01); P V gives each warp 512 / WARPS output dims
// of all 16 heads. One CTA an SM (over 114 KB of shared memory). The splits are merged in the same
// launch as in 01: the last CTAs of a (sequence, head block) to finish each merge 128-dim slices
// after waiting for the group's counter, which is safe because the grid is at most one CTA an SM.
//
// Variants (entry points pipe_w<WARPS>_r<R>[q]): WARPS = 8 or 16 warps, R = 4 or 5 ring slots (1
// or 2 tiles in flight during a phase), q: each warp keeps its k-steps of Q as mma fragments in
// registers, loaded once, instead of reading them from shared memory for every tile (the score
// loop's ldmatrix traffic drops to a third: ~194 KB of shared-memory traffic a tile to ~120 KB,
// against ~255 KB the SM can move in the ~2000 cycles the stream allows a tile). The header's
// last line names the measured one.
//
// Expected bound (estimate), B = 8, H = 16, T = 32768: 8 x 32768 x 1152 B = 302 MB, 70.4 us at
// the ~4.29 TB/s copy ceiling. 8 head-block groups over 132 SMs give 16 splits a sequence, 128
// CTAs: 4 SMs idle, so at best ~97% of copy. A phase is 272 mma.m16n8k16 a CTA (144 for the
// scores, 128 for P V, 1.11 MFLOP, ~550 cycles at ~470 TFLOP/s of mma.sync over 132 SMs) plus a
// softmax that overlaps them: ~1000-1300 cycles against the ~2000 cycles (~1.13 us at ~1.75 GHz)
// the stream allows for 36.9 KB an SM. 64 tiles a CTA plus a 3-phase ramp, plus ~3-4 us of merge and launch: 78-84 us,
// 84-90% of copy, if two tiles in flight an SM (74 KB) cover the loaded memory latency.
//
// Size constraints: H a multiple of 16; T a multiple of 64 (whole pages); tokens_per_split a
// multiple of 32; splits <= MAX_SPLITS; B * H / 16 <= MAX_GROUPS counters; grid within one wave
// of resident CTAs (one an SM; the launcher checks); launches must not overlap.
//
// Resources (nvcc 13.0, -arch=sm_90, --resource-usage, no spills; dynamic shared memory from the
// suite's pipe_smem_bytes, plus 16 bytes static): w8_r4 96 registers, 181120 bytes; w8_r5 96,
// 218496; w16_r4 75, 191360; w16_r5 75, 228736; w8_r5q 175, 218496; w16_r5q 108, 228736.
//
// Measured variant: w16_r5q

constexpr int DQK = 576;              // latent 512 + rope 64
constexpr int DV = 512;               // the latent part, also the value
constexpr int PAGE = 64;              // tokens a page
constexpr int TT = 32;                // tokens a tile
constexpr int HB = 16;                // heads a CTA
constexpr int ROW = DQK + 8;          // padded smem row (elements): 1168 B
constexpr int CHUNKS = DQK / 8;       // 16-byte chunks a row: 72
constexpr int SROW = TT + 8;          // fp32 score row stride
constexpr int PROW = TT + 8;          // bf16 probability row stride
constexpr int KPAIRS = DQK / 32;      // 18 pairs of k16 steps
constexpr int MAX_SPLITS = 256;
constexpr int MAX_GROUPS = 4096;
constexpr int SLICE = 128;            // dims of one head a merger handles
constexpr int MERGE_THREADS = 4 * (SLICE / 2);

static_assert(PAGE % TT == 0, "a tile never crosses a page");

__device__ unsigned int pipe_tickets[MAX_GROUPS] = {};
__device__ unsigned int pipe_done[MAX_GROUPS] = {};

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

// Not volatile: a register-only instruction the compiler may schedule among the three stages.
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
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

// Dynamic shared memory of pipe_w<WARPS>_r<R> (the suite's pipe_smem_bytes mirrors it).
template <int WARPS, int R>
__device__ constexpr int pipe_smem() {
    return HB * ROW * 2 + R * TT * ROW * 2 + 2 * (WARPS / 4) * HB * SROW * 4 + 2 * HB * PROW * 2 + 2 * HB * 4;
}

// Grid (splits, H / 16, B); block 32 WARPS; dynamic shared memory pipe_smem<WARPS, R>().
// part_ml[(b * H + h) * splits + s] = (m, l); part_acc[((b * H + h) * splits + s) * DV + d].
template <int WARPS, int R, bool QREG>
__device__ __forceinline__ void pipe_body(const unsigned short* __restrict__ q,
                                          const unsigned short* __restrict__ pool,
                                          const int* __restrict__ table, float2* __restrict__ part_ml,
                                          float* __restrict__ part_acc, unsigned short* __restrict__ out,
                                          int H, int T, int tokens_per_split, float scale_log2) {
    constexpr int THREADS = WARPS * 32;
    constexpr int KSPLIT = WARPS / 4;            // k parts of the scores
    constexpr int HPW = HB / WARPS;              // softmax heads a warp
    constexpr int NT = DV / WARPS / 8;           // n8 output tiles a warp
    static_assert(WARPS == 8 || WARPS == 16, "8 or 16 warps");
    static_assert(R >= 4, "three tiles held and at least one in flight");
    static_assert(NT % 2 == 0, "V is loaded two n8 tiles at a time");
    static_assert(THREADS >= MERGE_THREADS, "the merge uses the first 256 threads");
    static_assert(pipe_smem<WARPS, R>() + 16 <= 227 * 1024, "one CTA's shared memory");
    static_assert((MAX_SPLITS + 4 * SLICE) * 4 <= R * TT * ROW * 2, "the merge reuses the ring");

    extern __shared__ __align__(16) unsigned char smem[];
    unsigned short* sQ = reinterpret_cast<unsigned short*>(smem);                 // [HB][ROW]
    unsigned short* sKV = sQ + HB * ROW;                                            // [R][TT][ROW]
    float* sS = reinterpret_cast<float*>(sKV + R * TT * ROW);                      // [2][KSPLIT][HB][SROW]
    unsigned short* sP = reinterpret_cast<unsigned short*>(sS + 2 * KSPLIT * HB * SROW);  // [2][HB][PROW]
    float* sAlpha = reinterpret_cast<float*>(sP + 2 * HB * PROW);                   // [2][HB]
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

    // tile n's 32 rows (contiguous in the pool, page `page`) into its ring slot; an empty commit
    // group past the last tile keeps the group count uniform
    auto issue = [&](int n, int page) {
        if (n < tiles) {
            const int tok = t_begin + n * TT;
            const unsigned short* src = pool + (static_cast<size_t>(page) * PAGE + tok % PAGE) * DQK;
            unsigned short* dst = sKV + (n % R) * TT * ROW;
            for (int idx = threadIdx.x; idx < TT * CHUNKS; idx += THREADS) {
                const int r = idx / CHUNKS, c = idx % CHUNKS;
                cp_async16(dst + r * ROW + c * 8, src + r * DQK + c * 8);
            }
        }
        cp_commit();
    };
    auto page_of = [&](int n) { return n < tiles ? __ldg(table_b + (t_begin + n * TT) / PAGE) : 0; };

    // Q with tile 0; tiles 0 .. R - 4 before the loop; phase i issues tile i + R - 1
    {
        const unsigned short* qsrc = q + (static_cast<size_t>(b) * H + head0) * DQK;
        for (int idx = threadIdx.x; idx < HB * CHUNKS; idx += THREADS) {
            const int r = idx / CHUNKS, c = idx % CHUNKS;
            cp_async16(sQ + r * ROW + c * 8, qsrc + r * DQK + c * 8);
        }
    }
#pragma unroll
    for (int n = 0; n <= R - 4; ++n) issue(n, page_of(n));
    int page_next = page_of(R - 3);
    cp_wait<R - 4>();
    __syncthreads();

    float m_run[HPW], l_run[HPW];
#pragma unroll
    for (int j = 0; j < HPW; ++j) {
        m_run[j] = __int_as_float(0xff800000u);
        l_run[j] = 0.0f;
    }
    float acc[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;

    const int n8 = warp % 4, kq = warp / 4;
    // score operands: B lanes 0-7 rows (tokens) at k0, 8-15 at k0 + 8, 16-23 at k0 + 16, 24-31 at
    // k0 + 24; A lanes 0-15 rows (heads) at k0, 16-31 at k0 + 8
    const unsigned short* qa = sQ + (lane & 15) * ROW + (lane >> 4) * 8;
    // QREG: this warp's A fragments of Q (its k-step pairs), loaded once (Q landed with tile 0)
    constexpr int NPAIRS = (KPAIRS + KSPLIT - 1) / KSPLIT;
    unsigned qf[QREG ? NPAIRS : 1][2][4];
    if constexpr (QREG) {
#pragma unroll
        for (int jj = 0; jj < NPAIRS; ++jj) {
            const int p = kq + jj * KSPLIT;
            if (p < KPAIRS) {
                ldsm_x4(qf[jj][0], qa + p * 32);
                ldsm_x4(qf[jj][1], qa + p * 32 + 16);
            }
        }
    }
    const int kb_off = (n8 * 8 + (lane & 7)) * ROW + (lane >> 3) * 8;
    // P V operands: V lanes 0-7 tokens 0-7, 8-15 tokens 8-15 (dims n0), 16-31 the same at n0 + 8
    const int d0 = warp * (DV / WARPS);
    const int vb_off = ((lane & 7) + ((lane >> 3) & 1) * 8) * ROW + d0 + (lane >> 4) * 8;

    for (int i = -2; i < tiles; ++i) {
        // refill the slot of tile i - 1 (free since the barrier that ended phase i - 1)
        {
            const int n = i + R - 1;
            const int page = page_next;
            page_next = page_of(n + 1);
            issue(n, page);
        }

        // P V of tile i
        if (i >= 0) {
            const int buf = i & 1;
            const float a_lo = sAlpha[buf * HB + g], a_hi = sAlpha[buf * HB + g + 8];
#pragma unroll
            for (int n = 0; n < NT; ++n) {
                acc[n][0] *= a_lo;
                acc[n][1] *= a_lo;
                acc[n][2] *= a_hi;
                acc[n][3] *= a_hi;
            }
            const unsigned short* kv = sKV + (i % R) * TT * ROW;
            const unsigned short* pbuf = sP + buf * HB * PROW;
#pragma unroll
            for (int kk = 0; kk < TT / 16; ++kk) {
                unsigned pa[4];
                ldsm_x4(pa, pbuf + (lane & 15) * PROW + kk * 16 + (lane >> 4) * 8);
                const unsigned short* vb = kv + kk * 16 * ROW + vb_off;
#pragma unroll
                for (int n = 0; n < NT; n += 2) {
                    unsigned bv[4];
                    ldsm_x4_t(bv, vb + n * 8);
                    mma16816(acc[n], pa, bv[0], bv[1]);
                    mma16816(acc[n + 1], pa, bv[2], bv[3]);
                }
            }
        }

        // scores of tile i + 2: this warp's token octet, k-step pairs kq, kq + KSPLIT, ...
        if (i + 2 < tiles) {
            const unsigned short* kb = sKV + ((i + 2) % R) * TT * ROW + kb_off;
            float c0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int jj = 0; jj < NPAIRS; ++jj) {
                const int p = kq + jj * KSPLIT;
                if (p >= KPAIRS) break;
                unsigned bk[4];
                ldsm_x4(bk, kb + p * 32);
                if constexpr (QREG) {
                    mma16816(c0, qf[jj][0], bk[0], bk[1]);
                    mma16816(c1, qf[jj][1], bk[2], bk[3]);
                } else {
                    unsigned a0[4], a1[4];
                    ldsm_x4(a0, qa + p * 32);
                    ldsm_x4(a1, qa + p * 32 + 16);
                    mma16816(c0, a0, bk[0], bk[1]);
                    mma16816(c1, a1, bk[2], bk[3]);
                }
            }
            float* ss = sS + (((i + 2) & 1) * KSPLIT + kq) * HB * SROW;
            *reinterpret_cast<float2*>(ss + g * SROW + n8 * 8 + 2 * tq) = make_float2(c0[0] + c1[0], c0[1] + c1[1]);
            *reinterpret_cast<float2*>(ss + (g + 8) * SROW + n8 * 8 + 2 * tq) = make_float2(c0[2] + c1[2], c0[3] + c1[3]);
        }

        // online softmax of tile i + 1: heads warp + WARPS j, lane = token
        if (i + 1 >= 0 && i + 1 < tiles) {
            const int buf = (i + 1) & 1;
            const float* ss = sS + buf * KSPLIT * HB * SROW;
#pragma unroll
            for (int j = 0; j < HPW; ++j) {
                const int h = warp + WARPS * j;
                float s = 0.0f;
#pragma unroll
                for (int k = 0; k < KSPLIT; ++k) s += ss[(k * HB + h) * SROW + lane];
                s *= scale_log2;
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
                sP[(buf * HB + h) * PROW + lane] = to_bf16(p);
                if (lane == 0) sAlpha[buf * HB + h] = alpha;
            }
        }

        // tile i + 3 landed (this thread's copies), then the phase's one barrier
        cp_wait<R - 4>();
        __syncthreads();
    }
    cp_wait<0>();

    // publish this split's state
    {
        const size_t base = static_cast<size_t>(b) * H + head0;
#pragma unroll
        for (int j = 0; j < HPW; ++j) {
            const int h = warp + WARPS * j;
            if (lane == 0) part_ml[(base + h) * splits + split] = make_float2(m_run[j], l_run[j]);
        }
#pragma unroll
        for (int n = 0; n < NT; ++n) {
            const int d = d0 + n * 8 + 2 * tq;
            float* lo = part_acc + ((base + g) * splits + split) * DV + d;
            float* hi = part_acc + ((base + g + 8) * splits + split) * DV + d;
            *reinterpret_cast<float2*>(lo) = make_float2(acc[n][0], acc[n][1]);
            *reinterpret_cast<float2*>(hi) = make_float2(acc[n][2], acc[n][3]);
        }
    }
    __threadfence();
    __syncthreads();
    const int slices = HB * (DV / SLICE);
    const int mergers = min(splits, slices);
    if (threadIdx.x == 0) ticket = take_ticket(&pipe_tickets[group]);
    __syncthreads();
    const int first_merger = splits - mergers;
    if (static_cast<int>(ticket) < first_merger) return;

    // one of the last `mergers` CTAs: wait for every split, then merge slices j, j + mergers, ...
    if (threadIdx.x == 0) {
        while (load_acquire(&pipe_tickets[group]) < static_cast<unsigned>(splits)) {
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
        // thread (sg, d2) of the first 256: splits sg, sg + 4, ...; dims dbase + 2 d2, + 1
        if (threadIdx.x < MERGE_THREADS) {
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
        }
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
        if (take_ticket(&pipe_done[group]) == static_cast<unsigned>(mergers - 1)) {
            pipe_tickets[group] = 0;
            pipe_done[group] = 0;
            __threadfence();
        }
    }
}

#define PIPE_ENTRY(W, R, Q, SUFFIX)                                                                        \
    extern "C" __global__ void __launch_bounds__(W * 32, 1)                                                \
    pipe_w##W##_r##R##SUFFIX(const unsigned short* __restrict__ q, const unsigned short* __restrict__ pool,        \
                     const int* __restrict__ table, float2* __restrict__ part_ml,                          \
                     float* __restrict__ part_acc, unsigned short* __restrict__ out, int H, int T,         \
                     int tokens_per_split, float scale_log2) {                                             \
        pipe_body<W, R, Q>(q, pool, table, part_ml, part_acc, out, H, T, tokens_per_split, scale_log2);       \
    }

PIPE_ENTRY(8, 4, false, )
PIPE_ENTRY(8, 5, false, )
PIPE_ENTRY(16, 4, false, )
PIPE_ENTRY(16, 5, false, )
PIPE_ENTRY(8, 5, true, q)
PIPE_ENTRY(16, 5, true, q)
