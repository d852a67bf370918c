// Puzzle 12, convolution: out[y][x] = sum over dy, dx in 0..4 of f[dy][dx] * img[y+dy-2][x+dx-2],
// with img taken as 0 outside its h x w. All arrays row-major; f is 5 x 5.
// Launch: grid (ceil(w / 16), ceil(h / 16)), block (16, 16): one thread per output element.
#define RADIUS 2
#define TILE 16
// Complete the kernel below, then check it on a GPU:
//     curriculum puzzle check 12 my_convolution.cu
extern "C" __global__ void conv2d_kernel(const float* img, const float* f, float* out, int h, int w) {
    // your code here
}
