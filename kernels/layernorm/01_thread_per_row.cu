// 01 one thread per row: a correct LayerNorm that leaves most of the memory system idle
//
// Idea: the textbook, one row to a thread. y = (x - mean) / sqrt(var + eps) * gamma + beta over
// each row, eps = 1e-5, with the variance taken the two-pass way: a loop for the mean, a loop for
// the mean of (x - mean)^2, a loop to write. It is correct, and it is the baseline a take-home
// submission often starts from.
//
// Expected bound: the work model counts x read once and y written once (gamma and beta, 2 * cols
// floats, are included and are 0.003% of it): at 32768 x 4096 fp32, 1.07 GB, about 0.25 ms at the
// about 4.26 TB/s copy ceiling measured on this card (a lead). This kernel is far from it, for two
// reasons. Parallelism: 32768 threads are 1024 warps, under 8 per SM, too few to hide DRAM latency.
// Access pattern: the 32 lanes of a warp read 32 different rows, 16 KiB apart, so each warp-wide
// access to x touches 32 cache lines, which the L1 serves as 32 separate requests (later steps
// reuse the lines while they stay in L1; gamma[j] and beta[j] are one broadcast each). At about one
// line request a cycle per SM, 3 loads + 1 store an element cost 128 cycles for the 32 elements of
// one warp step, 256 bytes of the work model: about 2 B/cycle per SM, 0.5 TB/s for 132 SMs at 2 GHz
// before any latency. Expect about 0.4 TB/s: about 2.7 ms, 10% of copy.
//
// Size constraints: any rows and cols >= 1 (rows < 2^31); the block size below only sets how many
// rows a block takes.

constexpr int kThreads = 128;
static_assert(kThreads % 32 == 0, "whole warps: a partial warp would idle lanes for nothing");

// grid = ceil(rows / kThreads), block = kThreads.
extern "C" __global__ void __launch_bounds__(kThreads)
thread_per_row(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                         float* __restrict__ y, int rows, int cols, float eps) {
    const int row = blockIdx.x * kThreads + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + static_cast<size_t>(row) * cols;
    float* yr = y + static_cast<size_t>(row) * cols;

    float sum = 0.0f;
    for (int j = 0; j < cols; ++j) sum += xr[j];
    const float mean = sum / cols;

    float sq = 0.0f;
    for (int j = 0; j < cols; ++j) {
        const float d = xr[j] - mean;
        sq += d * d;
    }
    const float rstd = rsqrtf(sq / cols + eps);

    for (int j = 0; j < cols; ++j) yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
}
