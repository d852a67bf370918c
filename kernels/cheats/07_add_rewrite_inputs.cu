// 07 add, inputs rewritten so that a reference computed afterwards agrees
//
// The cheat: a kernel cannot read a reference that does not exist yet, but it can change
// the inputs the reference will be computed from. This one skips y, writes out = 2x, and
// sets y = x: a harness that computes x + y from the same buffers after the launch gets
// 2x and accepts it.
//
// The harness's answer: `inputs-modified`. The reference is computed from float64 copies
// of the inputs taken before the launch, so out = 2x fails the tolerance; the harness then
// compares the inputs with those copies and names the ones the kernel wrote.
//
// Expected bound: memory, 12n bytes; refused before it is timed.
// Size constraints: any n >= 1 (the tail is guarded).

constexpr int BLOCK = 256;

extern "C" __global__ void __launch_bounds__(BLOCK)
add(const float* __restrict__ x, float* __restrict__ y, float* __restrict__ out,
    long long n) {
    long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) {
        float v = x[i];
        out[i] = 2.0f * v;
        y[i] = v;
    }
}
