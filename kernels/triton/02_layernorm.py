# 02 LayerNorm in Triton: one program a row, the row in registers, two-pass variance, fp32
#
# The CUDA counterpart is layernorm/06_stable_variance: one block a row, the row read once into
# registers, the mean, then the variance of the centred values (no E[x^2] - E[x]^2
# cancellation), then the output written from the same registers. Here the two reductions are
# tl.sum over the row vector; the masked tail (lanes past cols) is zeroed before the variance so
# it adds nothing. gamma and beta are loaded once per program, from L2 after the first program
# touches them. 06 fixes 16 values a thread and a block of cols / 16 threads; here the same
# split comes from num_warps, and the compiler picks the vector width of the loads.
#
# Expected bound: 1.07 GB moved at 32768 x 4096, about 0.25 ms at the copy ceiling, where 06
# already runs within a few percent of it; the question is whether the generated code keeps up.
import torch
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(
    x_ptr, gamma_ptr, beta_ptr, y_ptr, n_cols, x_stride, y_stride, eps, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    gamma = tl.load(gamma_ptr + cols, mask=mask, other=0.0)
    beta = tl.load(beta_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * y_stride + cols, d * rstd * gamma + beta, mask=mask)


def num_warps(block: int) -> int:
    """16 values a thread while that takes at most 16 warps."""
    return max(4, min(16, block // (16 * 32)))


def launch(shape: dict[str, int], t: dict[str, torch.Tensor], eps: float) -> None:
    x, gamma, beta, y = t["x"], t["gamma"], t["beta"], t["y"]
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    layernorm_kernel[(rows,)](
        x, gamma, beta, y, cols, x.stride(0), y.stride(0), eps,
        BLOCK=block, num_warps=num_warps(block),
    )  # fmt: skip
