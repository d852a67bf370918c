// Glue of the capstone decoder: the small kernels between the course's kernels.
//
// The course's kernels take bf16 rows (carried as 16-bit words) and the GEMM writes fp32, so
// a decoder built from them needs a few elementwise and layout kernels in between: the
// embedding gather, RoPE with the QKV split (and, for prefill, the K and V heads repeated for
// the flash kernel, which has no grouped heads), the attention output moved from heads to
// rows, the residual adds, an fp32 -> bf16 rounding, and the argmax that picks the next
// token. None of them does arithmetic worth the name: each is a pass over a few megabytes.
// bf16 values are rounded to nearest even (finite inputs).
//
// Size assumptions (checked by the Python plan, `curriculum.decoder.problems`): head_dim 128
// (64 threads of RoPE pairs a head), rows of a multiple of 8 values, cache slots = T.

#define HEAD_DIM 128
#define HALF 64

__device__ __forceinline__ float bf(unsigned short h) {
    return __uint_as_float(static_cast<unsigned>(h) << 16);
}

__device__ __forceinline__ unsigned short to_bf(float f) {
    unsigned u = __float_as_uint(f);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<unsigned short>(u >> 16);
}

// x[r] = table[ids[r]], one block a row, 16 bytes a thread and step.
extern "C" __global__ void embed(const int* __restrict__ ids, const uint4* __restrict__ table,
                                 uint4* __restrict__ x, int hidden) {
    const int row = blockIdx.x;
    const int vectors = hidden / 8;
    const uint4* src = table + static_cast<size_t>(ids[row]) * vectors;
    for (int i = threadIdx.x; i < vectors; i += blockDim.x) x[static_cast<size_t>(row) * vectors + i] = src[i];
}

// One prompt of S tokens from the fp32 QKV GEMM output (S rows of (hq + 2 hkv) * 128):
// q heads rotated into Q[hq][S][128]; k heads rotated, v heads copied, each into its cache
// slot ((pos0 + s) % T of [hkv][T][128]) and into the G = hq / hkv query heads it serves of
// Krep and Vrep ([hq][S][128], for a flash kernel without grouped heads). rope is
// [position][64] of (cos, sin). Grid (S, hq + 2 hkv), 64 threads: thread i owns dims i, i + 64.
extern "C" __global__ void rope_prefill(const float* __restrict__ qkv, const float2* __restrict__ rope,
                                        unsigned short* __restrict__ q, unsigned short* __restrict__ krep,
                                        unsigned short* __restrict__ vrep, unsigned short* __restrict__ kc,
                                        unsigned short* __restrict__ vc, int S, int hq, int hkv, int T,
                                        int pos0) {
    const int s = blockIdx.x, head = blockIdx.y, i = threadIdx.x;
    const int width = (hq + 2 * hkv) * HEAD_DIM;
    const float* src = qkv + static_cast<size_t>(s) * width + head * HEAD_DIM;
    const int pos = pos0 + s;
    float lo = src[i], hi = src[i + HALF];
    if (head < hq + hkv) {  // q or k: rotate the pair (i, i + 64)
        const float2 cs = rope[static_cast<size_t>(pos) * HALF + i];
        const float a = lo * cs.x - hi * cs.y, b = hi * cs.x + lo * cs.y;
        lo = a;
        hi = b;
    }
    const unsigned short l16 = to_bf(lo), h16 = to_bf(hi);
    if (head < hq) {
        unsigned short* dst = q + (static_cast<size_t>(head) * S + s) * HEAD_DIM;
        dst[i] = l16;
        dst[i + HALF] = h16;
        return;
    }
    const bool is_k = head < hq + hkv;
    const int hk = is_k ? head - hq : head - hq - hkv;
    unsigned short* cache = (is_k ? kc : vc) + (static_cast<size_t>(hk) * T + pos % T) * HEAD_DIM;
    cache[i] = l16;
    cache[i + HALF] = h16;
    const int group = hq / hkv;
    unsigned short* rep = is_k ? krep : vrep;
    for (int g = 0; g < group; ++g) {
        unsigned short* dst = rep + (static_cast<size_t>(hk * group + g) * S + s) * HEAD_DIM;
        dst[i] = l16;
        dst[i + HALF] = h16;
    }
}

// One decode step of B sequences at position *pos (all at the same position): the bf16 GEMV
// output qkv [B][(hq + 2 hkv) * 128] split into q [B][hq][128] (rotated) and the cache slot
// *pos % T of k (rotated) and v in [B][hkv][T][128]. Grid (B, hq + 2 hkv), 64 threads.
extern "C" __global__ void rope_decode(const unsigned short* __restrict__ qkv, const float2* __restrict__ rope,
                                       const int* __restrict__ pos_ptr, unsigned short* __restrict__ q,
                                       unsigned short* __restrict__ kc, unsigned short* __restrict__ vc,
                                       int hq, int hkv, int T) {
    const int b = blockIdx.x, head = blockIdx.y, i = threadIdx.x;
    const int width = (hq + 2 * hkv) * HEAD_DIM;
    const unsigned short* src = qkv + static_cast<size_t>(b) * width + head * HEAD_DIM;
    const int pos = *pos_ptr;
    float lo = bf(src[i]), hi = bf(src[i + HALF]);
    if (head < hq + hkv) {
        const float2 cs = rope[static_cast<size_t>(pos) * HALF + i];
        const float a = lo * cs.x - hi * cs.y, c = hi * cs.x + lo * cs.y;
        lo = a;
        hi = c;
    }
    unsigned short* dst;
    if (head < hq) {
        dst = q + (static_cast<size_t>(b) * hq + head) * HEAD_DIM;
    } else {
        const bool is_k = head < hq + hkv;
        const int hk = is_k ? head - hq : head - hq - hkv;
        dst = (is_k ? kc : vc) + ((static_cast<size_t>(b) * hkv + hk) * T + pos % T) * HEAD_DIM;
    }
    dst[i] = to_bf(lo);
    dst[i + HALF] = to_bf(hi);
}

// O [H][S][128] -> A [S][H * 128] (the attention output as rows for the output projection),
// 16 bytes a thread.
extern "C" __global__ void heads_to_rows(const uint4* __restrict__ o, uint4* __restrict__ a, int S, int H) {
    const long long n = static_cast<long long>(H) * S * (HEAD_DIM / 8);
    for (long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const int c = static_cast<int>(idx % (HEAD_DIM / 8));
        const long long hs = idx / (HEAD_DIM / 8);
        const int s = static_cast<int>(hs % S), h = static_cast<int>(hs / S);
        a[(static_cast<long long>(s) * H + h) * (HEAD_DIM / 8) + c] = o[idx];
    }
}

// x (bf16) += c (fp32), rounded once; 8 values a thread and step (n a multiple of 8).
extern "C" __global__ void add_f32(uint4* __restrict__ x, const float4* __restrict__ c, long long n8) {
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n8;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        uint4 v = x[i];
        const float4 a = c[2 * i], b = c[2 * i + 1];
        unsigned w[4] = {v.x, v.y, v.z, v.w};
        const float add[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float lo = __uint_as_float(w[j] << 16) + add[2 * j];
            const float hi = __uint_as_float(w[j] & 0xFFFF0000u) + add[2 * j + 1];
            w[j] = static_cast<unsigned>(to_bf(lo)) | (static_cast<unsigned>(to_bf(hi)) << 16);
        }
        x[i] = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

// x (bf16) += y (bf16), in fp32, rounded once; 8 values a thread and step.
extern "C" __global__ void add_bf16(uint4* __restrict__ x, const uint4* __restrict__ y, long long n8) {
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n8;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        const uint4 v = x[i], u = y[i];
        unsigned w[4] = {v.x, v.y, v.z, v.w};
        const unsigned z[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float lo = __uint_as_float(w[j] << 16) + __uint_as_float(z[j] << 16);
            const float hi = __uint_as_float(w[j] & 0xFFFF0000u) + __uint_as_float(z[j] & 0xFFFF0000u);
            w[j] = static_cast<unsigned>(to_bf(lo)) | (static_cast<unsigned>(to_bf(hi)) << 16);
        }
        x[i] = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

// fp32 -> bf16, 4 values a thread and step (n a multiple of 4).
extern "C" __global__ void to_bf16(const float4* __restrict__ in, uint2* __restrict__ out, long long n4) {
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        const float4 v = in[i];
        out[i] = make_uint2(static_cast<unsigned>(to_bf(v.x)) | (static_cast<unsigned>(to_bf(v.y)) << 16),
                            static_cast<unsigned>(to_bf(v.z)) | (static_cast<unsigned>(to_bf(v.w)) << 16));
    }
}

// ids[b] = argmax of logits row b (the first index on ties, as torch.argmax); one block of
// 1024 threads a row. With advance != 0, block 0 then moves *pos one token on.
extern "C" __global__ void __launch_bounds__(1024)
argmax_step(const unsigned short* __restrict__ logits, int* __restrict__ ids, int* __restrict__ pos, int V,
            int advance) {
    __shared__ float best_v[32];
    __shared__ int best_i[32];
    const unsigned short* row = logits + static_cast<size_t>(blockIdx.x) * V;
    float v = -3.0e38f;
    int idx = 0x7FFFFFFF;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float x = bf(row[j]);
        if (x > v) {  // strided walk: a later j of the same thread never wins a tie
            v = x;
            idx = j;
        }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, off);
        const int oi = __shfl_xor_sync(0xffffffffu, idx, off);
        if (ov > v || (ov == v && oi < idx)) {
            v = ov;
            idx = oi;
        }
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) {
        best_v[warp] = v;
        best_i[warp] = idx;
    }
    __syncthreads();
    if (warp == 0) {
        const int warps = blockDim.x / 32;
        v = lane < warps ? best_v[lane] : -3.0e38f;
        idx = lane < warps ? best_i[lane] : 0x7FFFFFFF;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, v, off);
            const int oi = __shfl_xor_sync(0xffffffffu, idx, off);
            if (ov > v || (ov == v && oi < idx)) {
                v = ov;
                idx = oi;
            }
        }
        if (lane == 0) {
            ids[blockIdx.x] = idx;
            if (advance && blockIdx.x == 0) *pos += 1;
        }
    }
}
