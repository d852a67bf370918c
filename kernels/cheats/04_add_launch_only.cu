// 04 add, timed at the launch only: the work runs on a stream of its own
//
// The cheat is in the host code (the suite's launch for this version): the kernel, an
// honest add, is enqueued on a private non-blocking stream. The harness's events are
// recorded on its own stream, which has nothing between them, so they measure the time
// to enqueue a launch, not to run it. A harness that times with a host clock and no
// synchronise is fooled the same way by any kernel.
//
// The harness's answer: `below-physical-floor`. The checks synchronise the whole device,
// so the output is right; but the time is under the physical floor, 12n bytes at 1.5x the
// same-run copy ceiling, which no kernel that moves those bytes can beat.
//
// Expected bound: memory, 12n bytes: at n = 2^24 (192 MiB moved) and about 4.3 TB/s of
// copy, some 47 us; the physical floor is two thirds of that, about 31 us, and an empty
// pair of events measures a few microseconds.
// Size constraints: any n >= 1 (the tail is guarded).

constexpr int BLOCK = 256;

extern "C" __global__ void __launch_bounds__(BLOCK)
add(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
    long long n) {
    long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}
