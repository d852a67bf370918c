// Puzzle 08, dot product: out[0] = a[0] * b[0] + ... + a[n-1] * b[n-1].
// Launch: grid (1), block (1024): one block does it all. out[0] starts as NaN: write
// it once, after the block has combined its partial sums.
// Complete the kernel below, then check it on a GPU:
//     curriculum puzzle check 08 my_dot-product.cu
extern "C" __global__ void dot_kernel(const float* a, const float* b, float* out, int n) {
    // your code here
}
