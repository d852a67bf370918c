// 01 bf16 weights through a per-warp cp.async ring into the tensor cores: y = x W^T for decode
//
// Idea: x is a batch x K bf16 activation (batch 1..16, one token per sequence), W an N x K bf16
// weight, y = x W^T is batch x N. Each weight is read once and used `batch` times, so the kernel is
// a stream over W and its one job is to keep enough of W in flight. Three choices:
// - A warp owns 16 rows of W; 4 lanes share a row, each copying 16 bytes of it, so one copy
//   instruction covers 64 contiguous bytes of each of 16 rows (whole 32-byte sectors).
// - The copies are cp.async into a ring of 4 stages of 2 pieces a row in shared memory, 3 stages
//   ahead of the one in use. Each lane reads back only what it copied, so no barrier is needed, only
//   cp.async.wait_group. Loads straight into registers were tried first: ptxas sank each load next
//   to the mma that uses it (read off the SASS), leaving two or three loads a lane in flight. Ring
//   shapes were then timed on this card: 4 pieces a stage, 3 deep (more shared memory, more bytes
//   in flight) ran clearly slower than this; small stages keep each warp's requests flowing.
// - The pieces go unchanged into mma.sync m16n8k16: 16 rows of W are its A operand, up to 8 rows of
//   x its B operand. A dot product does not care in which order k runs, so a lane's A and B registers
//   may come from the same 8 contiguous k of its piece instead of the layout's nominal columns: no
//   shuffles, no conversion. Accumulation is fp32; y is rounded to bf16 once, at the end.
// Why tensor cores in a memory-bound kernel: at batch 16 the FMA route has 2 * 16 * 8192 * 28672 =
// 7.5 GFLOP to do, ~112 us at the ~67 TFLOP/s fp32 datasheet rate, more than the ~104 us it takes to
// read W; one mma does 16 x 8 x 16 multiply-adds, so the same kernel stays bound by memory from
// batch 1 to 16. At batch 1, 7 of the 8 mma columns multiply zeros, which the memory system never
// notices.
//
// Expected bound: at batch 1, K = 8192, N = 28672 the work model counts W (470 MB) + x + y =
// 0.470 GB: 104 us at the ~4.5 TB/s read ceiling measured on this card (a lead; y is 57 KB, so the
// read ceiling, not copy, is the floor). A lane has up to 3 stages x 2 rows x 2 pieces x 16 B =
// 192 B in flight; 1792 warps on 132 SMs (7 blocks of 2 warps an SM, 16 KB of ring a block) are
// ~83 KB a SM, more than twice what Little's law asks at ~1 us of latency (4.5 TB/s x 1 us / 132 =
// 34 KB). Expect 85-92% of read, about torch's bf16 F.linear (cuBLAS): the same bytes. Batch 4 and
// 16 add only x reads (L1 and L2 hits): within a few percent of batch 1.
//
// Size constraints: K a multiple of 64 (4 lanes x 2 pieces x 8 values a row a stage), N a
// multiple of 32 (2 warps of 16 rows a block), batch 1..16 (one or two n8 tiles of the mma),
// every tensor 16-byte aligned (K % 8 == 0 gives it for the rows).

constexpr int WARPS = 2;    // warps a block; each owns 16 rows, so a block owns 32
constexpr int PIECES = 2;   // 16-byte pieces a lane copies of each of its 2 rows a stage
constexpr int STAGES = 4;   // ring depth: the stage in use and 3 in flight
constexpr int VALUES_PER_PIECE = 8;  // bf16 in 16 bytes
constexpr int ROWS_PER_BLOCK = WARPS * 16;
// 1792 warps at N = 28672 should all be resident at once (one wave, no tail): 7 blocks of 2 warps
// on each of 132 SMs is 1848. The ring (16 KB a block) allows more; registers must fit 14 warps:
// 4 to a scheduler of 16384 registers, so at most 128 a thread.
constexpr int BLOCKS_PER_SM = 7;

static_assert(sizeof(uint4) == VALUES_PER_PIECE * sizeof(unsigned short), "a 16-byte piece is 8 bf16");
static_assert(WARPS * STAGES * 2 * PIECES * 32 * 16 <= 48 * 1024, "static shared memory limit");

__device__ __forceinline__ void copy_async_16(void* smem, const void* gmem) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gmem) : "memory");
}

__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Wait until at most N of this lane's copy groups are still pending.
template <int N>
__device__ __forceinline__ void wait_copies() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// d += A (16 x 16, rows g and g+8 of the tile) * B (16 x 8, column g); registers as PTX lays out
// m16n8k16: a0 = (row g, k 2t..2t+1), a1 = (row g+8, same k), a2 = (row g, k 2t+8..2t+9),
// a3 = (row g+8, same), b0 = (k 2t..2t+1, col g), b1 = (k 2t+8..2t+9, col g).
__device__ __forceinline__ void mma_bf16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                         unsigned a3, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned short to_bf16(float v) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}

// grid = N / 32 blocks of 64 threads.
template <int BATCH>
__device__ __forceinline__ void gemv_bf16(const unsigned short* __restrict__ x,
                                          const unsigned short* __restrict__ w,
                                          unsigned short* __restrict__ y, int k, int n) {
    static_assert(BATCH >= 1 && BATCH <= 16, "one or two n8 tiles of batch columns");
    constexpr int NT = (BATCH + 7) / 8;
    // [warp][stage][piece][row g or g+8][lane]: consecutive lanes hit consecutive 16 bytes
    __shared__ uint4 ring[WARPS][STAGES][PIECES][2][32];

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int g = lane >> 2;  // tile rows g and g + 8; batch column g of the B operand
    const int t = lane & 3;   // which 16-byte piece of each 64-byte run
    const int row = blockIdx.x * ROWS_PER_BLOCK + warp * 16 + g;
    const int kv = k / VALUES_PER_PIECE;  // 16-byte pieces a row
    constexpr int STEP = 4 * PIECES;     // pieces a row a stage

    const uint4* wa = reinterpret_cast<const uint4*>(w) + static_cast<size_t>(row) * kv + t;
    const uint4* wb = wa + static_cast<size_t>(8) * kv;
    const uint4* xr[NT];
    bool has_x[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        const int b = g + 8 * nt;
        has_x[nt] = b < BATCH;
        xr[nt] = reinterpret_cast<const uint4*>(x) + static_cast<size_t>(has_x[nt] ? b : 0) * kv + t;
    }

    // Stage s holds pieces c + 4p + t (p < PIECES) of both rows, c = s * STEP.
    auto issue = [&](int c, int slot) {
        if (c < kv) {
#pragma unroll
            for (int p = 0; p < PIECES; ++p) {
                copy_async_16(&ring[warp][slot][p][0][lane], wa + c + 4 * p);
                copy_async_16(&ring[warp][slot][p][1][lane], wb + c + 4 * p);
            }
        }
        commit_copies();  // an empty group past the end keeps the wait count uniform
    };

    float acc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) issue(s * STEP, s);

    int slot = 0;
#pragma unroll 1
    for (int c = 0; c < kv; c += STEP) {
        // The slot refilled here was read in the previous iteration, by this lane alone.
        issue(c + (STAGES - 1) * STEP, slot == 0 ? STAGES - 1 : slot - 1);
        wait_copies<STAGES - 1>();
#pragma unroll
        for (int p = 0; p < PIECES; ++p) {
            const uint4 a = ring[warp][slot][p][0][lane];
            const uint4 b = ring[warp][slot][p][1][lane];
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const uint4 xv = has_x[nt] ? __ldg(xr[nt] + c + 4 * p) : make_uint4(0u, 0u, 0u, 0u);
                // values 0-3 of the piece, then 4-7: each pair of words is one k16 step
                mma_bf16(acc[nt], a.x, b.x, a.y, b.y, xv.x, xv.y);
                mma_bf16(acc[nt], a.z, b.z, a.w, b.w, xv.z, xv.w);
            }
        }
        slot = slot == STAGES - 1 ? 0 : slot + 1;
    }
    wait_copies<0>();  // nothing real is pending, but leave no copy behind the exit

    // d0, d1: row g, batch columns 2t and 2t+1 of the tile; d2, d3: row g + 8.
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
bf16_b1(const unsigned short* x, const unsigned short* w, unsigned short* y, int k, int n) {
    gemv_bf16<1>(x, w, y, k, n);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, BLOCKS_PER_SM)
bf16_b4(const unsigned short* x, const unsigned short* w, unsigned short* y, int k, int n) {
    gemv_bf16<4>(x, w, y, k, n);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, BLOCKS_PER_SM)
bf16_b16(const unsigned short* x, const unsigned short* w, unsigned short* y, int k, int n) {
    gemv_bf16<16>(x, w, y, k, n);
}
