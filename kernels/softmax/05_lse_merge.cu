// 05 log-sum-exp merge: softmax of a row from two partial states computed over its two halves
//
// Idea against 03: the row is split in two and each half is done as if the other did not exist: the
// first half of the block's threads sees only columns [0, cols/2), the second only the rest. Each
// half produces a partial state: m_h, the max of its half; l_h, the sum of exp(x - m_h) over its
// half; and an unnormalised accumulator, the vector exp(x - m_h) held in its registers. The two
// states then merge, exactly: m = max(m_a, m_b), l = l_a exp(m_a - m) + l_b exp(m_b - m), and each
// half rescales its accumulator by exp(m_h - m) / l. (m + log l is the row's log-sum-exp; the merge
// is that of two log-sum-exps.) This is the step that lets attention split a long key sequence
// across workers and combine their outputs afterwards; here the halves share a block and meet in
// shared memory, where split-KV decoding would pass (m, l, accumulator) through global memory to a
// second kernel. Tested against a dense float64 softmax of the whole row.
//
// Expected bound: the same bytes as 03, 1.07 GB at 32768 x 4096 fp32, about 0.25 ms at the about
// 4.26 TB/s copy ceiling measured on this card (a lead). The extra work is on chip: one more
// barrier to swap the two states and one exp per thread to rescale. Expect 03's time plus a few
// percent: about 0.30 ms, 80-85% of copy.
//
// Size constraints: as 03, and each half of the block must be whole warps: cols a multiple of 1024
// (VPT = 4) or 2048 (VPT = 8); cols <= 16384 with VPT = 4, 32768 with VPT = 8 (the launch takes VPT
// = 8 above 8192). Values finite.

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

// A partial softmax state over some subset of a row; its accumulator lives with the caller.
struct SoftmaxState {
    float m;  // max over the subset
    float l;  // sum over the subset of exp(x - m)
};

__device__ __forceinline__ SoftmaxState lse_merge(SoftmaxState a, SoftmaxState b) {
    const float m = fmaxf(a.m, b.m);
    return SoftmaxState{m, a.l * __expf(a.m - m) + b.l * __expf(b.m - m)};
}

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

// Reductions over one half of the block: warps [0, W/2) or [W/2, W). Each owns its scratch.
__device__ __forceinline__ float half_max(float v, float* partials) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int half_warps = blockDim.x >> 6;
    v = warp_max(v);
    if (lane == 0) partials[warp] = v;
    __syncthreads();
    const int first = warp < half_warps ? 0 : half_warps;
    return warp_max(lane < half_warps ? partials[first + lane] : neg_inf());
}

__device__ __forceinline__ float half_sum(float v, float* partials) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int half_warps = blockDim.x >> 6;
    v = warp_sum(v);
    if (lane == 0) partials[warp] = v;
    __syncthreads();
    const int first = warp < half_warps ? 0 : half_warps;
    return warp_sum(lane < half_warps ? partials[first + lane] : 0.0f);
}

// blockDim.x * VPT * 4 == cols (checked by the launch); grid = rows. Thread t of half h holds
// float4 number h * (cols / 8) + k * (blockDim.x / 2) + t of the row, k < VPT.
template <int VPT>
__device__ __forceinline__ void softmax_row_two_halves(const float* __restrict__ x, float* __restrict__ y, int cols) {
    static_assert(VPT >= 1, "each thread holds at least one float4");
    static_assert(VPT * 4 <= 32, "32 floats a thread at most: a 1024-thread block leaves each thread "
                                 "64 registers, and the row must fit in them without spilling");
    __shared__ float max_partials[32];
    __shared__ float sum_partials[32];
    __shared__ SoftmaxState states[2];
    const int half_threads = blockDim.x >> 1;
    const int half = threadIdx.x < half_threads ? 0 : 1;
    const int t = threadIdx.x - half * half_threads;
    const size_t base = static_cast<size_t>(blockIdx.x) * cols + static_cast<size_t>(half) * (cols >> 1);
    const float4* xr = reinterpret_cast<const float4*>(x + base);
    float4* yr = reinterpret_cast<float4*>(y + base);

    float4 acc[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) acc[k] = xr[k * half_threads + t];

    // This half's state, as if the other half did not exist.
    float m = neg_inf();
#pragma unroll
    for (int k = 0; k < VPT; ++k) m = fmaxf(m, fmaxf(fmaxf(acc[k].x, acc[k].y), fmaxf(acc[k].z, acc[k].w)));
    m = half_max(m, max_partials);
    float l = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        acc[k].x = __expf(acc[k].x - m);
        acc[k].y = __expf(acc[k].y - m);
        acc[k].z = __expf(acc[k].z - m);
        acc[k].w = __expf(acc[k].w - m);
        l += (acc[k].x + acc[k].y) + (acc[k].z + acc[k].w);
    }
    const SoftmaxState mine{m, half_sum(l, sum_partials)};

    // Swap states between the halves and merge.
    if (t == 0) states[half] = mine;
    __syncthreads();
    const SoftmaxState whole = lse_merge(states[0], states[1]);
    const float scale = __expf(mine.m - whole.m) / whole.l;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        yr[k * half_threads + t] = make_float4(acc[k].x * scale, acc[k].y * scale, acc[k].z * scale, acc[k].w * scale);
    }
}

// VPT = 4: 16 floats a thread, blocks of cols / 16 threads (64 at cols = 1024, 512 at 8192).
extern "C" __global__ void __launch_bounds__(1024)
lse_merge_vpt4(const float* __restrict__ x, float* __restrict__ y, int cols) {
    softmax_row_two_halves<4>(x, y, cols);
}

// VPT = 8: 32 floats a thread, blocks of cols / 32 threads (512 at 16384, 1024 at 32768).
extern "C" __global__ void __launch_bounds__(1024)
lse_merge_vpt8(const float* __restrict__ x, float* __restrict__ y, int cols) {
    softmax_row_two_halves<8>(x, y, cols);
}
