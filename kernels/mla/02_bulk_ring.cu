// 02 MLA decode: the cache streamed by bulk copy into a deep ring, two warp groups that never wait on each other
//
// What it computes: the same as 01 (every query head against one 576-value latent cache row a
// token, paged in 64-token pages; out_h = softmax(q_h . row * scale) . row[:512]), split over the
// context and merged in the same launch.
//
// What changed from 01, and why. 01's eight warps issued 16-byte cp.async copies themselves and
// passed three CTA-wide barriers a 32-token tile, so each tile's dependent mma chains, shuffle
// chains and the wait for the next tile were exposed one after another, with one or two tiles in
// flight an SM. Here:
//  - the copy engine moves the cache: a tile (32 rows, contiguous in a page) is 32 cp.async.bulk
//    copies of one 1152-byte row each, one a lane of one warp, into rows padded to 1168 bytes
//    (conflict-free ldmatrix, as in 01), completing on the ring slot's mbarrier, armed with the
//    tile's 36864 bytes. No thread spends issue slots or registers on the bytes, and consumers
//    wait on the mbarrier's phase, not on a CTA barrier.
//  - the eight warps form two groups of four that take alternate tiles and never wait for each
//    other: each group keeps its own running max, sum and output accumulator and its own score and
//    probability tiles, and synchronises only its 128 threads (named barriers 1 and 2), twice a
//    tile. Each slot has a second mbarrier, "empty", on which the four warps of the group that
//    consumed its tile arrive after their P V; warp 0 of that group waits for it and refills the
//    slot with the tile STAGES ahead. There is no producer warp: a ninth warp would cap the
//    registers at 168 a thread (three warps on one of the four schedulers' 64 KB register files).
// Within a group, warp r computes the scores over its quarter of k (9 of the 36 k steps, every
// head of the CTA, all 32 tokens) and adds them into the group's fp32 score tile with shared
// memory atomics; then warp r runs the online softmax for heads r, r + 4, ... (a lane a token),
// zeroing the score tile behind it for the next tile; then O += P V, warp r owning output dims
// [128 r, 128 r + 128) of every head: MT x 16 tiles of m16n8, 64 MT accumulators a thread.
// At the end the two groups' states are combined in shared memory (rescaled to their common max),
// written as the CTA's split partial, and the splits are merged by the last CTAs as in 01.
//
// Variants (entry ring_m<MT>_s<STAGES>): HB = 16 MT heads a CTA, STAGES ring slots of one 32-token
// tile (37376 bytes each), STAGES - 2 tiles in flight ahead of the two being computed. m1_s5: 16
// heads, 5 slots (214 KB of shared memory); m1_s4; m2_s4: 32 heads (so that at 128 heads 4 CTAs,
// not 8, read each tile through the L2), 4 slots (203 KB); m2_s3.
//
// Expected bound (estimate). 16 heads, B = 8, T = 32768: 302 MB, 70 us at the ~4.29 TB/s copy
// ceiling. Each SM must take one 36 KB tile every ~1.1 us (4.29 TB/s / 132 SMs = 32.5 KB/us);
// Little's law at ~1-1.5 us of DRAM latency under load wants 32-50 KB in flight an SM, and m1_s5
// keeps 3 tiles, 110 KB. The compute a tile an SM (272 mma.sync m16n8k16, ~450 cycles at ~0.6 mma
// a cycle) is about a quarter of that time, and each group's own chain (9-step k chains, two
// barriers, a 4-head softmax, 32 mma of P V; ~1100 cycles, ~0.6 us) overlaps the other group's.
// The grid (16 splits x 8 sequences = 128 CTAs, one an SM) leaves 4 of 132 SMs idle: expect 80-90% of
// copy. At B = 1, T = 32K (8.8 us of bytes) a launch and the ramp add ~3 us: ~65-75%. 128 heads,
// T = 32K: 9.1 GFLOP on mma.sync at ~60% of the 780 TFLOP/s bf16 rate is ~19 us, and four CTAs
// read every tile (151 MB through the L2): expect 20-30 us, 2-3x faster than 01 and than the
// cuBLAS chain.
//
// Size constraints: T a multiple of 64; H a multiple of HB; every CTA at least one tile;
// splits <= MAX_SPLITS; B * H / HB <= MAX_GROUPS; the grid within one wave of resident CTAs (one
// an SM; the launcher checks); launches must not overlap (the merge counters are global).
//
// Resources (nvcc 13.0, -arch=sm_90, --resource-usage, no spills; dynamic shared memory as the
// suite's ring_smem_bytes): m1_s4 and m1_s5 154 registers, 176320 and 213712 bytes; m2_s3 253 and
// m2_s4 254 registers, 165680 and 203072 bytes.
//
// Measured variant: m1_s5 h>=32:m2_s4 (16 heads a CTA below 32 heads, 32 from there on; the
// others are built for comparison)

constexpr int DQK = 576;              // latent 512 + rope 64
constexpr int DV = 512;               // the latent part, also the value
constexpr int PAGE = 64;              // tokens a page
constexpr int TT = 32;                // tokens a tile
constexpr int WPG = 4;                // warps a consumer group
constexpr int GROUPS = 2;             // consumer groups
constexpr int WARPS = WPG * GROUPS;
constexpr int THREADS = WARPS * 32;
constexpr int ROW = DQK + 8;          // padded smem row (elements): 1168 B
constexpr int CHUNKS = DQK / 8;       // 16-byte chunks a row: 72
constexpr int SROW = TT + 8;          // fp32 score row stride (words)
constexpr int PROW = TT + 8;          // bf16 probability row stride (elements)
constexpr int RSTRIDE = DV + 8;       // fp32 row stride of the end-of-CTA combine (conflict-free float2)
constexpr int KSTEPS = DQK / 16;      // 36
constexpr int KS = KSTEPS / WPG;      // k steps a warp: 9
constexpr int NB = DV / WPG / 8;      // n8 tiles of a warp's 128 output dims: 16
constexpr int MAX_SPLITS = 256;
constexpr int MAX_GROUPS = 4096;
constexpr int SLICE = 128;            // dims of one head a merger handles
constexpr int MERGE_THREADS = 256;    // threads that do the merge's arithmetic

static_assert(KSTEPS % WPG == 0, "the group's warps split k evenly");
static_assert(TT == 32, "the softmax puts a token on each lane");
static_assert(PAGE % TT == 0, "a tile never crosses a page");
static_assert(MERGE_THREADS == 4 * (SLICE / 2) && MERGE_THREADS <= THREADS, "the merge splits the splits four ways");

__device__ unsigned int ring_tickets[MAX_GROUPS] = {};
__device__ unsigned int ring_done[MAX_GROUPS] = {};

// Byte offsets of the dynamic shared memory (every part 16-byte aligned; the ring 128).
template <int MT, int STAGES>
struct Carve {
    static constexpr int HB = 16 * MT;
    static constexpr int Q = 0;                                   // [HB][ROW] bf16
    static constexpr int RING = Q + HB * ROW * 2;                 // [STAGES][TT][ROW] bf16
    static constexpr int S = RING + STAGES * TT * ROW * 2;        // [GROUPS][HB][SROW] fp32
    static constexpr int P = S + GROUPS * HB * SROW * 4;          // [GROUPS][HB][PROW] bf16
    static constexpr int ALPHA = P + GROUPS * HB * PROW * 2;      // [GROUPS][HB] fp32
    static constexpr int ML = ALPHA + GROUPS * HB * 4;            // [GROUPS][HB] float2
    static constexpr int BARS = ML + GROUPS * HB * 8;             // full[STAGES], empty[STAGES]
    static constexpr int BYTES = BARS + 2 * STAGES * 8;
    static_assert(STAGES > GROUPS, "a slot ahead of the tiles being computed");
    static_assert(RING % 128 == 0 && BARS % 8 == 0, "alignment");
    static_assert(HB * RSTRIDE * 4 <= STAGES * TT * ROW * 2, "the combine reuses the ring");
    static_assert((MAX_SPLITS + 4 * SLICE) * 4 <= STAGES * TT * ROW * 2, "the merge reuses the ring");
};

__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
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
// One contiguous global range into shared memory by the copy engine; completes on `bar`.
__device__ __forceinline__ void bulk_copy(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
__device__ __forceinline__ void named_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
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

// Tile at token `tok` into ring slot `s`, by the copy engine: lane 0 arms the slot's mbarrier with
// the tile's bytes, each lane copies one 1152-byte row into its padded 1168-byte smem row. The
// proxy fence orders the warp's earlier generic reads of the slot before the copy engine's writes.
__device__ __forceinline__ void fill_slot(unsigned short* sKV, unsigned bars, int s,
                                          const unsigned short* __restrict__ pool,
                                          const int* __restrict__ table_b, int tok, int lane) {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    if (lane == 0) mbar_expect_tx(bars + 8 * s, TT * DQK * 2);
    __syncwarp();
    const int page = __ldg(table_b + tok / PAGE);
    const unsigned short* src = pool + (static_cast<size_t>(page) * PAGE + tok % PAGE + lane) * DQK;
    bulk_copy(smem_addr(sKV + (s * TT + lane) * ROW), src, DQK * 2, bars + 8 * s);
}

// The weight of group `gi`'s state of head h against the CTA's common max (0 for a group that saw
// no tile), from the groups' (m, l) in sML.
__device__ __forceinline__ float group_weight(const float2* sML, int HB, int h, int gi, float& big) {
    big = sML[h].x;
#pragma unroll
    for (int k = 1; k < GROUPS; ++k) big = fmaxf(big, sML[k * HB + h].x);
    const float m = sML[gi * HB + h].x;
    return m == __int_as_float(0xff800000u) ? 0.0f : fast_exp2(m - big);
}

// The split merge, once every thread of the CTA has written its split's state (part_ml, part_acc
// rows row0 .. row0 + HB - 1): each CTA takes a ticket from its (batch, head block) counter; the last
// `mergers` to finish wait for every split, then each merges 128-dim slices of one head. `scratch`:
// (MAX_SPLITS + 4 SLICE) floats of shared memory the CTA no longer needs.
__device__ __forceinline__ void merge_splits(const float2* __restrict__ part_ml, const float* __restrict__ part_acc,
                                             unsigned short* __restrict__ out, size_t row0, int HB, int splits,
                                             unsigned* tickets, unsigned* done, float* scratch) {
    __shared__ unsigned int ticket;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __threadfence();
    __syncthreads();
    const int slices = HB * (DV / SLICE);
    const int mergers = min(splits, slices);
    if (threadIdx.x == 0) ticket = take_ticket(tickets);
    __syncthreads();
    const int first_merger = splits - mergers;
    if (static_cast<int>(ticket) < first_merger) return;

    // one of the last `mergers` CTAs: wait for every split, then merge slices j, j + mergers, ...
    if (threadIdx.x == 0) {
        while (load_acquire(tickets) < static_cast<unsigned>(splits)) {
        }
    }
    __syncthreads();
    float* wbuf = scratch;           // [MAX_SPLITS] weights of the slice's head
    float* red = wbuf + MAX_SPLITS;  // [4][SLICE] partial sums
    for (int sl = static_cast<int>(ticket) - first_merger; sl < slices; sl += mergers) {
        const int h = sl / (DV / SLICE), dbase = (sl % (DV / SLICE)) * SLICE;
        const size_t row = row0 + h;
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
        if (threadIdx.x < MERGE_THREADS) {
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
        }
        __syncthreads();
        if (threadIdx.x < SLICE / 2) {
            float2 v = make_float2(0.0f, 0.0f);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const float2 u = *reinterpret_cast<const float2*>(red + k * SLICE + 2 * threadIdx.x);
                v.x += u.x;
                v.y += u.y;
            }
            const unsigned packed = to_bf16(v.x) | (static_cast<unsigned>(to_bf16(v.y)) << 16);
            reinterpret_cast<unsigned*>(out + row * DV + dbase)[threadIdx.x] = packed;
        }
        __syncthreads();
    }
    // the last merger to finish puts both counters back to zero for the next launch
    if (threadIdx.x == 0) {
        __threadfence();
        if (take_ticket(done) == static_cast<unsigned>(mergers - 1)) {
            *tickets = 0;
            *done = 0;
            __threadfence();
        }
    }
}

// Grid (splits, H / HB, B); block THREADS; dynamic shared memory Carve<MT, STAGES>::BYTES.
// part_ml[(b * H + h) * splits + s] = (m, l); part_acc[((b * H + h) * splits + s) * DV + d].
template <int MT, int STAGES>
__device__ __forceinline__ void ring_body(const unsigned short* __restrict__ q,
                                          const unsigned short* __restrict__ pool,
                                          const int* __restrict__ table, float2* __restrict__ part_ml,
                                          float* __restrict__ part_acc, unsigned short* __restrict__ out,
                                          int H, int T, int tokens_per_split, float scale_log2) {
    using C = Carve<MT, STAGES>;
    constexpr int HB = C::HB;
    constexpr int HPW = HB / WPG;  // heads whose softmax a warp runs
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned short* sQ = reinterpret_cast<unsigned short*>(smem + C::Q);
    unsigned short* sKV = reinterpret_cast<unsigned short*>(smem + C::RING);
    float* sS = reinterpret_cast<float*>(smem + C::S);
    unsigned short* sP = reinterpret_cast<unsigned short*>(smem + C::P);
    float* sAlpha = reinterpret_cast<float*>(smem + C::ALPHA);
    float2* sML = reinterpret_cast<float2*>(smem + C::ML);
    const unsigned bars = smem_addr(smem + C::BARS);  // slot s: full at bars + 8 s, empty at bars + 8 (STAGES + s)

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

    // Q of the CTA's heads into padded rows, score tiles zeroed, barriers initialised
    {
        const uint4* qsrc = reinterpret_cast<const uint4*>(q + (static_cast<size_t>(b) * H + head0) * DQK);
        for (int idx = threadIdx.x; idx < HB * CHUNKS; idx += THREADS) {
            const int r = idx / CHUNKS, c = idx % CHUNKS;
            *reinterpret_cast<uint4*>(sQ + r * ROW + c * 8) = __ldg(qsrc + idx);
        }
        for (int idx = threadIdx.x; idx < GROUPS * HB * SROW; idx += THREADS) sS[idx] = 0.0f;
        if (threadIdx.x == 0) {
            for (int s = 0; s < STAGES; ++s) {
                mbar_init(bars + 8 * s, 1);             // full: warp 0's arrive, plus the bytes
                mbar_init(bars + 8 * (STAGES + s), WPG);  // empty: one arrive a warp of the group
            }
            asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        }
    }
    __syncthreads();

    const int gi = warp / WPG, r = warp % WPG;  // group and rank in the group
    float m_run[HPW], l_run[HPW];
    float acc[MT][NB][4];
#pragma unroll
    for (int j = 0; j < HPW; ++j) {
        m_run[j] = __int_as_float(0xff800000u);
        l_run[j] = 0.0f;
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int n = 0; n < NB; ++n) acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.0f;

    // the first STAGES tiles; after that, the group that finishes a slot refills it
    if (warp == 0)
        for (int i = 0; i < min(STAGES, tiles); ++i) fill_slot(sKV, bars, i % STAGES, pool, table_b, t_begin + i * TT, lane);
    {
        float* gS = sS + gi * HB * SROW;
        unsigned short* gP = sP + gi * HB * PROW;
        float* gA = sAlpha + gi * HB;
        // S: A = Q rows (lanes 0-15 rows 0-15 at k0, 16-31 at k0 + 8); B = two token octets
        // (lanes 0-7 octet o at k0, 8-15 octet o at k0 + 8, 16-23 octet o + 1 at k0, 24-31 at k0 + 8)
        const unsigned short* qa = sQ + (lane & 15) * ROW + (lane >> 4) * 8 + r * KS * 16;
        const int kb_off = ((lane >> 4) * 8 + (lane & 7)) * ROW + ((lane >> 3) & 1) * 8 + r * KS * 16;
        // P V: B = V[tokens][dims] (trans); lanes 0-7 tokens 0-7, 8-15 tokens 8-15 at dims n0, 16-31 at n0 + 8
        const int vb_off = ((lane & 7) + ((lane >> 3) & 1) * 8) * ROW + r * (DV / WPG) + (lane >> 4) * 8;

        for (int i = gi; i < tiles; i += GROUPS) {
            const int s = i % STAGES;
            mbar_wait(bars + 8 * s, (i / STAGES) & 1);
            const unsigned short* kv = sKV + s * TT * ROW;

            // this warp's quarter of k, every head, every token
            {
                float c[MT][4][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int o = 0; o < 4; ++o) c[mt][o][0] = c[mt][o][1] = c[mt][o][2] = c[mt][o][3] = 0.0f;
                const unsigned short* kb = kv + kb_off;
#pragma unroll
                for (int kk = 0; kk < KS; ++kk) {
                    unsigned a[MT][4];
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) ldsm_x4(a[mt], qa + mt * 16 * ROW + kk * 16);
#pragma unroll
                    for (int o = 0; o < 4; o += 2) {
                        unsigned bk[4];
                        ldsm_x4(bk, kb + o * 8 * ROW + kk * 16);
#pragma unroll
                        for (int mt = 0; mt < MT; ++mt) {
                            mma16816(c[mt][o], a[mt], bk[0], bk[1]);
                            mma16816(c[mt][o + 1], a[mt], bk[2], bk[3]);
                        }
                    }
                }
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int o = 0; o < 4; ++o) {
                        float* lo = gS + (mt * 16 + g) * SROW + o * 8 + 2 * tq;
                        float* hi = lo + 8 * SROW;
                        atomicAdd(lo, c[mt][o][0]);
                        atomicAdd(lo + 1, c[mt][o][1]);
                        atomicAdd(hi, c[mt][o][2]);
                        atomicAdd(hi + 1, c[mt][o][3]);
                    }
            }
            named_sync(1 + gi, WPG * 32);

            // online softmax of heads r + 4 j, a lane a token; the score tile is zeroed behind
#pragma unroll
            for (int j = 0; j < HPW; ++j) {
                const int h = r + WPG * j;
                float* sp = gS + h * SROW + lane;
                const float sv = *sp * scale_log2;
                *sp = 0.0f;
                float mx = sv;
#pragma unroll
                for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
                const float m_new = fmaxf(m_run[j], mx);
                const float alpha = fast_exp2(m_run[j] - m_new);  // 0 on the group's first tile
                const float p = fast_exp2(sv - m_new);
                float ps = p;
#pragma unroll
                for (int off = 16; off > 0; off >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, off);
                l_run[j] = l_run[j] * alpha + ps;
                m_run[j] = m_new;
                gP[h * PROW + lane] = to_bf16(p);
                if (lane == 0) gA[h] = alpha;
            }
            named_sync(1 + gi, WPG * 32);

            // O = O * alpha + P V over this warp's 128 dims
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                const float a_lo = gA[mt * 16 + g], a_hi = gA[mt * 16 + g + 8];
#pragma unroll
                for (int n = 0; n < NB; ++n) {
                    acc[mt][n][0] *= a_lo;
                    acc[mt][n][1] *= a_lo;
                    acc[mt][n][2] *= a_hi;
                    acc[mt][n][3] *= a_hi;
                }
            }
#pragma unroll
            for (int kk = 0; kk < TT / 16; ++kk) {
                unsigned pa[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
                    ldsm_x4(pa[mt], gP + (mt * 16 + (lane & 15)) * PROW + kk * 16 + (lane >> 4) * 8);
                const unsigned short* vb = kv + kk * 16 * ROW + vb_off;
#pragma unroll
                for (int n = 0; n < NB; n += 2) {
                    unsigned bv[4];
                    ldsm_x4_t(bv, vb + n * 8);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma16816(acc[mt][n], pa[mt], bv[0], bv[1]);
                        mma16816(acc[mt][n + 1], pa[mt], bv[2], bv[3]);
                    }
                }
            }
            // done with the slot: once all four warps are, warp 0 refills it with tile i + STAGES
            __syncwarp();
            if (lane == 0) mbar_arrive(bars + 8 * (STAGES + s));
            if (r == 0 && i + STAGES < tiles) {
                mbar_wait(bars + 8 * (STAGES + s), (i / STAGES) & 1);
                fill_slot(sKV, bars, s, pool, table_b, t_begin + (i + STAGES) * TT, lane);
            }
        }
        // the group's (m, l) of each head, from the warp that ran its softmax
#pragma unroll
        for (int j = 0; j < HPW; ++j)
            if (lane == 0) sML[gi * HB + r + WPG * j] = make_float2(m_run[j], l_run[j]);
    }
    __syncthreads();  // every tile consumed (so every copy landed): the ring is free

    // combine the two groups' accumulators in shared memory, rescaled to the common max
    float* comb = reinterpret_cast<float*>(sKV);  // [HB][RSTRIDE]
    for (int pass = 0; pass < GROUPS; ++pass) {
        if (gi == pass) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                float big;
                const float w_lo = group_weight(sML, HB, mt * 16 + g, gi, big);
                const float w_hi = group_weight(sML, HB, mt * 16 + g + 8, gi, big);
#pragma unroll
                for (int n = 0; n < NB; ++n) {
                    const int d = r * (DV / WPG) + n * 8 + 2 * tq;
                    float2* lo = reinterpret_cast<float2*>(comb + (mt * 16 + g) * RSTRIDE + d);
                    float2* hi = reinterpret_cast<float2*>(comb + (mt * 16 + g + 8) * RSTRIDE + d);
                    float2 vlo = make_float2(acc[mt][n][0] * w_lo, acc[mt][n][1] * w_lo);
                    float2 vhi = make_float2(acc[mt][n][2] * w_hi, acc[mt][n][3] * w_hi);
                    if (pass > 0) {
                        const float2 olo = *lo, ohi = *hi;
                        vlo.x += olo.x;
                        vlo.y += olo.y;
                        vhi.x += ohi.x;
                        vhi.y += ohi.y;
                    }
                    *lo = vlo;
                    *hi = vhi;
                }
            }
        }
        __syncthreads();
    }

    // publish this split's state
    {
        const size_t base = static_cast<size_t>(b) * H + head0;
        for (int idx = threadIdx.x; idx < HB * DV / 4; idx += THREADS) {
            const int h = idx / (DV / 4), d = (idx % (DV / 4)) * 4;
            const float4 v = *reinterpret_cast<const float4*>(comb + h * RSTRIDE + d);
            *reinterpret_cast<float4*>(part_acc + ((base + h) * splits + split) * DV + d) = v;
        }
        if (threadIdx.x < HB) {
            const int h = threadIdx.x;
            float big, l = 0.0f;
#pragma unroll
            for (int k = 0; k < GROUPS; ++k) l = fmaf(group_weight(sML, HB, h, k, big), sML[k * HB + h].y, l);
            part_ml[(base + h) * splits + split] = make_float2(big, l);
        }
    }
    merge_splits(part_ml, part_acc, out, static_cast<size_t>(b) * H + head0, HB, splits, &ring_tickets[group],
                 &ring_done[group], reinterpret_cast<float*>(sKV));
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
ring_m1_s4(const unsigned short* __restrict__ q, const unsigned short* __restrict__ pool,
           const int* __restrict__ table, float2* __restrict__ part_ml, float* __restrict__ part_acc,
           unsigned short* __restrict__ out, int H, int T, int tokens_per_split, float scale_log2) {
    ring_body<1, 4>(q, pool, table, part_ml, part_acc, out, H, T, tokens_per_split, scale_log2);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1)
ring_m1_s5(const unsigned short* __restrict__ q, const unsigned short* __restrict__ pool,
           const int* __restrict__ table, float2* __restrict__ part_ml, float* __restrict__ part_acc,
           unsigned short* __restrict__ out, int H, int T, int tokens_per_split, float scale_log2) {
    ring_body<1, 5>(q, pool, table, part_ml, part_acc, out, H, T, tokens_per_split, scale_log2);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1)
ring_m2_s3(const unsigned short* __restrict__ q, const unsigned short* __restrict__ pool,
           const int* __restrict__ table, float2* __restrict__ part_ml, float* __restrict__ part_acc,
           unsigned short* __restrict__ out, int H, int T, int tokens_per_split, float scale_log2) {
    ring_body<2, 3>(q, pool, table, part_ml, part_acc, out, H, T, tokens_per_split, scale_log2);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1)
ring_m2_s4(const unsigned short* __restrict__ q, const unsigned short* __restrict__ pool,
           const int* __restrict__ table, float2* __restrict__ part_ml, float* __restrict__ part_acc,
           unsigned short* __restrict__ out, int H, int T, int tokens_per_split, float scale_log2) {
    ring_body<2, 4>(q, pool, table, part_ml, part_acc, out, H, T, tokens_per_split, scale_log2);
}
