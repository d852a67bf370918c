// Puzzle 13, histogram: counts[v] = how many of x[0 .. n-1] equal v, for v in 0..255.
// counts starts at zero (the only output in the series that does). Launch: grid (264),
// block (256), far fewer threads than values.
#define BINS 256
// Complete the kernel below, then check it on a GPU:
//     curriculum puzzle check 13 my_histogram.cu
extern "C" __global__ void histogram_kernel(const int* x, int* counts, int n) {
    // your code here
}
