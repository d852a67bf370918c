// 09 FP8 E4M3 streamed by the copy engine: whole row pairs into a deep ring, the diagonal of an mma
//
// Idea against 03: 03 is one wave of 1792 two-warp blocks, 14 warps an SM, each lane copying 16
// bytes at a time into a 4-deep per-warp ring; it ends within a few percent of a plain read of the
// same bytes, and its warps end in the order they started. Here one CTA an SM stays resident for
// the whole launch, owns an equal share of the rows (N / grid, to one row), and the copy engine
// moves the bytes:
// - Batch 1: a ring slot is two adjacent rows, all of K: 2K contiguous bytes (16 KB at K = 8192),
//   so one cp.async.bulk fills it, issued by one lane of a producer warp and completing on the
//   slot's mbarrier. Bulk copies of 0.5-2 KB, one a row of a 16-row tile, were timed first: the
//   smaller the copy the slower the stream (a fixed cost a copy), which is what picked the
//   two-row slot. The ring is 192 KB: 12 slots at K = 8192, up to 11 of them in flight an SM.
// - Two rows are not an mma tile of 16, so the mma is used along its diagonal. m16n8k16 computes
//   D[m][n] = sum_k A[m][k] B[k][n]; with A row m = g (g = 0..7) holding segment g of row 0 and
//   A row 8 + g the same segment of row 1, and B column n = g holding segment g of x, D[g][g] and
//   D[8 + g][g] are the two rows' dot products over segment g, and the off-diagonal 56 of each 64
//   are discarded. The segments interleave at 64 bytes: of each 512 values of K, segment g is
//   values 64g .. 64g + 63, so lane (g, t) reads 16 contiguous bytes of each row (a word a k16
//   step, as in 03) and the warp's 32 loads are 512 contiguous bytes: no bank conflict. The mma
//   does 8 multiply-adds a weight where one is used: at 4.5 TB/s that is ~72 TFLOP/s (estimate),
//   a small part of what mma.sync issues on this card.
// - Twelve consumer warps; slot s belongs to warp s mod 12 for the whole launch (the slot count
//   is a multiple of 12). The warp runs all of K for the slot's two rows, sums the diagonal with
//   shuffles, scales and stores two values of y. Each of its lanes fences the async proxy
//   (fence.proxy.async: its reads are generic-proxy accesses, the refill an async-proxy write) and
//   arrives on the slot's "empty" mbarrier; the producer waits on it and fences again before the
//   copy. No CTA-wide barrier in the loop; the warps never wait on each other.
// - x is converted to fp16 once per CTA into shared memory (16 KB), every lane reading its own
//   column's 16 values a step: the conversion (three operations a pair in 03) leaves the loop.
// - Batch 4 and 16: the batch fills the mma's columns, so the diagonal would waste them; a slot is
//   a 16-row tile over 2048 values of K (16 bulk copies of 2 KB, rows padded to 2112 bytes so the
//   lanes of rows g and g + 1 fall in different banks), 5 slots, 8 consumer warps each over a
//   256-value slice of every slot, their sums added in shared memory at the end of each tile.
//
// Expected bound: at batch 1, K = 8192, N = 28672 the work model counts 234.9 MB of weights +
// 0.1 MB of row scales + x + y = 0.235 GB: 52 us at the ~4.5 TB/s read ceiling (estimate). A plain
// read of the same 235 MB (the read ceiling's own sum kernel, a block per 16 KB) ran well under the
// 2 GiB ceiling in a scratch run, and 03 a few points under that: launch, ramp and drain of a
// ~60 us kernel. Estimate 84-88% of read (~59-61 us): all SMs start streaming at once with ~190 KB in
// flight (Little's law at ~1.5 us under load asks ~50 KB), the rows end balanced to one row an
// SM, and the loop has no conversion of x. Conversion of the weights: one cvt for 2 weights, an
// estimated 28 us of the convert pipe (see 03), across 12 warps an SM that are mostly waiting.
// At K = 4096, N = 14336 (~60 MB, 13 us of bytes) fixed costs weigh 4x: 60-70%. Batch 16: every
// CTA reads x through L1, 16 rows a warp-step instead of one: 45-55%.
//
// Size constraints: K a multiple of 512 (batch 1; 2048 at batch 4 and 16); at batch 1 a slot of
// two rows for each of the 12 consumer warps in the 192 KB ring, so K <= 8192 (the launcher checks);
// N >= 2 x grid at batch 1 and N >= 16 x grid at batch 4 and 16; batch 1, 4 or 16; every tensor
// 16-byte aligned; |x| <= 65504 (x goes through fp16, as in 03); one CTA an SM (the launcher
// sizes the grid by the SM count).
//
// Resources (nvcc 13.0, -arch=sm_90a, --resource-usage, no spills): bulk_fp8_e4m3_b1 69 registers,
// _b4 114, _b16 146; no static shared memory. Dynamic: batch 1, min(32, PAIR_RING / 2K) slots
// rounded down to a multiple of 12, of 2K bytes each, + 2K bytes of x + 16 bytes of barriers a
// slot (213,184 at K = 8192: 12 slots; 205,184 at K = 4096: 24); batch 4 and 16, 5 x 16 x 2112 bytes + 80 of barriers + 2 x 8 x 16 x batch x 4
// of sums (173,136 and 185,424).

#include <cuda_fp8.h>

// Geometry (the suite reads these three lines; a scratch comparison may override them with -D)
#ifndef PAIR_WARPS
#define PAIR_WARPS 12  // consumer warps at batch 1, plus one producer warp
#endif
#ifndef PAIR_RING
#define PAIR_RING 196608  // bytes of ring at batch 1: slots of two rows of K (see gemv_pairs)
#endif
#ifndef TILE_WARPS
#define TILE_WARPS 8  // consumer warps at batch 4 and 16, plus one producer warp
#endif

constexpr int MAX_SLOTS = 32;  // barrier pairs reserved at batch 1
constexpr int TILE_K = 2048;   // values of K a slot at batch 4 and 16
constexpr int TILE_SLOTS = 5;  // ring slots at batch 4 and 16
constexpr int PITCH = 2112;   // padded row of a batch-4/16 slot: rows g and g + 1 64 bytes apart mod 128
constexpr int PAIR_THREADS = (PAIR_WARPS + 1) * 32;
constexpr int TILE_THREADS = (TILE_WARPS + 1) * 32;
constexpr int SEGMENT_SPAN = 512;   // values of K that one k16 step of each of the 8 segments covers x 4

static_assert(PAIR_RING % 1024 == 0 && PAIR_WARPS >= 1 && PAIR_WARPS <= MAX_SLOTS && TILE_WARPS >= 1,
              "a ring slot or more a consumer warp, and barrier space for them");
static_assert(TILE_K / TILE_WARPS % 64 == 0, "a batch-4/16 warp takes whole 64-byte spans of a row");
static_assert(PITCH == TILE_K + 64, "64 bytes of padding a row");

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done = 0;
    do {
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}
// Orders shared-memory accesses of the generic proxy (the consumers' ld.shared of a slot) before the
// async proxy's (the copy engine's refill). Every consumer lane fences after its reads and arrives on
// the slot's "empty" mbarrier itself; the producer fences again after its wait. With one fenceless
// arrive a warp after __syncwarp, compute-sanitizer's racecheck reported every refill as a race.
__device__ __forceinline__ void proxy_fence() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// One contiguous global range into shared memory by the copy engine; completes on `bar`.
__device__ __forceinline__ void bulk_copy(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
__device__ __forceinline__ void named_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
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
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z),
                 "r"(v.w)
                 : "memory");
}

// m16n8k16, fp16 in, fp32 accumulate; register roles as 01's bf16 mma.
__device__ __forceinline__ void mma_f16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                        unsigned a3, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Bytes 2h and 2h + 1 of a word (two E4M3 weights, the lower address first) as an fp16 pair.
__device__ __forceinline__ unsigned e4m3_pair(unsigned word, int h) {
    const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(
        static_cast<__nv_fp8x2_storage_t>(word >> (16 * h)), __NV_E4M3);
    return static_cast<unsigned>(r.x) | (static_cast<unsigned>(r.y) << 16);
}

// A bf16 pair as an fp16 pair (exact inside fp16's normal range).
__device__ __forceinline__ unsigned bf16x2_to_f16x2(unsigned word) {
    const float lo = __uint_as_float(word << 16);
    const float hi = __uint_as_float(word & 0xFFFF0000u);
    unsigned out;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(out) : "f"(hi), "f"(lo));
    return out;
}

__device__ __forceinline__ unsigned short to_bf16(float v) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}

// This CTA's rows: an equal share of N, to one row.
__device__ __forceinline__ void my_rows(int n, int& r0, int& r1) {
    r0 = static_cast<int>(static_cast<long long>(blockIdx.x) * n / gridDim.x);
    r1 = static_cast<int>(static_cast<long long>(blockIdx.x + 1) * n / gridDim.x);
}

// Batch 1. Dynamic shared memory: `slots` slots of 2K bytes, min(MAX_SLOTS, PAIR_RING / 2K) rounded
// down to a multiple of PAIR_WARPS, then x as fp16 (2K bytes: the first 8 values of every 16 in one
// half, the last 8 in the other, so that a warp's 16-byte loads of either half are 512 contiguous
// bytes), then full[slots] and empty[slots].
// Slot s belongs to warp s mod PAIR_WARPS for the whole launch, so a warp waits on a slot's fills
// in order and the phase parity it waits for is never ambiguous. (With slots not a multiple of the
// warps, a warp could wait for fill f of a slot whose fill f - 1, another warp's, had not landed:
// mbarrier.try_wait.parity then reads the parity of fill f - 2's completed phase and returns at
// once. 16 warps on 12 slots failed so in a scratch run.)
__device__ __forceinline__ void gemv_pairs(const unsigned short* __restrict__ x,
                                           const unsigned char* __restrict__ w8,
                                           const float* __restrict__ scale,
                                           unsigned short* __restrict__ y, int k, int n) {
    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned base = smem_addr(smem);
    const unsigned slot_bytes = 2 * k;
    const int slots = min(MAX_SLOTS, PAIR_RING / (2 * k)) / PAIR_WARPS * PAIR_WARPS;  // >= PAIR_WARPS
    const unsigned xs = base + slots * slot_bytes;
    const unsigned full0 = xs + 2 * k, empty0 = full0 + 8 * slots;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int r0, r1;
    my_rows(n, r0, r1);
    const int pairs = (r1 - r0 + 1) / 2;

    if (threadIdx.x == 0) {
        for (int s = 0; s < slots; ++s) {
            mbar_init(full0 + 8 * s, 1);   // the producer's arrive, plus the bytes
            mbar_init(empty0 + 8 * s, 32);  // every lane of the owning warp, after its reads
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (warp == PAIR_WARPS) {  // the producer: lane 0 copies rows r, r + 1 into slot j mod slots
        if (lane == 0) {
            int slot = 0;
            unsigned phase = 0;
            for (int j = 0; j < pairs; ++j) {
                const int r = r0 + 2 * j;
                const unsigned bytes = static_cast<unsigned>(min(2, r1 - r)) * k;
                if (j >= slots) {
                    mbar_wait(empty0 + 8 * slot, phase ^ 1);
                    proxy_fence();  // the warp's reads of the slot, acquired by the wait, before the copy
                }
                mbar_expect_tx(full0 + 8 * slot, bytes);
                bulk_copy(base + slot * slot_bytes, w8 + static_cast<size_t>(r) * k, bytes, full0 + 8 * slot);
                if (++slot == slots) {
                    slot = 0;
                    phase ^= 1;
                }
            }
        }
        return;
    }

    // x to fp16 in shared memory, once: vector v of 8 values is half v % 2 of 16-value piece v / 2
    const uint4* x4 = reinterpret_cast<const uint4*>(x);
    for (int v = threadIdx.x; v < k / 8; v += PAIR_WARPS * 32) {
        const uint4 a = __ldg(x4 + v);
        store_shared(xs + (v & 1) * k + 16 * (v >> 1),
                     make_uint4(bf16x2_to_f16x2(a.x), bf16x2_to_f16x2(a.y), bf16x2_to_f16x2(a.z),
                                bf16x2_to_f16x2(a.w)));
    }
    named_sync(1, PAIR_WARPS * 32);

    const int g = lane >> 2, t = lane & 3;
    // lane (g, t) reads bytes 64g + 16t .. + 15 of each 512 of both rows, and the same 16 values of x
    const unsigned lane_w = 16 * lane, lane_x = xs + 16 * lane;
    // pair j is warp j mod PAIR_WARPS's; it waits for fill number j / slots of slot j mod slots,
    // a slot of this warp's since slots is a multiple of PAIR_WARPS
    int j = warp;
    int slot = warp % slots;
    unsigned phase = (warp / slots) & 1;
#pragma unroll 1
    for (; j < pairs; j += PAIR_WARPS) {
        const unsigned row0 = base + slot * slot_bytes + lane_w, row1 = row0 + k;
        // four sums (one a word of the lane's 16 bytes), so consecutive mmas do not wait on each other
        float acc[4][4] = {};
        mbar_wait(full0 + 8 * slot, phase);
#pragma unroll 2
        for (int c = 0; c < k; c += SEGMENT_SPAN) {
            const uint4 a = load_shared(row0 + c);
            const uint4 b = load_shared(row1 + c);
            const uint4 x0 = load_shared(lane_x + c / 16 * 16);      // values 16p .. 16p + 7
            const uint4 x1 = load_shared(lane_x + k + c / 16 * 16);  // values 16p + 8 .. 16p + 15
            const unsigned aw[4] = {a.x, a.y, a.z, a.w};
            const unsigned bw[4] = {b.x, b.y, b.z, b.w};
            const unsigned xw[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)  // word i: values 4i .. 4i + 3 of the lane's 16, one k16 step
                mma_f16(acc[i], e4m3_pair(aw[i], 0), e4m3_pair(bw[i], 0), e4m3_pair(aw[i], 1),
                        e4m3_pair(bw[i], 1), xw[2 * i], xw[2 * i + 1]);
        }
        // each lane orders its own reads of the slot before the refill (async proxy), then releases it
        proxy_fence();
        mbar_arrive(empty0 + 8 * slot);
        // D[g][g] (row 0) and D[8 + g][g] (row 1) sit in lane (g, g / 2), elements g % 2 and 2 + g % 2
        const bool diagonal = t == (g >> 1);
        const int e = g & 1;
        float d0 = 0.0f, d1 = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            d0 += e ? acc[i][1] : acc[i][0];
            d1 += e ? acc[i][3] : acc[i][2];
        }
        d0 = diagonal ? d0 : 0.0f;
        d1 = diagonal ? d1 : 0.0f;
#pragma unroll
        for (int m = 16; m >= 1; m >>= 1) {
            d0 += __shfl_xor_sync(0xffffffffu, d0, m);
            d1 += __shfl_xor_sync(0xffffffffu, d1, m);
        }
        const int r = r0 + 2 * j;
        if (lane == 0) y[r] = to_bf16(__ldg(scale + r) * d0);
        if (lane == 1 && r + 1 < r1) y[r + 1] = to_bf16(__ldg(scale + r + 1) * d1);
        slot += PAIR_WARPS;
        while (slot >= slots) {
            slot -= slots;
            phase ^= 1;
        }
    }
}

// Batch 4 and 16. Dynamic shared memory: TILE_SLOTS slots of 16 rows x PITCH bytes, full and empty
// barriers, then the warps' sums of two tiles. A slot is 16 rows of this CTA x TILE_K values.
template <int BATCH>
__device__ __forceinline__ void gemv_tiles(const unsigned short* __restrict__ x,
                                           const unsigned char* __restrict__ w8,
                                           const float* __restrict__ scale,
                                           unsigned short* __restrict__ y, int k, int n) {
    static_assert(BATCH >= 2 && BATCH <= 16, "one or two n8 tiles of batch columns");
    constexpr int NT = (BATCH + 7) / 8;
    constexpr int C = TILE_WARPS;
    constexpr int KW = TILE_K / C;  // bytes of each row a warp takes from a slot
    constexpr int PW = KW / 64;     // 16-byte pieces of each of its 2 rows a lane reads
    constexpr int SLOT = 16 * PITCH;
    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned base = smem_addr(smem);
    const unsigned full0 = base + TILE_SLOTS * SLOT, empty0 = full0 + 8 * TILE_SLOTS;
    float* red = reinterpret_cast<float*>(smem + TILE_SLOTS * SLOT + 16 * TILE_SLOTS);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int r0, r1;
    my_rows(n, r0, r1);
    const int tiles = (r1 - r0 + 15) / 16;
    const int chunks = k / TILE_K;

    if (threadIdx.x == 0) {
        for (int s = 0; s < TILE_SLOTS; ++s) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, C * 32);  // every consumer lane reads every slot
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (warp == C) {  // the producer: lane i copies row i of each 16-row tile's next TILE_K values
        int slot = 0;
        unsigned phase = 0;
        int j = 0;
        for (int tile = 0; tile < tiles; ++tile) {
            const int rt = r0 + 16 * tile;
            const int valid = min(16, r1 - rt);
            const unsigned char* src = w8 + static_cast<size_t>(rt + lane) * k;
            for (int c = 0; c < chunks; ++c, ++j) {
                if (j >= TILE_SLOTS) {
                    mbar_wait(empty0 + 8 * slot, phase ^ 1);
                    proxy_fence();  // the warps' reads of the slot, acquired by the wait, before the copies
                }
                if (lane == 0) mbar_expect_tx(full0 + 8 * slot, valid * TILE_K);
                __syncwarp();
                if (lane < valid)
                    bulk_copy(base + slot * SLOT + lane * PITCH, src + static_cast<size_t>(c) * TILE_K, TILE_K,
                              full0 + 8 * slot);
                if (++slot == TILE_SLOTS) {
                    slot = 0;
                    phase ^= 1;
                }
            }
        }
        return;
    }

    const int g = lane >> 2, t = lane & 3;
    const uint4* xr[NT];
    bool has_x[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        const int b = g + 8 * nt;
        has_x[nt] = b < BATCH;
        xr[nt] = reinterpret_cast<const uint4*>(x) + static_cast<size_t>(has_x[nt] ? b : 0) * (k / 8) +
                 (warp * KW + t * 16) / 8;
    }
    const unsigned lane_at = base + g * PITCH + warp * KW + t * 16;
    int slot = 0;
    unsigned phase = 0;
    for (int tile = 0; tile < tiles; ++tile) {
        float acc[2][NT][4] = {};
#pragma unroll 1
        for (int c = 0; c < chunks; ++c) {
            mbar_wait(full0 + 8 * slot, phase);
            uint4 a[PW], b[PW];
#pragma unroll
            for (int p = 0; p < PW; ++p) {
                a[p] = load_shared(lane_at + slot * SLOT + p * 64);
                b[p] = load_shared(lane_at + slot * SLOT + 8 * PITCH + p * 64);
            }
            proxy_fence();  // this lane's reads of the slot before the refill, then release it
            mbar_arrive(empty0 + 8 * slot);
#pragma unroll
            for (int p = 0; p < PW; ++p) {
                const unsigned aw[4] = {a[p].x, a[p].y, a[p].z, a[p].w};
                const unsigned bw[4] = {b[p].x, b[p].y, b[p].z, b[p].w};
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    uint4 xv[2] = {make_uint4(0u, 0u, 0u, 0u), make_uint4(0u, 0u, 0u, 0u)};
                    if (has_x[nt]) {
                        xv[0] = __ldg(xr[nt] + (c * TILE_K + p * 64) / 8);
                        xv[1] = __ldg(xr[nt] + (c * TILE_K + p * 64) / 8 + 1);
                    }
                    const unsigned xw[8] = {xv[0].x, xv[0].y, xv[0].z, xv[0].w, xv[1].x, xv[1].y, xv[1].z, xv[1].w};
#pragma unroll
                    for (int i = 0; i < 4; ++i)
                        mma_f16(acc[i & 1][nt], e4m3_pair(aw[i], 0), e4m3_pair(bw[i], 0), e4m3_pair(aw[i], 1),
                                e4m3_pair(bw[i], 1), bf16x2_to_f16x2(xw[2 * i]), bf16x2_to_f16x2(xw[2 * i + 1]));
                }
            }
            if (++slot == TILE_SLOTS) {
                slot = 0;
                phase ^= 1;
            }
        }
        // the C warps' sums of this tile meet in red[tile % 2]; the next tile writes the other half,
        // and the one after passes this tile's barrier first, so no sum is overwritten unread
        float* mine = red + ((tile & 1) * C + warp) * 16 * BATCH;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int col = 8 * nt + 2 * t + (e & 1);
                if (col < BATCH) mine[(g + 8 * (e >> 1)) * BATCH + col] = acc[0][nt][e] + acc[1][nt][e];
            }
        named_sync(1, C * 32);
        for (int i = threadIdx.x; i < 16 * BATCH; i += C * 32) {
            const int row = r0 + 16 * tile + i / BATCH, col = i % BATCH;
            float sum = 0.0f;
#pragma unroll
            for (int w = 0; w < C; ++w) sum += red[((tile & 1) * C + w) * 16 * BATCH + i];
            if (row < r1) y[static_cast<size_t>(col) * n + row] = to_bf16(__ldg(scale + row) * sum);
        }
    }
}

extern "C" __global__ void __launch_bounds__(PAIR_THREADS, 1)
bulk_fp8_e4m3_b1(const unsigned short* x, const unsigned char* w8, const float* scale, unsigned short* y,
                 int k, int n) {
    gemv_pairs(x, w8, scale, y, k, n);
}

extern "C" __global__ void __launch_bounds__(TILE_THREADS, 1)
bulk_fp8_e4m3_b4(const unsigned short* x, const unsigned char* w8, const float* scale, unsigned short* y,
                 int k, int n) {
    gemv_tiles<4>(x, w8, scale, y, k, n);
}

extern "C" __global__ void __launch_bounds__(TILE_THREADS, 1)
bulk_fp8_e4m3_b16(const unsigned short* x, const unsigned char* w8, const float* scale, unsigned short* y,
                  int k, int n) {
    gemv_tiles<16>(x, w8, scale, y, k, n);
}
