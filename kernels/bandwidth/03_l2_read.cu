// 03 L2 read bandwidth: 128-bit loads that bypass the L1, over a working set that fits the L2
//
// Idea: a buffer of `kib` KiB (4 to 32 MiB, under the 50 MB L2) is split into 8 KiB chunks,
// one per block; each thread reads its 2 uint4 of the chunk `passes` times with
// ld.global.cg.v4 (cached in L2 only), 8 passes (16 loads) issued before their values are
// used.
// The loads are inline PTX, and the vector each load reads rotates with the pass (vector
// (t + 32 p + 256 k) mod 512 of the block's chunk for thread t, pass p, load k): no two loads of a
// loop iteration share an address, and no address is loop-invariant, so neither the compiler
// nor ptxas can merge or hoist a load (with a fixed address per thread, ptxas did: it kept one
// load per vector). A warp's 32 lanes still read 32 consecutive 16-byte vectors. All four
// words of every vector go into the thread's sum (two IADD3), so no load is narrowed.
// The L2 is not flushed between repetitions, so after the first pass every load is an
// L2 hit, and with the L1 bypassed every load crosses the SM-to-L2 crossbar.
//
// Check: words in [0, 2^16); a thread's sum covers every word it read (passes x 2 x 4 words
// < 2^27); the reference counts each thread's reads of each vector of its chunk.
//
// Expected bound: L2 bandwidth. Bytes = kib x 1024 x passes = 16 MiB x 256 = 4.29 GB at the
// headline. Estimate: the L2 hit bandwidth of H100-class parts is not on the datasheet and is
// commonly measured at some 7-10 TB/s (lines in the far partition cross between the two
// halves of the L2), so ~0.45-0.6 ms; 4 MiB takes a quarter of that, still 25 launch costs.
//
// Size constraints: kib a multiple of 8 (whole chunks); grid = kib / 8 blocks of 256 threads;
// passes a multiple of 8. Registers (nvcc 13.0, sm_90a, -Xptxas -v): 32 per thread, no
// spills, no shared memory.

constexpr int THREADS = 256;
constexpr int VECS = 2;                    // uint4 per thread: 8 KiB per block
constexpr int CH = THREADS * VECS;         // uint4 read by one block
constexpr int UNROLL = 8;
static_assert(THREADS % 32 == 0, "a block is a whole number of warps");
static_assert((CH & (CH - 1)) == 0 && CH % 32 == 0, "the rotation wraps with a mask");

extern "C" __global__ void __launch_bounds__(THREADS)
l2_read(const uint4* __restrict__ src, unsigned* __restrict__ out, int passes) {
    const unsigned char* chunk =
        reinterpret_cast<const unsigned char*>(src + (long long)blockIdx.x * CH);
    constexpr unsigned MASK = CH * 16 - 1;             // bytes of the chunk, minus one
    const unsigned mine = threadIdx.x * 16;
    unsigned sum = 0;
    for (int p = 0; p < passes; p += UNROLL) {
        const unsigned rot = static_cast<unsigned>(p) * 512;  // 32 vectors a pass
        uint4 v[UNROLL][VECS];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int k = 0; k < VECS; ++k) {
                const unsigned off = (mine + rot + u * 512 + k * THREADS * 16) & MASK;
                asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(v[u][k].x), "=r"(v[u][k].y), "=r"(v[u][k].z), "=r"(v[u][k].w)
                             : "l"(chunk + off));
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int k = 0; k < VECS; ++k) sum += (v[u][k].x + v[u][k].y) + (v[u][k].z + v[u][k].w);
        }
    }
    out[(long long)blockIdx.x * THREADS + threadIdx.x] = sum;
}
