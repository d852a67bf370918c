// Puzzle 01, map: out[i] = 2 * a[i] + 1.
// Launch: grid (n / 256), block (256); n is a multiple of 256, so every thread has
// exactly one element.
// Complete the kernel below, then check it on a GPU:
//     curriculum puzzle check 01 my_map.cu
extern "C" __global__ void map_kernel(const float* a, float* out, int n) {
    // your code here
}
