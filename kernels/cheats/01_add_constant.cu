// 01 add, constant output: every element set to the answer's mean
//
// The cheat: out = x + y with x in [100, 101) and y in [0, 1) is 101 give or take
// about 0.4, so writing 101 everywhere is off by about 0.4% of the answer's norm. A
// harness that accepts a relative error of 1e-2, or an allclose with atol = rtol = 1e-2,
// lets it through, and it moves a third of the bytes of an honest add (no reads at all).
//
// The harness's answer: `constant-output`. The inputs are fresh random numbers whose sum
// varies, and an output whose spread is under 1% of the reference's is refused before
// any tolerance is consulted.
//
// Expected bound: memory, 4n bytes written; refused before it is timed.
// Size constraints: any n >= 1 (the tail is guarded).

constexpr int BLOCK = 256;

extern "C" __global__ void __launch_bounds__(BLOCK)
add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
    long long n) {
    long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[i] = 101.0f;
}
