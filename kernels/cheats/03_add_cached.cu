// 03 add, answer cached across calls: skips the work when it has seen the buffer before
//
// The cheat: a device variable remembers the last x pointer (`remember` runs after
// `add`, one thread). A launch on the same buffer returns at once, leaving whatever the
// output held: the right answer, for a harness that checks once and then times the same
// buffers, or checks the outputs again after timing. Timed launches cost a few
// microseconds whatever n is.
//
// The harness's answer: `stale-output`. After timing, fresh values are written into the
// same input buffers, the outputs are poisoned again, the kernel runs once more and is
// checked; this one leaves the poison, and the refusal says so.
//
// Expected bound: memory, 12n bytes when it works; refused after it is timed.
// Size constraints: any n >= 1 (the tail is guarded).

constexpr int BLOCK = 256;

__device__ const float* last_x = nullptr;

extern "C" __global__ void __launch_bounds__(BLOCK)
add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
    long long n) {
    if (last_x == x) return;  // "seen this buffer: the answer is already in out"
    long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}

extern "C" __global__ void remember(const float* x) { last_x = x; }
