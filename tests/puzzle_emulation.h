// CPU emulation of the CUDA subset the puzzles' solutions use, so their logic is
// checked where no GPU is present: blocks run one after another and the threads of a
// block run as std::threads; __syncthreads is a barrier over the block, a warp
// shuffle is an exchange between two barriers over the warp, and __shared__ is a
// static (one copy, which is right because blocks never overlap). A thread that
// returns drops out of both barriers, as an exited CUDA thread does. It checks
// indexing, guards, synchronisation and reduction order, not speed or memory
// ordering between blocks.
#include <atomic>
#include <barrier>
#include <cmath>
#include <math.h>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

struct dim3 { unsigned x = 1, y = 1, z = 1; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
struct Block {
    std::unique_ptr<std::barrier<>> bar;
    std::vector<std::unique_ptr<std::barrier<>>> warps;
    double buf[1024];
};
thread_local dim3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
thread_local Block* cur;
thread_local int t_lane, t_warp;

#define __global__
#define __device__
#define __shared__ static
#define __launch_bounds__(...)
inline void __syncthreads() { cur->bar->arrive_and_wait(); }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
template <class T> T shfl_from(T v, int src) {
    cur->buf[t_warp * 32 + t_lane] = (double)v;
    cur->warps[t_warp]->arrive_and_wait();
    T r = (T)cur->buf[t_warp * 32 + src];
    cur->warps[t_warp]->arrive_and_wait();
    return r;
}
template <class T> T __shfl_down_sync(unsigned, T v, int d) { return shfl_from(v, t_lane + d < 32 ? t_lane + d : t_lane); }
template <class T> T __shfl_up_sync(unsigned, T v, int d) { return shfl_from(v, t_lane - d >= 0 ? t_lane - d : t_lane); }
template <class T> T __shfl_xor_sync(unsigned, T v, int d) { return shfl_from(v, t_lane ^ d); }
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }

template <class... P, class... A>
void launch(void (*k)(P...), dim3 g, dim3 b, A... args) {
    gridDim = g; blockDim = b;
    int n = b.x * b.y * b.z;
    for (unsigned bz = 0; bz < g.z; ++bz)
    for (unsigned by = 0; by < g.y; ++by)
    for (unsigned bx = 0; bx < g.x; ++bx) {
        Block blk;
        blk.bar = std::make_unique<std::barrier<>>(n);
        for (int w = 0; w < (n + 31) / 32; ++w) blk.warps.push_back(std::make_unique<std::barrier<>>(std::min(32, n - 32 * w)));
        std::vector<std::thread> ts;
        for (int t = 0; t < n; ++t) {
            ts.emplace_back([&, t] {
                cur = &blk; blockIdx = dim3(bx, by, bz);
                threadIdx = dim3(t % b.x, (t / b.x) % b.y, t / (b.x * b.y));
                t_lane = t % 32; t_warp = t / 32;
                k(args...);
                cur->warps[t_warp]->arrive_and_drop();
                cur->bar->arrive_and_drop();
            });
        }
        for (auto& th : ts) th.join();
    }
}
