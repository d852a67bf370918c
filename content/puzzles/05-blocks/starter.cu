// Puzzle 05, blocks: out[i] = |a[i] - b[i]|.
// Launch: grid (132), block (256), whatever n is: 33,792 threads for n of about
// 16.8 million, so each thread handles many elements.
// Complete the kernel below, then check it on a GPU:
//     curriculum puzzle check 05 my_blocks.cu
extern "C" __global__ void absdiff_kernel(const float* a, const float* b, float* out, int n) {
    // your code here
}
