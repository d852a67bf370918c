# 03 bf16 GEMM in Triton: C = A @ B, bf16 in, fp32 accumulate, fp32 C, one tile a program
#
# The CUDA counterpart is gemm/12_wgmma_tma: 128 x 256 tiles of C, TMA loads into a 4-stage
# shared-memory ring, wgmma on the tensor cores, fp32 C. Here a program computes one
# BLOCK_M x BLOCK_N tile of C as a loop over K in steps of BLOCK_K: load a tile of A and a tile
# of B, tl.dot them into an fp32 accumulator. Everything 12 writes by hand is the compiler's:
# the shared-memory layout and its swizzle, the num_stages-deep ring of asynchronous copies
# that keeps the next tiles loading while tl.dot runs (on sm_90, tl.dot becomes wgmma fed from
# shared memory), and the split of the tile over num_warps warps.
#
# Program order: programs run roughly in id order, so ids are grouped GROUP_M tile-rows at a
# time. A wave of 132 programs then covers a squat block of C (8 tile-rows by about 16
# tile-columns) instead of one long row of it, and reads far fewer distinct A and B tiles, which
# stay in L2 for the next program that needs them.
#
# The config is fixed, not autotuned: BLOCK 128 x 256 x 64, 8 warps, 3 stages is the tile of 12
# (so the two compare like for like) and 3 x (128 x 64 + 64 x 256) x 2 B = 144 KiB of shared
# memory for the ring, within the 227 KiB an SM offers. Rows past M, columns past N and the K
# tail are masked, so any M, N, K are accepted; EVEN_K drops the K mask when K % BLOCK_K == 0.
import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 128, 256, 64, 8
NUM_WARPS, NUM_STAGES = 8, 3


@triton.jit
def gemm_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows

    # Rows and columns wrap (% M, % N) so that every load is in bounds; the wrapped ones are
    # never stored.
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    cols = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None].to(tl.int64) * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None].to(tl.int64) * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=ks[None, :] < left, other=0.0)
            b = tl.load(b_ptrs, mask=ks[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    out_rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    out_cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + out_rows[:, None].to(tl.int64) * stride_cm + out_cols[None, :] * stride_cn
    mask = (out_rows[:, None] < M) & (out_cols[None, :] < N)
    tl.store(c_ptrs, acc, mask=mask)


def launch(shape: dict[str, int], t: dict[str, torch.Tensor]) -> None:
    a, b, c = t["a"], t["b"], t["c"]
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
    gemm_kernel[grid](
        a, b, c, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
        EVEN_K=k % BLOCK_K == 0, num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )  # fmt: skip
