// 02 SwiGLU fused: one pass, gate and up in, out written once, silu in fp32 registers
//
// Idea against 01: the three launches become one. Each thread loads 16-byte vectors of gate and up
// (8 bf16 each), widens them to fp32, computes g / (1 + exp(-g)) * u there and stores one rounded
// bf16 vector of out. Nothing is written but the result: 3 passes over memory instead of 8, and one
// rounding instead of three. The arithmetic (an exp, an add, a fast divide, a multiply: ~4 FLOPs a
// value, ~0.7 FLOP a byte) stays far below what the SMs can do while the bytes stream.
//
// Expected bound: at tokens = 8192, d = 28672 the work model counts 470 MB of gate + 470 MB of up
// read and 470 MB of out written = 1.41 GB: 329 us at the ~4.28 TB/s copy ceiling measured on this
// card (a lead). Two reads to one write is close to copy's one to one, and each thread has 4
// vectors (64 B) in flight before its first use, as the copy ceiling's kernel has 1: expect 88-93%
// of copy (~360 us), ~2.7x faster than 01 and ~1.7x faster than torch's silu(g) * u, which moves 5
// passes.
//
// Size constraints: tokens * d a multiple of 4096 (256 threads x 2 vectors x 8 values a block), and
// below 2^34 so the vector count fits an int; tensors 16-byte aligned.

constexpr int BLOCK = 256;
constexpr int VECTORS = 2;  // 16-byte vectors of each input a thread, loaded before the first use
constexpr int VALUES = 8;   // bf16 in 16 bytes

static_assert(BLOCK % 32 == 0, "a block is whole warps");
static_assert(sizeof(uint4) == VALUES * sizeof(unsigned short), "8 bf16 in 16 bytes");

__device__ __forceinline__ float bf16_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(unsigned w) { return __uint_as_float(w & 0xFFFF0000u); }

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned w;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
    return w;
}

// silu(g) * u; for g below about -88 exp(-g) is inf and the fast divide returns 0, which is
// silu's value there to within a few 1e-37.
__device__ __forceinline__ float swiglu(float g, float u) {
    return __fdividef(g, 1.0f + __expf(-g)) * u;
}

__device__ __forceinline__ unsigned swiglu_pair(unsigned g, unsigned u) {
    return pack_bf16x2(swiglu(bf16_lo(g), bf16_lo(u)), swiglu(bf16_hi(g), bf16_hi(u)));
}

// grid = vectors / (BLOCK * VECTORS).
extern "C" __global__ void __launch_bounds__(BLOCK)
fused(const uint4* __restrict__ gate, const uint4* __restrict__ up, uint4* __restrict__ out) {
    const int base = blockIdx.x * BLOCK * VECTORS + threadIdx.x;
    uint4 vg[VECTORS], vu[VECTORS];
#pragma unroll
    for (int j = 0; j < VECTORS; ++j) {
        vg[j] = gate[base + j * BLOCK];
        vu[j] = up[base + j * BLOCK];
    }
#pragma unroll
    for (int j = 0; j < VECTORS; ++j) {
        uint4 r;
        r.x = swiglu_pair(vg[j].x, vu[j].x);
        r.y = swiglu_pair(vg[j].y, vu[j].y);
        r.z = swiglu_pair(vg[j].z, vu[j].z);
        r.w = swiglu_pair(vg[j].w, vu[j].w);
        out[base + j * BLOCK] = r;
    }
}
