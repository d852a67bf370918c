// 03 one block per row, row held in registers: each element read once with 16-byte loads
//
// Idea against 02: the row never comes back from memory. Each thread loads VPT float4 vectors of
// the row into registers (16-byte loads, coalesced across the warp: lane i takes bytes 16i..16i+15
// of a 512-byte stretch), all VPT loads in flight before the first use. The max and the sum are
// then two block reductions over registers, and the output is written from the same registers. With
// the whole row on chip the online rescale of 02 buys nothing: the exact max is known before any
// exp, so this goes back to max-then-sum, each a register loop. The block size follows the row:
// threads = cols / (4 * VPT), so every thread holds 4 * VPT values.
//
// Expected bound: 32768 x 4096 fp32 moves 1.07 GB (512 MiB read, 512 MiB written), about 0.25 ms at
// the about 4.26 TB/s copy ceiling measured on this card (a lead). Memory now sees exactly the work
// model's bytes, so what is left is keeping enough bytes in flight: at cols = 4096 and VPT = 4, a
// block of 256 threads issues 16 KiB of loads at once and about 8 blocks share an SM, well above
// the roughly 25 KiB per SM that Little's law asks (4.26 TB/s * ~0.8 us / 132 SMs). The loss is the
// pause between a block's loads and its stores, which the other resident blocks cover. Expect about
// 0.29 ms, 85-90% of copy. FLOPs about 5 an element (exp counted as one), negligible.
//
// Size constraints: cols a multiple of 512 (VPT = 4) or 1024 (VPT = 8), so that the block is whole
// warps; cols <= 1024 * 4 * VPT, i.e. at most 16384 with VPT = 4 and 32768 with VPT = 8 (the launch
// takes VPT = 8 above 8192). Rows 16-byte aligned, which cols % 4 == 0 gives. Values finite.

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Each reduction owns its scratch array, so no barrier is needed after reading the partials.
__device__ __forceinline__ float block_max(float v, float* partials) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0) partials[warp] = v;
    __syncthreads();
    return warp_max(lane < (blockDim.x >> 5) ? partials[lane] : neg_inf());
}

__device__ __forceinline__ float block_sum(float v, float* partials) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) partials[warp] = v;
    __syncthreads();
    return warp_sum(lane < (blockDim.x >> 5) ? partials[lane] : 0.0f);
}

__device__ __forceinline__ float max4(float4 v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }

// blockDim.x * VPT * 4 == cols (checked by the launch); grid = rows.
template <int VPT>
__device__ __forceinline__ void softmax_row(const float* __restrict__ x, float* __restrict__ y, int cols) {
    static_assert(VPT >= 1, "each thread holds at least one float4");
    static_assert(VPT * 4 <= 32, "32 floats a thread at most: a 1024-thread block leaves each thread "
                                 "64 registers, and the row must fit in them without spilling");
    __shared__ float max_partials[32];
    __shared__ float sum_partials[32];
    const size_t base = static_cast<size_t>(blockIdx.x) * cols;
    const float4* xr = reinterpret_cast<const float4*>(x + base);
    float4* yr = reinterpret_cast<float4*>(y + base);
    const int stride = blockDim.x;

    float4 v[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) v[k] = xr[k * stride + threadIdx.x];

    float m = neg_inf();
#pragma unroll
    for (int k = 0; k < VPT; ++k) m = fmaxf(m, max4(v[k]));
    m = block_max(m, max_partials);

    float l = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        v[k].x = __expf(v[k].x - m);
        v[k].y = __expf(v[k].y - m);
        v[k].z = __expf(v[k].z - m);
        v[k].w = __expf(v[k].w - m);
        l += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
    l = block_sum(l, sum_partials);

    const float inv_l = 1.0f / l;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        yr[k * stride + threadIdx.x] = make_float4(v[k].x * inv_l, v[k].y * inv_l, v[k].z * inv_l, v[k].w * inv_l);
    }
}

// VPT = 4: 16 floats a thread, blocks of cols / 16 threads (64 at cols = 1024, 512 at 8192).
extern "C" __global__ void __launch_bounds__(1024)
block_row_vpt4(const float* __restrict__ x, float* __restrict__ y, int cols) {
    softmax_row<4>(x, y, cols);
}

// VPT = 8: 32 floats a thread, blocks of cols / 32 threads (512 at 16384, 1024 at 32768).
extern "C" __global__ void __launch_bounds__(1024)
block_row_vpt8(const float* __restrict__ x, float* __restrict__ y, int cols) {
    softmax_row<8>(x, y, cols);
}
