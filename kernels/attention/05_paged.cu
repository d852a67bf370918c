// 05 paged: 04's split-KV reading K and V through a block table of shuffled 16-token pages
//
// Idea against 04: a serving engine does not keep one contiguous K and V array per sequence; it
// hands out fixed-size pages from a pool as sequences grow, and a block table maps a sequence's
// logical page i to a physical page. Here the pool is [num_pages, Hkv, 16, D] (each page holds 16
// tokens of every KV head, one head's 16 rows contiguous: 4 KB), the table is [B, T / 16] int32,
// and the pages are handed out in a random order. The kernel is 04's with one change: a warp's 8
// tokens of an iteration lie in one page (8 divides 16), so the row address is
// pool + ((page * Hkv + hk) * 16 + t % 16) * D with page = table[b][t / 16]. So that this lookup
// is not a dependent global load in front of every K load, each CTA first copies its split's
// table entries (at most 4096 / 16 = 256 ints) into shared memory; q is read while that copy is
// in flight. The merge of the splits by the last CTA of each group is 04's, with its own counters.
//
// Expected bound (estimate), headline B = 1, 32 query / 8 KV heads, D = 128, T = 32768 on an
// H200: the same 134 MB (the 8 KB table is left out of the work model: 0.006%), 31.3 us at the
// ~4.29 TB/s copy ceiling measured on this card. A page run is 4 KB of one head, as contiguous as
// 04's rows at the granularity DRAM and the L2 care about (32-byte sectors, 128-byte lines), so
// the shuffled order should cost only the table copy (one more dependent load before the first K
// and V loads, ~1 us) and one shared load a warp iteration: expect 04's time plus about a
// microsecond at every context. The loop's lazy rescale and the CTA merge's weights are 04's.
//
// Size constraints: as 04 (D = 128, G = 4, T and tokens_per_split multiples of 64, splits <= 256,
// B * Hkv <= 4096, launches not overlapping), plus T a multiple of the 16-token page (implied),
// tokens_per_split <= 4096 (the shared table copy), and a block table whose entries are valid page
// indices of the pool; values finite.

constexpr int D = 128;
constexpr int G = 4;                                   // query heads per KV head
constexpr int WARPS = 8;
constexpr int THREADS = WARPS * 32;
constexpr int LANES_PER_TOKEN = D / 8;                 // one 16-byte chunk a lane
constexpr int TOKENS_PER_LOAD = 32 / LANES_PER_TOKEN;  // rows one warp-wide load covers
constexpr int UNROLL = 4;                              // K (and V) loads in flight a lane
constexpr int WARP_TOKENS = TOKENS_PER_LOAD * UNROLL;  // tokens a warp takes per iteration
constexpr int CTA_TOKENS = WARPS * WARP_TOKENS;        // T and tokens_per_split multiples of this
constexpr int STATES = WARPS * TOKENS_PER_LOAD;        // independent softmax states per CTA
constexpr int MAX_SPLITS = 256;                        // the launcher keeps splits <= this
constexpr int MAX_GROUPS = 4096;                       // the launcher keeps B * Hkv <= this
constexpr int MERGE_CHUNK = 32;                        // splits whose accumulators load at once
constexpr int PAGE = 16;                               // tokens per page
constexpr int MAX_SPLIT_TOKENS = 4096;                 // the launcher keeps tokens_per_split <= this
constexpr int MAX_SPLIT_PAGES = MAX_SPLIT_TOKENS / PAGE;
constexpr float RESCALE_SLACK = 8.0f;  // log2 units a score may exceed m before m moves

static_assert(D == 128 && LANES_PER_TOKEN == 16,
              "a half-warp holds one 256-byte row; the xor shuffles 8, 4, 2, 1 stay inside it");
static_assert(G * D == 2 * THREADS, "the last CTA's merge gives each thread two adjacent outputs");
static_assert(2 * WARPS == 4 * G, "two warps a query head compute the merge weights");
static_assert(STATES == 16 && STATES * G == 64,
              "the CTA merge: a head's 16 states are 16 adjacent lanes of warps 0 and 1");
static_assert(CTA_TOKENS == 64, "the launcher checks T % 64 == 0 and tokens_per_split % 64 == 0");
static_assert(MAX_SPLITS % 32 == 0, "each lane of a weight warp holds MAX_SPLITS / 32 (m, l) pairs");
static_assert(PAGE % WARP_TOKENS == 0, "a warp's 8 tokens of one iteration never straddle two pages");
static_assert(CTA_TOKENS % PAGE == 0, "a split starts on a page boundary");
static_assert((STATES * G * (D + 2) + G * MAX_SPLITS + MAX_SPLIT_PAGES) * 4 <= 40 * 1024,
              "the shared scratch stays under the 48 KB static limit");

// One ticket counter per (b, hk) group; zero at module load and put back to zero by the last CTA.
__device__ unsigned int paged_tickets[MAX_GROUPS] = {};

__device__ __forceinline__ float fast_exp2(float x) {  // exp2(-inf) = 0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ unsigned short to_bf16(float x) {
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
    return r;
}

// 8 bf16 values (one 16-byte chunk, first value in the low half of .x) widened to fp32.
__device__ __forceinline__ void widen(const uint4& w, float (&f)[8]) {
    const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = __uint_as_float(words[i] << 16);
        f[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
}

// The lane's chunks of the UNROLL rows a half-warp takes in the warp iteration starting at token t;
// the 8 tokens lie in one page, `page`, of the pool.
__device__ __forceinline__ void load_rows(uint4 (&r)[UNROLL], const unsigned short* pool, int page,
                                          int kv_heads, int hk, int t, int c, int half) {
    const size_t base = ((static_cast<size_t>(page) * kv_heads + hk) * PAGE + t % PAGE) * D + c * 8;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        const size_t row = base + (u * TOKENS_PER_LOAD + half) * D;
        r[u] = __ldg(reinterpret_cast<const uint4*>(pool + row));
    }
}

// Adds one to a ticket counter with acquire-release semantics at GPU scope; returns the old value.
__device__ __forceinline__ unsigned take_ticket(unsigned* counter) {
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n"
                 : "=r"(old)
                 : "l"(counter)
                 : "memory");
    return old;
}

// The merge of one group's splits, run by the CTA that drew the last ticket (all its threads).
// Out of line, so that the compiler allocates its registers apart from the main loop's: inlined,
// the main loop of 05 spilled.
__device__ __noinline__ void merge_splits(const float* __restrict__ part_m,
                                          const float* __restrict__ part_l,
                                          const float* __restrict__ part_acc,
                                          unsigned short* __restrict__ out,
                                          float (*weight)[MAX_SPLITS], int q_row, int splits) {
    // Thread (h, d2) owns dimensions 2 d2 and 2 d2 + 1 of query head h. Its accumulator loads (up
    // to MERGE_CHUNK splits) go out first, before the weights are known, so they, the (m, l) loads
    // and the weight arithmetic share one L2 round trip. The partials were written by other CTAs
    // during this launch: __ldcg reads them from the L2, never from L1.
    const int h = threadIdx.x / (D / 2), d2 = threadIdx.x % (D / 2);
    const float2* acc_src =
        reinterpret_cast<const float2*>(part_acc + static_cast<size_t>(q_row + h) * splits * D) + d2;
    float2 a[MERGE_CHUNK];
#pragma unroll
    for (int i = 0; i < MERGE_CHUNK; ++i) {
        if (i < splits) a[i] = __ldcg(acc_src + static_cast<size_t>(i) * (D / 2));
    }

    // Weights 2^(m_i - M) / L of every split; warps 2h and 2h + 1 both reduce head h, the first
    // of them stores the weights.
    {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wh = warp / 2;
        const float* pm = part_m + static_cast<size_t>(q_row + wh) * splits;
        const float* pl = part_l + static_cast<size_t>(q_row + wh) * splits;
        float wm[MAX_SPLITS / 32], wl[MAX_SPLITS / 32];
        float big = __int_as_float(0xff800000u);
#pragma unroll
        for (int r = 0; r < MAX_SPLITS / 32; ++r) {
            const int i = lane + 32 * r;
            wm[r] = i < splits ? __ldcg(pm + i) : __int_as_float(0xff800000u);
            wl[r] = i < splits ? __ldcg(pl + i) : 0.0f;
            big = fmaxf(big, wm[r]);
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) big = fmaxf(big, __shfl_xor_sync(0xffffffffu, big, off));
        float sum = 0.0f;
#pragma unroll
        for (int r = 0; r < MAX_SPLITS / 32; ++r) {
            wm[r] = fast_exp2(wm[r] - big);  // 0 for the padding (m = -inf)
            sum = fmaf(wm[r], wl[r], sum);
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        const float inv = 1.0f / sum;
        if (warp % 2 == 0) {
#pragma unroll
            for (int r = 0; r < MAX_SPLITS / 32; ++r) {
                if (lane + 32 * r < splits) weight[wh][lane + 32 * r] = wm[r] * inv;
            }
        }
    }
    __syncthreads();

    float2 val = make_float2(0.0f, 0.0f);
    for (int base = 0; base < splits; base += MERGE_CHUNK) {
        if (base > 0) {  // more than MERGE_CHUNK splits (contexts over 32 K tokens)
#pragma unroll
            for (int i = 0; i < MERGE_CHUNK; ++i) {
                if (base + i < splits) {
                    a[i] = __ldcg(acc_src + static_cast<size_t>(base + i) * (D / 2));
                }
            }
        }
#pragma unroll
        for (int i = 0; i < MERGE_CHUNK; ++i) {
            if (base + i < splits) {
                const float w = weight[h][base + i];
                val.x = fmaf(w, a[i].x, val.x);
                val.y = fmaf(w, a[i].y, val.y);
            }
        }
    }
    const unsigned packed = to_bf16(val.x) | (static_cast<unsigned>(to_bf16(val.y)) << 16);
    reinterpret_cast<unsigned*>(out + static_cast<size_t>(q_row + h) * D)[d2] = packed;
}

// Grid (splits, Hkv, B). Partial state p = (b * Hq + query head) * splits + split.
// k_pool, v_pool: [num_pages, Hkv, PAGE, D]; table: [B, T / PAGE] physical page indices.
extern "C" __global__ void __launch_bounds__(THREADS, 2)
paged(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k_pool,
      const unsigned short* __restrict__ v_pool, const int* __restrict__ table,
      float* __restrict__ part_m, float* __restrict__ part_l, float* __restrict__ part_acc,
      unsigned short* __restrict__ out, int T, int tokens_per_split, float scale_log2) {
    __shared__ float red_m[STATES][G];
    __shared__ float red_l[STATES][G];
    __shared__ __align__(16) float red_acc[STATES][G][D];
    __shared__ float red_w[STATES][G];
    __shared__ float cta_m[G], cta_l[G];
    __shared__ float weight[G][MAX_SPLITS];
    __shared__ unsigned int ticket;
    __shared__ int pages[MAX_SPLIT_PAGES];

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int half = lane / LANES_PER_TOKEN, c = lane % LANES_PER_TOKEN;
    const int split = blockIdx.x, splits = gridDim.x;
    const int hk = blockIdx.y, kv_heads = gridDim.y, b = blockIdx.z;
    const int group = b * kv_heads + hk;
    const int q_row = group * G;  // b * Hq + the first of the G query heads of this KV head
    const int t_begin = split * tokens_per_split;
    const int t_end = min(T, t_begin + tokens_per_split);
    const int first_page = t_begin / PAGE;
    const int* seq_table = table + static_cast<size_t>(b) * (T / PAGE);
    for (int i = threadIdx.x; i < (t_end - t_begin) / PAGE; i += THREADS) {
        pages[i] = seq_table[first_page + i];
    }

    // q is read while the table copy is in flight.
    float qf[G][8];
#pragma unroll
    for (int h = 0; h < G; ++h) {
        widen(*reinterpret_cast<const uint4*>(q + (q_row + h) * D + c * 8), qf[h]);
#pragma unroll
        for (int j = 0; j < 8; ++j) qf[h][j] *= scale_log2;
    }
    __syncthreads();

    // The range is a non-empty multiple of CTA_TOKENS, so every warp has at least one iteration.
    int t = t_begin + warp * WARP_TOKENS;
    uint4 kr[UNROLL], vr[UNROLL];
    int page = pages[t / PAGE - first_page];
    load_rows(kr, k_pool, page, kv_heads, hk, t, c, half);
    load_rows(vr, v_pool, page, kv_heads, hk, t, c, half);

    // Softmax state: a lane tracks m and l of one head, own_head = c % 4 (the same in every lane
    // of its half that shares c % 4); the accumulators cover all G heads for the lane's chunk.
    float m = __int_as_float(0xff800000u), l = 0.0f, acc[G][8];
#pragma unroll
    for (int h = 0; h < G; ++h) {
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[h][j] = 0.0f;
    }
    const int half_base = half * LANES_PER_TOKEN;  // lane 0 of this half-warp

    while (true) {
        float s[UNROLL * G];  // partial dot products over this lane's 8 dims, index u * G + h
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            float kf[8];
            widen(kr[u], kf);
#pragma unroll
            for (int h = 0; h < G; ++h) {
                float dot = 0.0f;
#pragma unroll
                for (int j = 0; j < 8; ++j) dot = fmaf(qf[h][j], kf[j], dot);
                s[u * G + h] = dot;
            }
        }
        // kr is free: the next iteration's K loads fly during this one's softmax and P V.
        const int t_next = t + CTA_TOKENS;
        const bool more = t_next < t_end;
        if (more) {
            page = pages[t_next / PAGE - first_page];
            load_rows(kr, k_pool, page, kv_heads, hk, t_next, c, half);
        }

        // Transposing reduction over the half-warp: at each xor step a lane keeps half of its
        // values and sends the other half, so 16 sums take 8 + 4 + 2 + 1 = 15 shuffles, not 64.
        // Lane c ends with the whole score of token u = c / 4 for head c % 4.
        float r8[8], r4[4], r2[2];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const bool hi = c & 8;
            r8[i] = (hi ? s[i + 8] : s[i]) + __shfl_xor_sync(0xffffffffu, hi ? s[i] : s[i + 8], 8);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const bool hi = c & 4;
            r4[i] = (hi ? r8[i + 4] : r8[i]) + __shfl_xor_sync(0xffffffffu, hi ? r8[i] : r8[i + 4], 4);
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const bool hi = c & 2;
            r2[i] = (hi ? r4[i + 2] : r4[i]) + __shfl_xor_sync(0xffffffffu, hi ? r4[i] : r4[i + 2], 2);
        }
        const bool odd = c & 1;
        const float score = (odd ? r2[1] : r2[0]) + __shfl_xor_sync(0xffffffffu, odd ? r2[0] : r2[1], 1);

        // Online softmax of head c % 4 over its 4 new tokens (lanes c, c ^ 4, c ^ 8, c ^ 12). The
        // reference m need not be the running maximum, only close to it: it moves (and l and acc
        // are rescaled) when a new score in the warp would exceed it by more than RESCALE_SLACK,
        // so p stays at most 2^8 and, once m has settled, most iterations skip the 32 multiplies
        // and 4 shuffles of the rescale. The vote keeps the branch uniform across the warp.
        float mx = fmaxf(score, __shfl_xor_sync(0xffffffffu, score, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
        if (__any_sync(0xffffffffu, mx > m + RESCALE_SLACK)) {  // always on the first iteration
            const float m_new = fmaxf(m, mx);
            const float alpha = fast_exp2(m - m_new);  // 0 on the first iteration (m = -inf)
            l *= alpha;
            m = m_new;
#pragma unroll
            for (int h = 0; h < G; ++h) {
                const float a = __shfl_sync(0xffffffffu, alpha, half_base + h);
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[h][j] *= a;
            }
        }
        const float p = fast_exp2(score - m);
        float psum = p + __shfl_xor_sync(0xffffffffu, p, 4);
        psum += __shfl_xor_sync(0xffffffffu, psum, 8);
        l += psum;

        // P V: every lane needs all 16 probabilities of its half.
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            float vf[8];
            widen(vr[u], vf);
#pragma unroll
            for (int h = 0; h < G; ++h) {
                const float pu = __shfl_sync(0xffffffffu, p, half_base + u * G + h);
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[h][j] = fmaf(pu, vf[j], acc[h][j]);
            }
        }
        if (!more) break;
        load_rows(vr, v_pool, page, kv_heads, hk, t_next, c, half);
        t = t_next;
    }

    // Merge the CTA's 16 half-warp states; keep the result unnormalised for the split merge.
    const int state = warp * TOKENS_PER_LOAD + half;
    if (c < G) {  // lane c holds head c's state (c % 4 == c)
        red_m[state][c] = m;
        red_l[state][c] = l;
    }
#pragma unroll
    for (int h = 0; h < G; ++h) {
        float4* dst = reinterpret_cast<float4*>(&red_acc[state][h][c * 8]);
        dst[0] = make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
        dst[1] = make_float4(acc[h][4], acc[h][5], acc[h][6], acc[h][7]);
    }
    __syncthreads();
    // The 64 weights w = 2^(m_st - M_h), M_h the largest m of head h over the 16 states, are
    // computed once, by threads 0-63 (one (state, head) pair each; a head's 16 states are 16
    // adjacent lanes, so the max and the sum L_h = sum w l are xor shuffles inside them), rather
    // than by every thread for every output it merges: 64 exp2 a CTA instead of 8192.
    if (threadIdx.x < STATES * G) {
        const int st = threadIdx.x % STATES, h = threadIdx.x / STATES;
        const float ms = red_m[st][h];
        float big = ms;
#pragma unroll
        for (int off = STATES / 2; off > 0; off >>= 1) {
            big = fmaxf(big, __shfl_xor_sync(0xffffffffu, big, off));
        }
        const float w = fast_exp2(ms - big);
        float sum = w * red_l[st][h];
#pragma unroll
        for (int off = STATES / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        red_w[st][h] = w;
        if (st == 0) {
            cta_m[h] = big;
            cta_l[h] = sum;
        }
    }
    __syncthreads();
    {  // thread (h, d2) merges dimensions 2 d2 and 2 d2 + 1 of head h: 16 weighted float2 sums
        const int h = threadIdx.x / (D / 2), d2 = threadIdx.x % (D / 2);
        float2 val = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int st = 0; st < STATES; ++st) {
            const float w = red_w[st][h];
            const float2 a = *reinterpret_cast<const float2*>(&red_acc[st][h][2 * d2]);
            val.x = fmaf(w, a.x, val.x);
            val.y = fmaf(w, a.y, val.y);
        }
        const size_t p = static_cast<size_t>(q_row + h) * splits + split;
        if (d2 == 0) {
            part_m[p] = cta_m[h];
            part_l[p] = cta_l[h];
        }
        reinterpret_cast<float2*>(part_acc + p * D)[d2] = val;
    }

    // Publish the partials and take a ticket in one step: after the barrier, thread 0's
    // acquire-release add orders every thread's partial stores before the ticket (and, in the CTA
    // that draws the last ticket, every other CTA's stores before the reads below).
    __syncthreads();
    if (threadIdx.x == 0) ticket = take_ticket(&paged_tickets[group]);
    __syncthreads();
    if (ticket != static_cast<unsigned>(splits - 1)) return;

    merge_splits(part_m, part_l, part_acc, out, weight, q_row, splits);
    if (threadIdx.x == 0) paged_tickets[group] = 0;  // ready for the next launch
}
