// Puzzle 07, pooling: out[i] = a[i-7] + a[i-6] + ... + a[i]; terms before a[0] are 0.
// Launch: grid (ceil(n / 256)), block (256). Each block needs its 256 elements and the
// 7 before them: load them once into shared memory.
#define WINDOW 8
// Complete the kernel below, then check it on a GPU:
//     curriculum puzzle check 07 my_pooling.cu
extern "C" __global__ void pool_kernel(const float* a, float* out, int n) {
    // your code here
}
