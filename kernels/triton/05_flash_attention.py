# 05 FlashAttention forward in Triton: one program a 128-row query block, online softmax, bf16
#
# The CUDA counterpart is attention/02_flash_fwd: for one (batch, head) and a block of query
# rows, stream the keys and values in tiles, keep the running max m and sum l of every row, and
# rescale the output accumulator when the max grows, so the S x S scores never reach memory.
# Here the loop body is the algorithm as written on paper: S = Q K^T with tl.dot, the new max,
# P = exp2(S - m) (the log2(e) / sqrt(D) scale folded into one multiply, as 02 does), the
# rescale of l and of the accumulator by alpha = exp2(m_old - m_new), and O += P V with P cast
# to bf16 for the tensor cores. The compiler places Q, the K and V tiles and P in shared memory
# or registers as wgmma needs them and pipelines the K and V loads num_stages deep.
#
# Layout: Q, K, V and O are [B, H, S, D] contiguous, D = 128. The grid is (S / BLOCK_M, B * H).
# The config is fixed (BLOCK_M 128, BLOCK_N 64, 8 warps, 3 stages): 02's tile (128 query rows,
# 64-key tiles), and shared memory for Q (32 KiB) plus three stages of K and V tiles (3 x 32 KiB)
# fits in the 227 KiB of an SM. Keys past S are masked to -inf when S % BLOCK_N != 0 (EVEN_N
# drops the mask otherwise); query rows past S are computed on zeros and not stored.
import math

import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N = 128, 64
NUM_WARPS, NUM_STAGES = 8, 3
LOG2E = 1.4426950408889634


@triton.jit
def flash_fwd_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, seq, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr,
):  # fmt: skip
    block = tl.program_id(0)
    head = tl.program_id(1).to(tl.int64)  # batch * H + head: the [B, H] axes are contiguous
    base = head * seq * HEAD_DIM
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    keys = tl.arange(0, BLOCK_N)

    q_ptrs = q_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :]
    q = tl.load(q_ptrs, mask=rows[:, None] < seq, other=0.0)
    m = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l = tl.zeros([BLOCK_M], dtype=tl.float32)  # noqa: E741 (the l of the paper)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start in range(0, seq, BLOCK_N):
        cols = start + keys
        kt_ptrs = k_ptr + base + cols[None, :] * HEAD_DIM + dims[:, None]  # K^T: [D, BLOCK_N]
        v_ptrs = v_ptr + base + cols[:, None] * HEAD_DIM + dims[None, :]
        if EVEN_N:  # noqa: SIM108 (a branch on a constexpr: the mask is compiled out)
            kt = tl.load(kt_ptrs)
        else:
            kt = tl.load(kt_ptrs, mask=cols[None, :] < seq, other=0.0)
        s = tl.dot(q, kt) * qk_scale  # [BLOCK_M, BLOCK_N] scores, in log2 units
        if not EVEN_N:
            s = tl.where(cols[None, :] < seq, s, -float("inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m - m_new)
        l = l * alpha + tl.sum(p, axis=1)  # noqa: E741
        if EVEN_N:  # noqa: SIM108 (a branch on a constexpr: the mask is compiled out)
            v = tl.load(v_ptrs)
        else:
            v = tl.load(v_ptrs, mask=cols[:, None] < seq, other=0.0)
        acc = tl.dot(p.to(tl.bfloat16), v, acc * alpha[:, None])
        m = m_new
    out = acc / l[:, None]
    o_ptrs = o_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :]
    tl.store(o_ptrs, out.to(tl.bfloat16), mask=rows[:, None] < seq)


def launch(shape: dict[str, int], t: dict[str, torch.Tensor]) -> None:
    q, k, v, o = t["q"], t["k"], t["v"], t["o"]
    b, h, s, d = q.shape
    grid = (triton.cdiv(s, BLOCK_M), b * h)
    flash_fwd_kernel[grid](
        q, k, v, o, s, LOG2E / math.sqrt(d),
        HEAD_DIM=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, EVEN_N=s % BLOCK_N == 0,
        num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )  # fmt: skip
