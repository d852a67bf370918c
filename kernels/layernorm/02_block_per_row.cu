// 02 one block per row: coalesced loads, the row's sums reduced in a shared-memory tree
//
// Idea against 01: a row gets 256 threads instead of one, and thread t takes columns t, t + 256, t
// + 512, ... so the 32 lanes of a warp read 128 consecutive bytes: one cache line a request, not
// 32. The statistics need the whole block's sum, so each of the two sums (x, then (x - mean)^2)
// goes through a shared-memory tree: 256 partials halved 8 times, a barrier after each halving. The
// three loops over the row stay as in 01 (mean, variance, write).
//
// Expected bound: 32768 x 4096 fp32 moves 1.07 GB by the work model, about 0.25 ms at the about
// 4.26 TB/s copy ceiling measured on this card (a lead). The kernel asks for 3 reads + 1 write,
// 2.15 GB, but with about 8 blocks per SM the rows in flight are 132 * 8 * 16 KiB = 17 MiB, inside
// the L2, so the two re-reads mostly hit there and DRAM sees close to the work model's bytes. What
// costs time is the sequence inside a block: load loop, 10 barriers, second loop, 10 barriers,
// third loop, with each loop keeping only a few scalar loads in flight per thread. Expect about
// 0.40 ms, 60% of copy, a sixfold step from 01.
//
// Size constraints: any cols >= 1 and rows < 2^31 (one block a row); the block size must be a power
// of two for the tree, below.

constexpr int kThreads = 256;
static_assert((kThreads & (kThreads - 1)) == 0, "the tree halves the active threads at each step");
static_assert(kThreads >= 64 && kThreads <= 1024, "a block holds at most 1024 threads; fewer than 2 "
                                                  "warps a row would not fill an SM's schedulers");

// Sum of v over the block. The last barrier lets the caller reuse `tree` for the next sum.
__device__ __forceinline__ float tree_sum(float v, float* tree) {
    tree[threadIdx.x] = v;
    __syncthreads();
#pragma unroll
    for (int active = kThreads / 2; active > 0; active >>= 1) {
        if (threadIdx.x < active) tree[threadIdx.x] += tree[threadIdx.x + active];
        __syncthreads();
    }
    const float total = tree[0];
    __syncthreads();
    return total;
}

// grid = rows, block = kThreads.
extern "C" __global__ void __launch_bounds__(kThreads)
block_per_row(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                        float* __restrict__ y, int rows, int cols, float eps) {
    __shared__ float tree[kThreads];
    const size_t base = static_cast<size_t>(blockIdx.x) * cols;
    const float* xr = x + base;
    float* yr = y + base;

    float sum = 0.0f;
    for (int j = threadIdx.x; j < cols; j += kThreads) sum += xr[j];
    const float mean = tree_sum(sum, tree) / cols;

    float sq = 0.0f;
    for (int j = threadIdx.x; j < cols; j += kThreads) {
        const float d = xr[j] - mean;
        sq += d * d;
    }
    const float rstd = rsqrtf(tree_sum(sq, tree) / cols + eps);

    for (int j = threadIdx.x; j < cols; j += kThreads) yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
}
