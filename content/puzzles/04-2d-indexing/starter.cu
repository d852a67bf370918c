// Puzzle 04, 2D indexing: out[i][j] = a[i] + b[j]; out is m x n, row-major.
// Launch: grid (ceil(n / 16), ceil(m / 16)), block (16, 16); x runs along columns (j),
// y along rows (i).
// Complete the kernel below, then check it on a GPU:
//     curriculum puzzle check 04 my_2d-indexing.cu
extern "C" __global__ void outer_add_kernel(const float* a, const float* b, float* out, int m, int n) {
    // your code here
}
