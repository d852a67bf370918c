// 13 persistent wgmma: one CTA per SM walks the tile list, bf16 C, two MMAs in flight
//
// Idea against 12: three changes, each aimed at a cost 12 leaves on the table.
// (1) Keep one wgmma group in flight: a consumer commits the MMAs of stage t,
// then waits only for the group of stage t-1 (wgmma.wait_group 1) and frees
// that stage, so the tensor cores never idle while a warpgroup waits for its
// own last MMA. (2) Persistence: the grid is one CTA per SM, and each CTA takes
// tiles t, t + gridDim.x, ... of the output; the producer runs ahead into the
// next tile's k-steps while the consumers are still in the epilogue of the
// last one, so the epilogue no longer stalls the copy engine, and no CTA pays
// a launch, a barrier initialisation or a pipeline fill per tile. Tiles are
// visited in groups of GROUP_M tile rows (row index fastest within a group),
// so the CTAs running at one time share A rows and B columns in L2. (3) C is
// written in bf16, like torch.matmul's, halving the epilogue's bytes against
// 12's fp32 (32 MiB instead of 64 MiB at 4096^2). The producer warpgroup gives
// registers back (setmaxnreg 40) and the consumers take them (232), which
// removes the spills the persistent loop otherwise causes at the 168-register
// cap of 384 threads.
//
// Expected bound (estimate), M = N = K = 4096 on an H200: 512 tiles of 128x256
// on 132 SMs are 3.88 rounds, so the last round leaves 15 SMs idle (97% of
// full rounds); against 12's ~700 TFLOP/s, overlapping the MMAs and the
// epilogue should give ~5-10%, ~740-770 TFLOP/s, about cuBLAS.
//
// Resources (nvcc 13.0, -arch=sm_90a --resource-usage): 168 registers at
// compile time, no spills; 197,696 bytes of dynamic shared memory (4 stages
// of 48 KiB, 8 mbarriers, 1 KiB of alignment slack).
//
// Constraints: as 12 (M a multiple of 128, N of 256, K of 64; row pitches
// multiples of 16 bytes; sm_90a), and C holds bf16 bit patterns.

constexpr int BM = 128;                 // block tile rows (2 consumers x 64)
constexpr int BN = 256;                 // block tile columns (one wgmma n256)
constexpr int BK = 64;                  // k per stage: 64 bf16 = one 128-byte swizzle row
constexpr int STAGES = 4;
constexpr int CONSUMERS = BM / 64;      // math warpgroups, 64 rows each
constexpr int THREADS = (CONSUMERS + 1) * 128;
constexpr int WGMMA_K = 16;
constexpr int B_BOX = 64;               // TMA box width along N: 128 bytes, the swizzle span
constexpr int A_STAGE_BYTES = BM * BK * 2;
constexpr int B_BOX_BYTES = BK * B_BOX * 2;
constexpr int B_STAGE_BYTES = BK * BN * 2;
constexpr int STAGE_BYTES = A_STAGE_BYTES + B_STAGE_BYTES;
constexpr int SWIZZLE_ATOM = 1024;      // 8 rows x 128 bytes
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 2 * STAGES * 8 + SWIZZLE_ATOM;

static_assert(BK * 2 == 128, "a K-major row of A must be exactly one 128-byte swizzle row");
static_assert(B_BOX * 2 == 128, "a row of a B box must be exactly one 128-byte swizzle row");
static_assert(BM == CONSUMERS * 64, "each consumer warpgroup owns 64 rows (wgmma m64)");
static_assert(BN % B_BOX == 0 && BN >= 8 && BN <= 256, "wgmma n is at most 256");
static_assert(BK % WGMMA_K == 0, "a stage holds whole k16 steps");
static_assert(A_STAGE_BYTES % SWIZZLE_ATOM == 0 && B_BOX_BYTES % SWIZZLE_ATOM == 0,
              "every tile and box must start on a 1024-byte swizzle atom");
static_assert(STAGE_BYTES < (1 << 20), "an mbarrier counts at most 2^20 - 1 transaction bytes");
static_assert(SMEM_BYTES <= 227 * 1024, "an H100/H200 block gets at most 227 KB of shared memory");

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

// One 2-D tile from global memory into shared memory; completes on `bar`.
// c0 is the coordinate along the contiguous dimension, c1 along the other.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap* map, unsigned bar,
                                            int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// wgmma shared-memory matrix descriptor: start address, leading and stride
// byte offsets (all >> 4), layout 1 = 128-byte swizzle.
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

// d[64x256] += A[64x16] * B[16x256]; A K-major (not transposed), B N-major
// (imm-trans-b = 1). Accumulator d[4j + i]: row 16*warp + lane/4 (+8 for
// i >= 2), column 8j + 2*(lane%4) + (i % 2).
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], unsigned long long desc_a,
                                                 unsigned long long desc_b) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7,"
        "%8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23,"
        "%24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39,"
        "%40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55,"
        "%56, %57, %58, %59, %60, %61, %62, %63,"
        "%64, %65, %66, %67, %68, %69, %70, %71,"
        "%72, %73, %74, %75, %76, %77, %78, %79,"
        "%80, %81, %82, %83, %84, %85, %86, %87,"
        "%88, %89, %90, %91, %92, %93, %94, %95,"
        "%96, %97, %98, %99, %100, %101, %102, %103,"
        "%104, %105, %106, %107, %108, %109, %110, %111,"
        "%112, %113, %114, %115, %116, %117, %118, %119,"
        "%120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, 0, 1;\n"
        "}\n"
#define D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
              "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
        : D8(0), D8(8), D8(16), D8(24), D8(32), D8(40), D8(48), D8(56),
          D8(64), D8(72), D8(80), D8(88), D8(96), D8(104), D8(112), D8(120)
#undef D8
        : "l"(desc_a), "l"(desc_b));
}

constexpr int GROUP_M = 8;              // tile rows visited together (L2 reuse)

// Round a pair of fp32 values to bf16 (nearest, ties to even) and pack them:
// lo at the lower address.
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
}

// Tile `t` of a tiles_m x tiles_n grid, in groups of GROUP_M tile rows.
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
    const int per_group = GROUP_M * tiles_n;
    const int first_m = (t / per_group) * GROUP_M;
    const int rows = min(tiles_m - first_m, GROUP_M);
    const int in_group = t % per_group;
    tm = first_m + in_group % rows;
    tn = in_group / rows;
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_bf16_wgmma_persistent(const __grid_constant__ TensorMap tmap_a,  // A: M x K, box 64 (k) x 128 (m)
                           const __grid_constant__ TensorMap tmap_b,  // B: K x N, box 64 (n) x 64 (k)
                           unsigned* C,  // M x N bf16, as pairs packed in 32-bit words
                           int M, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
    const unsigned base = (raw + SWIZZLE_ATOM - 1) & ~static_cast<unsigned>(SWIZZLE_ATOM - 1);
    const unsigned a_smem = base;
    const unsigned b_smem = a_smem + STAGES * A_STAGE_BYTES;
    const unsigned full_bar = b_smem + STAGES * B_STAGE_BYTES;
    const unsigned empty_bar = full_bar + STAGES * 8;

    const int warpgroup = threadIdx.x / 128;
    const int tiles_m = M / BM, tiles_n = N / BN;
    const int tiles = tiles_m * tiles_n;
    const int k_tiles = K / BK;

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full_bar + 8 * s, 1);
            mbar_init(empty_bar + 8 * s, CONSUMERS * 128);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warpgroup == 0) {
        // The producer needs few registers: hand them to the consumers.
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        // Producer: one thread walks every k-step of every tile of this CTA. The
        // step counter `it` runs across tiles, so stage and parity continue.
        if (threadIdx.x == 0) {
            int it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int tm, tn;
                tile_coords(t, tiles_m, tiles_n, tm, tn);
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % STAGES;
                    if (it >= STAGES) mbar_wait(empty_bar + 8 * s, ((it / STAGES) - 1) & 1);
                    const unsigned bar = full_bar + 8 * s;
                    mbar_expect_tx(bar, STAGE_BYTES);
                    tma_load_2d(a_smem + s * A_STAGE_BYTES, &tmap_a, bar, kt * BK, tm * BM);
#pragma unroll
                    for (int box = 0; box < BN / B_BOX; ++box) {
                        tma_load_2d(b_smem + s * B_STAGE_BYTES + box * B_BOX_BYTES, &tmap_b, bar,
                                    tn * BN + box * B_BOX, kt * BK);
                    }
                }
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int consumer = warpgroup - 1;
    const int local = threadIdx.x % 128;
    const int warp = local / 32, lane = local % 32;
    float acc[128];
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        tile_coords(t, tiles_m, tiles_n, tm, tn);
#pragma unroll
        for (int i = 0; i < 128; ++i) acc[i] = 0.0f;

        int previous = -1;  // the stage whose MMAs may still be running
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
            const int s = it % STAGES;
            mbar_wait(full_bar + 8 * s, (it / STAGES) & 1);
            const unsigned a_tile = a_smem + s * A_STAGE_BYTES + consumer * 64 * 128;
            const unsigned b_tile = b_smem + s * B_STAGE_BYTES;
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / WGMMA_K; ++kk) {
                const unsigned long long da = smem_desc(a_tile + kk * WGMMA_K * 2, 16, SWIZZLE_ATOM);
                const unsigned long long db =
                    smem_desc(b_tile + kk * WGMMA_K * 128, B_BOX_BYTES, SWIZZLE_ATOM);
                wgmma_m64n256k16(acc, da, db);
            }
            wgmma_commit();
            // Stage t's group may run on; stage t-1's has finished reading its tiles.
            wgmma_wait<1>();
            if (previous >= 0) mbar_arrive(empty_bar + 8 * previous);
            previous = s;
        }
        wgmma_wait<0>();
        if (previous >= 0) mbar_arrive(empty_bar + 8 * previous);

        // Epilogue: round to bf16 and store pairs; the producer is already
        // filling the stages of this CTA's next tile.
        const int row = tm * BM + consumer * 64 + warp * 16 + lane / 4;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            const int col = tn * BN + 8 * j + 2 * (lane % 4);
            C[(row * N + col) / 2] = pack_bf16x2(acc[4 * j], acc[4 * j + 1]);
            C[((row + 8) * N + col) / 2] = pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]);
        }
    }
}
