// Puzzle 09, prefix sum: out[r][i] = a[r][0] + a[r][1] + ... + a[r][i], rows of 1024.
// Launch: grid (rows), block (1024): one block per row, one thread per element.
// Complete the kernel below, then check it on a GPU:
//     curriculum puzzle check 09 my_prefix-sum.cu
extern "C" __global__ void scan_kernel(const float* a, float* out, int rows) {
    // your code here
}
