// Puzzle 11, matmul: c = a @ b; a is m x k, b is k x n, c is m x n, all row-major.
// Launch: grid (ceil(n / 16), ceil(m / 16)), block (16, 16): one thread per element of c,
// x along columns, y along rows. None of m, n, k is a multiple of 16.
#define TILE 16
// Complete the kernel below, then check it on a GPU:
//     curriculum puzzle check 11 my_matmul.cu
extern "C" __global__ void matmul_kernel(const float* a, const float* b, float* c, int m, int n, int k) {
    // your code here
}
