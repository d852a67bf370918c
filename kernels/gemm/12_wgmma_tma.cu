// 12 wgmma + TMA: Hopper warpgroup MMA fed by the tensor memory accelerator
//
// Idea against 11: use Hopper's own data path end to end. (1) The copy engine
// (TMA, cp.async.bulk.tensor) moves whole tiles from device memory into
// shared memory, described by a tensor map that the host builds
// (cuTensorMapEncodeTiled) and passes as a __grid_constant__ parameter; one
// thread issues a tile with one instruction, and the engine writes it in the
// 128-byte swizzled layout the tensor cores read. (2) wgmma.mma_async: a
// warpgroup (4 warps) multiplies a 64x256x16 slice straight out of shared
// memory, described by 64-bit matrix descriptors, with the accumulators in
// registers; no ldmatrix, no register fragments of A or B. (3) A 4-stage ring
// of tiles with two mbarriers per stage: "full" completes when the TMA bytes
// land, "empty" when both math warpgroups are done reading. The block is 3
// warpgroups: one producer (one thread issues all copies) and two consumers,
// each owning 64 rows of the 128x256 block tile. B is row-major (K x N), so it
// is read N-major ("transposed" in wgmma's terms): TMA loads it as 64-column
// boxes, and the B descriptor steps 8192 bytes from one box to the next
// (leading offset) and 1024 bytes per 8 rows of k (stride offset).
//
// Expected bound (estimate), M = N = K = 4096 on an H200: 137 GFLOP at the
// datasheet's ~990 TFLOP/s dense bf16 is 0.14 ms; minimum traffic 134 MB at
// ~4.8 TB/s is 0.03 ms. Per 64-wide k step a block reads 48 KB for 4.2 MFLOP,
// ~87 FLOP/byte out of shared memory, well within what wgmma sustains. What
// this version leaves on the table: each consumer waits for its wgmma group
// to finish before releasing the stage (no MMA overlap across k steps), the
// epilogue writes fp32 straight from registers, and 512 blocks on 132 SMs
// make 3.9 waves. ~550-650 TFLOP/s, ~70-80% of cuBLAS's ~800 (estimate).
//
// Constraints: M a multiple of 128, N of 256, K of 64 (full tiles; TMA would
// zero-fill a partial tile, but the epilogue does not mask); row pitches of A
// and B (2K and 2N bytes) multiples of 16, as TMA requires; sm_90a
// (compile with -arch=sm_90a); 32-bit indices.

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

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_bf16_wgmma_tma(const __grid_constant__ TensorMap tmap_a,  // A: M x K, box 64 (k) x 128 (m)
                    const __grid_constant__ TensorMap tmap_b,  // B: K x N, box 64 (n) x 64 (k)
                    float* C, int M, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    // 128-byte swizzle is a function of address bits 4-9: tiles start on 1024 bytes.
    const unsigned raw = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
    const unsigned base = (raw + SWIZZLE_ATOM - 1) & ~static_cast<unsigned>(SWIZZLE_ATOM - 1);
    const unsigned a_smem = base;                              // [STAGES][BM rows][128 B]
    const unsigned b_smem = a_smem + STAGES * A_STAGE_BYTES;   // [STAGES][BN/64 boxes][BK rows][128 B]
    const unsigned full_bar = b_smem + STAGES * B_STAGE_BYTES;  // [STAGES] x 8 bytes
    const unsigned empty_bar = full_bar + STAGES * 8;          // [STAGES] x 8 bytes

    const int warpgroup = threadIdx.x / 128;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const int k_tiles = K / BK;

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full_bar + 8 * s, 1);                  // the producer's expect_tx arrival
            mbar_init(empty_bar + 8 * s, CONSUMERS * 128);  // every consumer thread arrives
        }
        // Make the initialised barriers visible to the copy engine (async proxy).
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warpgroup == 0) {
        // Producer: one thread walks K, refilling a stage once both consumers freed it.
        if (threadIdx.x == 0) {
            for (int t = 0; t < k_tiles; ++t) {
                const int s = t % STAGES;
                if (t >= STAGES) mbar_wait(empty_bar + 8 * s, ((t / STAGES) - 1) & 1);
                const unsigned bar = full_bar + 8 * s;
                mbar_expect_tx(bar, STAGE_BYTES);
                tma_load_2d(a_smem + s * A_STAGE_BYTES, &tmap_a, bar, t * BK, block_row);
#pragma unroll
                for (int box = 0; box < BN / B_BOX; ++box) {
                    tma_load_2d(b_smem + s * B_STAGE_BYTES + box * B_BOX_BYTES, &tmap_b, bar,
                                block_col + box * B_BOX, t * BK);
                }
            }
        }
        return;
    }

    // Consumers: warpgroup 1 takes rows 0-63 of the block tile, warpgroup 2 rows 64-127.
    const int consumer = warpgroup - 1;
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;

    for (int t = 0; t < k_tiles; ++t) {
        const int s = t % STAGES;
        mbar_wait(full_bar + 8 * s, (t / STAGES) & 1);
        const unsigned a_tile = a_smem + s * A_STAGE_BYTES + consumer * 64 * 128;
        const unsigned b_tile = b_smem + s * B_STAGE_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / WGMMA_K; ++kk) {
            // A: K-major rows of 128 bytes; a k16 step is 32 bytes along the row,
            // 8-row groups are 1024 bytes apart (stride); leading offset unused.
            const unsigned long long da = smem_desc(a_tile + kk * WGMMA_K * 2, 16, SWIZZLE_ATOM);
            // B: N-major rows of 128 bytes (64 columns); a k16 step is 16 rows =
            // 2048 bytes; next 64 columns one box (8192 bytes) further (leading
            // offset); next 8 rows of k 1024 bytes further (stride offset).
            const unsigned long long db =
                smem_desc(b_tile + kk * WGMMA_K * 128, B_BOX_BYTES, SWIZZLE_ATOM);
            wgmma_m64n256k16(acc, da, db);
        }
        wgmma_commit();
        wgmma_wait<0>();                 // this warpgroup has finished reading the stage
        mbar_arrive(empty_bar + 8 * s);  // ... so the producer may refill it
    }

    // Epilogue: fp32 straight from the accumulator registers.
    const int local = threadIdx.x % 128;
    const int warp = local / 32, lane = local % 32;
    const int row = block_row + consumer * 64 + warp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int col = block_col + 8 * j + 2 * (lane % 4);
        *reinterpret_cast<float2*>(&C[row * N + col]) = make_float2(acc[4 * j], acc[4 * j + 1]);
        *reinterpret_cast<float2*>(&C[(row + 8) * N + col]) =
            make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
}
