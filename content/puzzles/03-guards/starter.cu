// Puzzle 03, guards: out[i] = max(a[i], 0).
// Launch: grid (ceil(n / 256)), block (256); n is not a multiple of 256, so the last
// block has threads with no element.
// Complete the kernel below, then check it on a GPU:
//     curriculum puzzle check 03 my_guards.cu
extern "C" __global__ void relu_kernel(const float* a, float* out, int n) {
    // your code here
}
