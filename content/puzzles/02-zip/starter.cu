// Puzzle 02, zip: out[i] = a[i] * b[i].
// Launch: grid (n / 256), block (256); n is a multiple of 256.
// Complete the kernel below, then check it on a GPU:
//     curriculum puzzle check 02 my_zip.cu
extern "C" __global__ void zip_kernel(const float* a, const float* b, float* out, int n) {
    // your code here
}
