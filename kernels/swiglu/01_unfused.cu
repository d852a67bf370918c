// 01 SwiGLU unfused: sigmoid, times gate, times up, one launch each through bf16 temporaries
//
// Idea: out = silu(gate) * up, elementwise over two bf16 tensors of tokens x d (the gated MLP's
// activation, between the gate/up projections and the down projection), silu(g) = g * sigmoid(g).
// Written the way the formula reads, one primitive a launch, each result stored before the next
// launch reads it:
//   launch 1: s = sigmoid(gate)        reads gate,     writes s     (2 passes over memory)
//   launch 2: h = gate * s            reads gate, s,  writes h     (3 passes)
//   launch 3: out = h * up            reads h, up,    writes out   (3 passes)
// Each kernel is a plain 16-byte-vector elementwise pass (8 bf16 a load, fp32 arithmetic, one
// bf16 rounding a stored value), so the only thing wrong with this version is the traffic: 8 passes
// where the operation needs 3 (read gate, read up, write out). The temporaries are bf16, so s, h
// and out are each rounded once (three roundings in all, against one for a fused kernel).
//
// Expected bound: at tokens = 8192, d = 28672 a tensor is 470 MB. The work model counts the 3
// necessary passes, 1.41 GB, a floor of 329 us at the ~4.28 TB/s copy ceiling measured on this
// card (a lead). This version moves 8 passes, 3.76 GB: at ~90% of copy per launch that is ~975 us,
// about 34% of the floor. torch's silu(g) * u runs two launches (5 passes), so expect this to be
// about 0.6x of it.
//
// Size constraints: tokens * d a multiple of 4096 (256 threads x 2 vectors x 8 values a block), and
// below 2^34 so the vector count fits an int; tensors 16-byte aligned.

constexpr int BLOCK = 256;
constexpr int VECTORS = 2;  // 16-byte vectors a thread, all loads issued before the first use
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

__device__ __forceinline__ float sigmoid(float v) { return __fdividef(1.0f, 1.0f + __expf(-v)); }

// s = sigmoid(g), 8 values a vector. grid = vectors / (BLOCK * VECTORS).
extern "C" __global__ void __launch_bounds__(BLOCK)
unfused_sigmoid(const uint4* __restrict__ g, uint4* __restrict__ s) {
    const int base = blockIdx.x * BLOCK * VECTORS + threadIdx.x;
    uint4 v[VECTORS];
#pragma unroll
    for (int j = 0; j < VECTORS; ++j) v[j] = g[base + j * BLOCK];
#pragma unroll
    for (int j = 0; j < VECTORS; ++j) {
        uint4 r;
        r.x = pack_bf16x2(sigmoid(bf16_lo(v[j].x)), sigmoid(bf16_hi(v[j].x)));
        r.y = pack_bf16x2(sigmoid(bf16_lo(v[j].y)), sigmoid(bf16_hi(v[j].y)));
        r.z = pack_bf16x2(sigmoid(bf16_lo(v[j].z)), sigmoid(bf16_hi(v[j].z)));
        r.w = pack_bf16x2(sigmoid(bf16_lo(v[j].w)), sigmoid(bf16_hi(v[j].w)));
        s[base + j * BLOCK] = r;
    }
}

__device__ __forceinline__ unsigned mul_pair(unsigned a, unsigned b) {
    return pack_bf16x2(bf16_lo(a) * bf16_lo(b), bf16_hi(a) * bf16_hi(b));
}

// out = a * b elementwise; used twice (gate * s, then h * up). grid as above.
extern "C" __global__ void __launch_bounds__(BLOCK)
unfused_mul(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* __restrict__ out) {
    const int base = blockIdx.x * BLOCK * VECTORS + threadIdx.x;
    uint4 va[VECTORS], vb[VECTORS];
#pragma unroll
    for (int j = 0; j < VECTORS; ++j) {
        va[j] = a[base + j * BLOCK];
        vb[j] = b[base + j * BLOCK];
    }
#pragma unroll
    for (int j = 0; j < VECTORS; ++j) {
        uint4 r;
        r.x = mul_pair(va[j].x, vb[j].x);
        r.y = mul_pair(va[j].y, vb[j].y);
        r.z = mul_pair(va[j].z, vb[j].z);
        r.w = mul_pair(va[j].w, vb[j].w);
        out[base + j * BLOCK] = r;
    }
}
