# 06 bf16 GEMM in Triton, bf16 C, with TMA and persistent programs: 04 given GEMM 13's data path
#
# Against 04: two changes, both aimed at what 04's compiled code showed it leaves to the threads.
# (1) Tensor descriptors. A, B and C are passed as TensorDescriptor objects (base, shape,
# strides, block shape) and read with a_desc.load([row, col]); on sm_90 the compiler turns each
# load into one cp.async.bulk.tensor issued for the whole tile (the TMA copy engine, as GEMM 12
# and 13 use) instead of every thread computing addresses and issuing its own cp.async. Tiles
# past the edge of a matrix are zero-filled by the engine on load and clipped on store, so no
# mask is written at all. (2) Persistence. The grid is one program an SM; each walks tiles
# first, first + SMs, ... in 04's grouped order, so the loads of the next tile can start while
# this one finishes (tl.range(..., flatten=True) lets the pipeliner see the tile loop and the K
# loop as one), and no program pays a launch or a pipeline fill per tile.
#
# Expected bound: as 04, 137 GFLOP at 4096^3, about 0.17 ms at the same-run bf16 GEMM ceiling;
# GEMM 13, the CUDA kernel with both changes, is the reference point.
#
# Config fixed as 03 and 04 (128 x 256 x 64 tiles, 8 warps, 3 stages: 144 KiB of ring) plus the
# 64 KiB bf16 C tile staged for the TMA store, 208 KiB in all. Constraints TMA imposes: rows of
# A, B and C a multiple of 16 bytes (K and N multiples of 8 bf16) and 16-byte aligned bases.
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 128, 256, 64, 8
NUM_WARPS, NUM_STAGES = 8, 3


@triton.jit
def gemm_tma_kernel(
    a_desc, b_desc, c_desc, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
):  # fmt: skip
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    per_group = GROUP_M * tiles_n
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_SMS, flatten=True):
        first_m = (tile // per_group) * GROUP_M
        group_rows = min(tiles_m - first_m, GROUP_M)
        row = (first_m + (tile % per_group) % group_rows) * BLOCK_M
        col = ((tile % per_group) // group_rows) * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_steps):
            a = a_desc.load([row, k * BLOCK_K])
            b = b_desc.load([k * BLOCK_K, col])
            acc = tl.dot(a, b, acc)
        c_desc.store([row, col], acc.to(tl.bfloat16))


def launch(shape: dict[str, int], t: dict[str, torch.Tensor]) -> None:
    a, b, c = t["a"], t["b"], t["c"]
    m, k = a.shape
    n = b.shape[1]
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    tiles = triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N)
    gemm_tma_kernel[(min(sms, tiles),)](
        TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K]),
        TensorDescriptor.from_tensor(b, [BLOCK_K, BLOCK_N]),
        TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N]),
        m, n, k,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, NUM_SMS=sms,
        num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )  # fmt: skip
