// Puzzle 13, reference solution: each block counts into its own 256 bins in shared
// memory (shared-memory atomics, contended only within the block), then adds its
// non-zero bins to the global counts: 256 global atomics per block instead of one
// per value.
#define BINS 256
extern "C" __global__ void histogram_kernel(const int* x, int* counts, int n) {
    __shared__ int local[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
    __syncthreads();
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        atomicAdd(&local[x[i]], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) {
        if (local[b] != 0) atomicAdd(&counts[b], local[b]);
    }
}
