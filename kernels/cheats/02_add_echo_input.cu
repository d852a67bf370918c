// 02 add, input returned: out is a copy of x
//
// The cheat: with x in [100, 101) and y in [0, 1), x alone is within about 0.6% of
// x + y in norm, so a copy of x passes a relative tolerance of 1e-2. A real case of the
// same shape: a residual add whose second term is small, or a kernel that returns its
// input buffer when it "fails fast" on an unsupported shape.
//
// The harness's answer: `input-echo`. An output bit-equal to an input of the same
// shape and type is refused, unless the reference itself equals that input (a copy
// benchmark, where returning the input is the job).
//
// Expected bound: memory, 8n bytes; refused before it is timed.
// Size constraints: any n >= 1 (the tail is guarded).

constexpr int BLOCK = 256;

extern "C" __global__ void __launch_bounds__(BLOCK)
add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
    long long n) {
    long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[i] = x[i];
}
