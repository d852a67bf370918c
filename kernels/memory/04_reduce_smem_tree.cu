// 04 reduce, shared-memory tree: a block sums its 256 partials, then one atomic per block
//
// Idea against 03: the 256 partials of a block are summed in shared memory by a tree
// (256 -> 128 -> ... -> 1, a barrier between levels), and only thread 0 touches the
// global total. Atomics fall from n / 16 to n / 4096: 2^16 at n = 2^28.
//
// Expected bound: memory again. Bytes = 4n read, 0.22 ms at n = 2^28 by the datasheet's
// 4.8 TB/s (estimate); 2^16 atomics at one per L2 clock is about 0.04 ms, now small. The
// tree costs 8 barriers and 8 shared-memory rounds per block, overlapped with other
// blocks' loads, so the estimate is a time within some 20% of the read floor.
// Accuracy: tree sums of 4096 values, then 2^16 additions into the total: far inside
// the suite's tolerance (set for 03).
//
// Size constraints: n a multiple of 4096; BLOCK a power of two (the tree halves it);
// grid = n / 4096 blocks; `out` zeroed by the launcher.

constexpr int BLOCK = 256;
constexpr int VECS = 4;
static_assert((BLOCK & (BLOCK - 1)) == 0, "the tree halves the block at every level");

extern "C" __global__ void __launch_bounds__(BLOCK)
reduce_smem_tree(const float4* __restrict__ x, float* __restrict__ out) {
    __shared__ float partial[BLOCK];
    long long base = (long long)blockIdx.x * (BLOCK * VECS) + threadIdx.x;
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        float4 v = x[base + k * BLOCK];
        acc += (v.x + v.y) + (v.z + v.w);
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd(out, partial[0]);
    }
}
