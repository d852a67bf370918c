// 03 wgmma fp8 peak: e4m3 inputs, fp32 accumulate, twice the bf16 rate per instruction
//
// Idea against 02: the same loop with wgmma.mma_async m64n256k32 on e4m3 operands: an
// instruction covers k = 32 instead of 16 in the same 128 bytes of each row, so Hopper's
// tensor cores do twice the FLOPs per clock. fp8 wgmma reads both operands K-major (it has no
// transpose), so B is stored N x K here: 256 rows of 128 bytes, swizzled like A, and both
// descriptors step 32 bytes per k32 slice and 1024 bytes per 8 rows. Same fences as 02.
//
// Check: A and B hold integers in {-1, 0, 1} (exact in e4m3). Each iteration starts the
// accumulator afresh (scale-d = 0 on the first of its four wgmma), so the output is exactly
// A @ B (k = 128, entries of magnitude <= 128) whatever the iteration count: fp8 wgmma adds
// into its fp32 accumulator with fewer bits than fp32 (reported near 14 on Hopper), so a long
// sum of integers would not stay exact, while these stay below 2^8. A wrong swizzle,
// descriptor or layout gives errors of order 1. The restart flag is `it & keep` with keep = 0
// passed at run time: with a constant 0, ptxas sees that three of every four iterations are
// overwritten unread and deletes their wgmma (it did: dummy HGMMA in their place).
//
// Expected bound: the tensor cores. Work = 132 blocks x 2 warpgroups x iters x 4 x 1048576
// FLOPs (2 * 64 * 256 * 32) = 2.27 TFLOP at iters = 2048, the FLOPs of an 8448 x 8192 x 16384
// GEMM. Estimate: the datasheet's ~1979 TFLOP/s dense fp8 gives 1.15 ms; with the clock under
// the power limit, ~1500-1800 TFLOP/s, about twice 02.
//
// Size constraints: grid = 132 blocks of 256 threads (one per SM on an H200); sm_90a.
// Registers (nvcc 13.0, sm_90a, -Xptxas -v): 154 per thread, no spills; shared memory:
// 49152 bytes of tiles + 1024 alignment slack = 50176 bytes dynamic.

constexpr int THREADS = 256;            // two warpgroups
constexpr int BM = 128;                 // A tile rows: 64 per warpgroup
constexpr int BN = 256;                 // one wgmma n256
constexpr int BK = 128;                 // 128 e4m3 = one 128-byte swizzle row
constexpr int WGMMA_K = 32;
constexpr int A_BYTES = BM * BK;        // 16384
constexpr int B_BYTES = BN * BK;        // 32768: N rows of K, K-major
constexpr int SWIZZLE_ATOM = 1024;      // 8 rows x 128 bytes
constexpr int SMEM_BYTES = A_BYTES + B_BYTES + SWIZZLE_ATOM;

static_assert(BK == 128, "rows of A and of B are 128-byte swizzle rows");
static_assert(BM == 2 * 64 && THREADS == 2 * 128, "two warpgroups of 64 rows each");
static_assert(A_BYTES % SWIZZLE_ATOM == 0, "both tiles start on a 1024-byte swizzle atom");
static_assert(SMEM_BYTES <= 227 * 1024, "an H100/H200 block gets at most 227 KB of shared memory");

// Byte offset of 16-byte chunk c (0-7) of row r in a 128-byte-swizzled tile (Swizzle<3,4,3>,
// what TMA's CU_TENSOR_MAP_SWIZZLE_128B writes): the chunk index is XORed with r mod 8.
__device__ __forceinline__ unsigned swizzled(int r, int c) {
    return static_cast<unsigned>(r * 128 + ((c ^ (r & 7)) << 4));
}

// wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets
// (all >> 4), layout 1 = 128-byte swizzle.
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

// d[64x256] (+)= A[64x32] * B[32x256]; A and B K-major (fp8 has no transpose); scale_d = 0
// overwrites d. Accumulator d[4j + i]: row 16*warp + lane/4 (+8 for i >= 2), column 8j +
// 2*(lane%4) + (i % 2).
__device__ __forceinline__ void wgmma_m64n256k32_e4m3(float (&d)[128], unsigned long long desc_a,
                                                      unsigned long long desc_b, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {"
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
        "}, %128, %129, p, 1, 1;\n"
        "}\n"
#define D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
              "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
        : D8(0), D8(8), D8(16), D8(24), D8(32), D8(40), D8(48), D8(56),
          D8(64), D8(72), D8(80), D8(88), D8(96), D8(104), D8(112), D8(120)
#undef D8
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// A: 128 x 128 e4m3 bytes, row-major (M x K). B: 256 x 128 e4m3 bytes, row-major (N x K).
// D: gridDim.x x 128 x 256 fp32, row-major per block.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
wgmma_fp8(const uint4* __restrict__ A, const uint4* __restrict__ B, float* __restrict__ D,
          int iters, int keep) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
    const unsigned base = (raw + SWIZZLE_ATOM - 1) & ~static_cast<unsigned>(SWIZZLE_ATOM - 1);
    unsigned char* tiles = smem_raw + (base - raw);
    const unsigned a_smem = base;             // [BM rows][128 B], swizzled
    const unsigned b_smem = base + A_BYTES;   // [BN rows][128 B], swizzled

    // A: 128 rows x 8 chunks of 16 bytes (16 e4m3).
    for (int e = threadIdx.x; e < BM * 8; e += THREADS) {
        const int r = e / 8, c = e % 8;
        *reinterpret_cast<uint4*>(tiles + swizzled(r, c)) = A[e];
    }
    // B: 256 rows (n) x 8 chunks, the same placement as A.
    for (int e = threadIdx.x; e < BN * 8; e += THREADS) {
        const int r = e / 8, c = e % 8;
        *reinterpret_cast<uint4*>(tiles + A_BYTES + swizzled(r, c)) = B[e];
    }
    // The stores above went through the generic proxy; wgmma reads through the async proxy.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();

    const int warpgroup = threadIdx.x / 128;
    const unsigned a_tile = a_smem + warpgroup * 64 * 128;
    unsigned long long da[BK / WGMMA_K], db[BK / WGMMA_K];
#pragma unroll
    for (int kk = 0; kk < BK / WGMMA_K; ++kk) {
        // A and B: K-major 128-byte rows; a k32 step is 32 bytes along the row, 8-row groups
        // 1024 bytes apart (stride); leading offset unused with the 128-byte swizzle.
        da[kk] = smem_desc(a_tile + kk * WGMMA_K, 16, SWIZZLE_ATOM);
        db[kk] = smem_desc(b_smem + kk * WGMMA_K, 16, SWIZZLE_ATOM);
    }

    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    for (int it = 0; it < iters; ++it) {
        wgmma_fence();  // as CUTLASS's main loop does before each batch; cheap, no wait
#pragma unroll
        for (int kk = 0; kk < BK / WGMMA_K; ++kk)
            wgmma_m64n256k32_e4m3(acc, da[kk], db[kk], kk == 0 ? (it & keep) : 1);
        wgmma_commit();
        wgmma_wait<1>();
    }
    wgmma_wait<0>();

    const int local = threadIdx.x % 128;
    const int warp = local / 32, lane = local % 32;
    const int row = warpgroup * 64 + warp * 16 + lane / 4;
    float* d = D + (long long)blockIdx.x * BM * BN;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int col = 8 * j + 2 * (lane % 4);
        *reinterpret_cast<float2*>(&d[row * BN + col]) = make_float2(acc[4 * j], acc[4 * j + 1]);
        *reinterpret_cast<float2*>(&d[(row + 8) * BN + col]) =
            make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
}
