// 01 copy, one float per thread: the simplest kernel that is limited by memory alone
//
// Idea: thread i reads in[i] and writes out[i]. Consecutive threads touch consecutive
// floats, so each warp asks for one aligned 128-byte line per load and per store: every
// byte fetched is used. There is no arithmetic to hide, so the only question is how close
// a plain load/store stream gets to the card's copy bandwidth.
//
// Expected bound: memory. Bytes = 4n read + 4n written. At the headline n = 2^28
// (1 GiB each way), an estimate from the datasheet's 4.8 TB/s: 2.15 GB / 4.8 TB/s
// = 0.45 ms; a real copy lands some 10-15% under the datasheet, so expect about 0.5 ms.
// With 4 bytes per thread, 2^28 threads each issue one 4-byte load and store: the
// instruction count is what 02 attacks.
//
// Size constraints: any n >= 1 (the tail is guarded); the grid has ceil(n / 256)
// blocks, under the 2^31 - 1 limit of gridDim.x for n < 2^39.

constexpr int BLOCK = 256;
static_assert(BLOCK % 32 == 0, "a block is a whole number of warps");

extern "C" __global__ void __launch_bounds__(BLOCK)
copy_scalar(const float* __restrict__ in, float* __restrict__ out, long long n) {
    long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) {
        out[i] = in[i];
    }
}
