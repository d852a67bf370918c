// Puzzle 12, reference solution: the block loads its 16 x 16 outputs' inputs, a
// 20 x 20 tile with a 2-element halo (zeros outside the image), and the 5 x 5
// filter into shared memory; each thread then does 25 multiply-adds from there.
#define RADIUS 2
#define TILE 16
#define SPAN (TILE + 2 * RADIUS)
extern "C" __global__ void conv2d_kernel(const float* img, const float* f, float* out, int h,
                                         int w) {
    __shared__ float tile[SPAN][SPAN];
    __shared__ float fs[2 * RADIUS + 1][2 * RADIUS + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int x0 = blockIdx.x * TILE, y0 = blockIdx.y * TILE;
    if (ty <= 2 * RADIUS && tx <= 2 * RADIUS) fs[ty][tx] = f[ty * (2 * RADIUS + 1) + tx];
    for (int yy = ty; yy < SPAN; yy += TILE) {
        for (int xx = tx; xx < SPAN; xx += TILE) {
            int gy = y0 + yy - RADIUS, gx = x0 + xx - RADIUS;
            tile[yy][xx] = (gy >= 0 && gy < h && gx >= 0 && gx < w)
                               ? img[(long long)gy * w + gx] : 0.0f;
        }
    }
    __syncthreads();
    int x = x0 + tx, y = y0 + ty;
    if (x >= w || y >= h) return;
    float acc = 0.0f;
#pragma unroll
    for (int dy = 0; dy <= 2 * RADIUS; ++dy) {
#pragma unroll
        for (int dx = 0; dx <= 2 * RADIUS; ++dx) acc += fs[dy][dx] * tile[ty + dy][tx + dx];
    }
    out[(long long)y * w + x] = acc;
}
