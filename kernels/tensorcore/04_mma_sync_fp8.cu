// 04 mma.sync fp8: m16n8k32 e4m3 from registers, which Hopper runs as fp16 tensor-core MMAs
//
// Idea against 01: the warp-level instruction on 8-bit floats. mma.sync.m16n8k32 with e4m3
// operands (an sm_89 instruction that Hopper runs) does twice the FLOPs of 01's m16n8k16 per
// instruction, so it shows whether the warp-level path gains from fp8 as wgmma does (03
// against 02). It does not: ptxas compiles it, on sm_90, into e4m3-to-fp16 conversions
// (F2FP.F16.E4M3.UNPACK), two fp16 HMMA.16816 from zero and four FADDs per instruction, so
// this measures that emulation. Each warp holds one A fragment (16x32) and CHAINS = 4 B
// fragments (32x8); each iteration issues two MMAs per chain, D += A (s1 B_j) and
// D += A (s2 B_j), with signs s1, s2 = +-1 drawn from a per-iteration LCG (x -> 1664525 x +
// 1013904223, its top two bits) and applied by flipping the sign bit of every byte of B.
// The signs matter: with the same operands every iteration, ptxas computed the two HMMA
// products once and kept only the FADDs in the loop.
//
// Check: A and B hold integers in {-1, 0, 1}; one more D += A B_j follows the loop, so the
// output is exactly (1 + sum of the signs) x A @ B_j, the sum replayed by the suite from the
// same LCG: integers below 2^19, exact in fp32. A wrong fragment layout, a lost MMA or a
// wrong chain gives errors of order 1 or more.
//
// Expected bound: the tensor cores' mma.sync issue rate for fp8. FLOPs counted = warps x 4 x
// 2 x iters x 8192 (2 * 16 * 8 * 32 per MMA) = 4224 x 4 x 2 x 4096 x 8192 = 1.13 TFLOP, the
// FLOPs of an 8448 x 8192 x 8192 GEMM (the 4 final MMAs per warp that set the answer, 0.01%,
// are not counted). Estimate: the emulation does 2 fp16 HMMA.16816 (01's instruction, 4096
// FLOPs each) per 8192 counted FLOPs, plus conversions and FADDs on the other pipes, so at
// best 01's rate (~600 TFLOP/s, 1.9 ms) and likely below it, against ~1979 TFLOP/s (datasheet)
// for fp8 through wgmma (03).
//
// Size constraints: grid = 1056 blocks of 128 threads (8 per SM on 132 SMs); sm_89 or later.
// Registers (nvcc 13.0, sm_90a, -Xptxas -v): 49 per thread, no spills, no shared memory.

constexpr int THREADS = 128;
constexpr int CHAINS = 4;
constexpr int WARPS_PER_BLOCK = THREADS / 32;
constexpr unsigned SIGNS = 0x80808080u;  // the sign bit of each of 4 e4m3 bytes
static_assert(THREADS % 32 == 0, "a block is a whole number of warps");

__device__ __forceinline__ unsigned pack4(const unsigned char* p, int i0, int stride) {
    return static_cast<unsigned>(p[i0]) | (static_cast<unsigned>(p[i0 + stride]) << 8) |
           (static_cast<unsigned>(p[i0 + 2 * stride]) << 16) |
           (static_cast<unsigned>(p[i0 + 3 * stride]) << 24);
}

__device__ __forceinline__ void mma_e4m3(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A: 16x32 e4m3 bytes, row-major. B: CHAINS x 32 (k) x 8 (n) e4m3 bytes. D: warps x CHAINS x 16 x 8.
extern "C" __global__ void __launch_bounds__(THREADS)
mma_sync_fp8(const unsigned char* __restrict__ A, const unsigned char* __restrict__ B,
             float* __restrict__ D, int iters, unsigned seed) {
    const int lane = threadIdx.x % 32;
    const long long warp = (long long)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4;

    // Fragment layouts of mma.m16n8k32 with 8-bit operands (PTX ISA, "Matrix Fragments for
    // mma.m16n8k32"): a register holds 4 consecutive k of one row of A, or of one column of B.
    unsigned a[4];
    a[0] = pack4(A, g * 32 + 4 * t, 1);
    a[1] = pack4(A, (g + 8) * 32 + 4 * t, 1);
    a[2] = pack4(A, g * 32 + 4 * t + 16, 1);
    a[3] = pack4(A, (g + 8) * 32 + 4 * t + 16, 1);
    unsigned b[CHAINS][2];
    float acc[CHAINS][4];
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) {
        const unsigned char* bj = B + j * 256;
        b[j][0] = pack4(bj, (4 * t) * 8 + g, 8);
        b[j][1] = pack4(bj, (4 * t + 16) * 8 + g, 8);
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
    }

    unsigned x = seed;
    for (int it = 0; it < iters; ++it) {
        x = x * 1664525u + 1013904223u;
        const unsigned flip1 = (x & 0x80000000u) ? SIGNS : 0u;  // s1 = -1 when the top bit is set
        const unsigned flip2 = (x & 0x40000000u) ? SIGNS : 0u;  // s2 from the next bit
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) mma_e4m3(acc[j], a, b[j][0] ^ flip1, b[j][1] ^ flip1);
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) mma_e4m3(acc[j], a, b[j][0] ^ flip2, b[j][1] ^ flip2);
    }
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) mma_e4m3(acc[j], a, b[j][0], b[j][1]);

#pragma unroll
    for (int j = 0; j < CHAINS; ++j) {
        float* d = D + (warp * CHAINS + j) * 128;
        *reinterpret_cast<float2*>(d + g * 8 + 2 * t) = make_float2(acc[j][0], acc[j][1]);
        *reinterpret_cast<float2*>(d + (g + 8) * 8 + 2 * t) = make_float2(acc[j][2], acc[j][3]);
    }
}
