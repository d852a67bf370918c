// 03 reduce, one atomic per thread: every thread adds its partial sum into one float
//
// Idea: the most direct parallel sum. Each thread loads four float4 (16 floats, the loads
// of 02, coalesced: vector k of a block is base + k * 256), adds them in registers, then
// does atomicAdd(out, partial). All atomics hit the same address, so the L2 must apply
// them one after another: n / 16 of them.
// Why not one atomic per element: besides 16x more atomics, a float accumulator of 2^28
// values near 0.5 stops growing at 2^24, where adding 0.5 rounds away (ulp 2): the answer
// would be wrong, not only slow. Summing 16 values first keeps every addend well above
// half an ulp of the running total.
//
// Expected bound: the atomics, not memory. Bytes = 4n read (1 GiB at n = 2^28, 0.22 ms
// at 4.8 TB/s). Atomics = n / 16 = 2^24 to one address; an estimate of one per L2 clock
// (about 1.7 GHz) gives 10 ms, some 40x the memory floor.
// Accuracy: 2^24 sequential fp32 additions into a total near 2^27 (ulp 8 to 16), each
// off by up to half an ulp: a random walk of about sqrt(2^24) * 2.3 = 1e4, or 1e-4 of the
// sum 1.3e8. The suite's tolerance is set for this version.
//
// Size constraints: n a multiple of 4096 = 256 threads * 16 floats; grid = n / 4096
// blocks; `out` holds one float and is zeroed by the launcher before every launch.

constexpr int BLOCK = 256;
constexpr int VECS = 4;  // float4 loads per thread
static_assert(BLOCK % 32 == 0, "a block is a whole number of warps");

extern "C" __global__ void __launch_bounds__(BLOCK)
reduce_atomic(const float4* __restrict__ x, float* __restrict__ out) {
    long long base = (long long)blockIdx.x * (BLOCK * VECS) + threadIdx.x;
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        float4 v = x[base + k * BLOCK];
        acc += (v.x + v.y) + (v.z + v.w);
    }
    atomicAdd(out, acc);
}
