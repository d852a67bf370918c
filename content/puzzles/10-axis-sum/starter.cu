// Puzzle 10, axis sum: out[j] = a[0][j] + a[1][j] + ... + a[m-1][j]; a is m x n, row-major.
// Launch: grid (ceil(n / 32)), block (32, 8): each block owns 32 columns; its 8 rows of
// threads share the work down the column.
// Complete the kernel below, then check it on a GPU:
//     curriculum puzzle check 10 my_axis-sum.cu
extern "C" __global__ void colsum_kernel(const float* a, float* out, int m, int n) {
    // your code here
}
