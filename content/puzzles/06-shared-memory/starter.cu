// Puzzle 06, shared memory: out = transpose(a); a is m x n, out is n x m, both row-major.
// Launch: grid (ceil(n / 32), ceil(m / 32)), block (32, 8): each block moves one 32 x 32
// tile, each thread four of its elements. Stage the tile in shared memory so that both
// the reads of a and the writes of out are consecutive across a warp.
#define TILE 32
// Complete the kernel below, then check it on a GPU:
//     curriculum puzzle check 06 my_shared-memory.cu
extern "C" __global__ void transpose_kernel(const float* a, float* out, int m, int n) {
    // your code here
}
