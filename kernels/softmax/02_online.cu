// 02 online softmax: the max and the sum in one pass with a running-max rescale, then normalise
//
// Idea against 01: the max pass and the sum pass become one. Each thread keeps a state (m, l): m
// the largest value it has seen, l the sum of exp(x - m) over what it has seen. A new value v above
// m rescales the sum to the new max, l <- l * exp(m - v) + 1; otherwise l <- l + exp(v - m). Both
// cases need exp(-|v - m|), so each element costs one exp. Threads then merge their states
// pairwise: m = max(m1, m2), l = l1 * exp(m1 - m) + l2 * exp(m2 - m). That merge is exact, so the
// result equals 01's up to rounding. One read for the statistics, one for the output.
//
// Expected bound: 32768 x 4096 fp32 moves 1.07 GB by the work model, about 0.25 ms at the about
// 4.26 TB/s copy ceiling (a lead measured on this card). The kernel asks for 2 reads + 1 write =
// 1.61 GB, so 0.38 ms if the re-read went to DRAM; the rows in flight (17 MiB) fit in L2, so the
// second read mostly hits there. Expect about 0.33 ms, 75% of copy: one L2 round trip and one block
// reduction fewer than 01. FLOPs stay near 6 an element, exp counted as one.
//
// Size constraints: any cols >= 1, any rows up to the grid limit; values finite (the rescale
// compares values, and -inf - -inf is NaN). Block size fixed below.

constexpr int kThreads = 256;
static_assert(kThreads % 32 == 0, "the block reduction merges whole warps");
static_assert(kThreads <= 1024, "a block holds at most 1024 threads");
static_assert(kThreads / 32 <= 32, "one warp finishes the reduction, so at most 32 warp partials");

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

// Merge (m2, l2) into (m, l). A state that has seen nothing is (-inf, 0); the equality tests keep
// exp(-inf - -inf) = NaN out of the sum and skip the exp on the side that holds the max.
__device__ __forceinline__ void merge_state(float& m, float& l, float m2, float l2) {
    const float mm = fmaxf(m, m2);
    l = (m == mm ? l : l * __expf(m - mm)) + (m2 == mm ? l2 : l2 * __expf(m2 - mm));
    m = mm;
}

__device__ __forceinline__ void warp_merge(float& m, float& l) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
        const float l2 = __shfl_xor_sync(0xffffffffu, l, offset);
        merge_state(m, l, m2, l2);
    }
}

__device__ __forceinline__ void block_merge(float& m, float& l, float* m_partials, float* l_partials) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    warp_merge(m, l);
    if (lane == 0) {
        m_partials[warp] = m;
        l_partials[warp] = l;
    }
    __syncthreads();
    m = lane < kThreads / 32 ? m_partials[lane] : neg_inf();
    l = lane < kThreads / 32 ? l_partials[lane] : 0.0f;
    warp_merge(m, l);
}

// grid = rows, block = kThreads.
extern "C" __global__ void __launch_bounds__(kThreads)
online(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float m_partials[32];
    __shared__ float l_partials[32];
    const size_t base = static_cast<size_t>(blockIdx.x) * cols;
    const float* xr = x + base;
    float* yr = y + base;

    float m = neg_inf();
    float l = 0.0f;
    for (int j = threadIdx.x; j < cols; j += kThreads) {
        const float v = xr[j];
        const float e = __expf(-fabsf(v - m));  // exp(smaller - larger); 0 on the first value
        if (v > m) {
            l = l * e + 1.0f;
            m = v;
        } else {
            l += e;
        }
    }
    block_merge(m, l, m_partials, l_partials);

    const float inv_l = 1.0f / l;
    for (int j = threadIdx.x; j < cols; j += kThreads) yr[j] = __expf(xr[j] - m) * inv_l;
}
