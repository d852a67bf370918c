"""The CuTe layouts that the capsule cute-cutlass-dsls writes for GEMM 11 and GEMM 12,
checked against the index arithmetic of kernels/gemm/11_mma_swizzle.cu and
12_wgmma_tma.cu, element by element.

A layout is a (shape, stride) pair of nested tuples; it maps a coordinate to
sum(coordinate_i * stride_i). A flat index is split into a coordinate
colexicographically (the leftmost mode varies fastest), as CuTe does.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest


def flatten(t: Any) -> list[int]:
    return [x for e in t for x in flatten(e)] if isinstance(t, tuple) else [t]


def size(shape: Any) -> int:
    n = 1
    for s in flatten(shape):
        n *= s
    return n


def layout(shape: Any, stride: Any, coord: Any) -> int:
    """Evaluate a layout at a coordinate: an int (split over the whole shape) or a tuple
    congruent to the top-level modes (each entry an int, split over its mode)."""
    if isinstance(coord, int):
        total = 0
        for s, d in zip(flatten(shape), flatten(stride), strict=True):
            total += (coord % s) * d
            coord //= s
        return total
    return sum(layout(s, d, c) for s, d, c in zip(shape, stride, coord, strict=True))


def swizzle(b: int, m: int, s: int, offset: int) -> int:
    """CuTe's Swizzle<B, M, S>: XOR bits [M+S, M+S+B) of the offset into bits [M, M+B)."""
    yyy = ((1 << b) - 1) << (m + s)
    return offset ^ ((offset & yyy) >> s)


# --- GEMM 11: shared-memory tiles ------------------------------------------------------------


def test_gemm11_a_tile_is_swizzle333_of_a_row_major_128x64() -> None:
    bk = 64
    for row, k in itertools.product(range(128), range(bk)):
        chunk, e = divmod(k, 8)
        kernel = row * bk + ((chunk ^ (row % 8)) * 8) + e  # a_dst, then + element
        assert kernel == swizzle(3, 3, 3, layout((128, 64), (64, 1), (row, k)))


def test_gemm11_b_tile_is_swizzle335_of_a_row_major_64x256() -> None:
    bn = 256
    for kr, n in itertools.product(range(64), range(bn)):
        chunk, e = divmod(n, 8)
        kernel = kr * bn + ((chunk ^ (kr % 8)) * 8) + e  # b_dst, then + element
        assert kernel == swizzle(3, 3, 5, layout((64, 256), (256, 1), (kr, n)))


def test_a_swizzle_in_elements_is_swizzle343_in_bytes() -> None:
    for o in range(128 * 64):
        assert 2 * swizzle(3, 3, 3, o) == swizzle(3, 4, 3, 2 * o)


# --- GEMM 11: the grouped launch order ------------------------------------------------------


@pytest.mark.parametrize("tiles_m,tiles_n", [(32, 16), (64, 32), (8, 2)])
def test_gemm11_block_order_is_a_hierarchical_layout(tiles_m: int, tiles_n: int) -> None:
    group_rows = 8
    seen = {}
    for b in range(tiles_m * tiles_n):  # the kernel's mapping, block index -> tile
        group, in_group = divmod(b, group_rows * tiles_n)
        rows = min(group_rows, tiles_m - group * group_rows)
        row, col = group * group_rows + in_group % rows, in_group // rows
        seen[(row, col)] = b
    shape = ((8, tiles_m // 8), tiles_n)
    stride = ((1, 8 * tiles_n), 8)
    for (row, col), b in seen.items():
        assert layout(shape, stride, ((row % 8) + 8 * (row // 8), col)) == b
    assert len(seen) == tiles_m * tiles_n


# --- accumulator (thread, value) layouts ------------------------------------------------------


def test_mma_m16n8_accumulator_is_sm80_16x8_row() -> None:
    shape, stride = ((4, 8), (2, 2)), ((32, 1), (16, 8))
    for lane, i in itertools.product(range(32), range(4)):
        g, t4 = lane // 4, lane % 4  # c0, c1 at (g, 2t, 2t+1); c2, c3 at row g + 8
        row, col = g + 8 * (i // 2), 2 * t4 + i % 2
        assert layout(shape, stride, (lane, i)) == row + 16 * col


def test_wgmma_m64n256_accumulator_is_clayout_64xn() -> None:
    shape, stride = ((4, 8, 4), (2, 2, 32)), ((128, 1, 16), (64, 8, 512))
    for t, v in itertools.product(range(128), range(128)):
        warp, lane = divmod(t, 32)
        j, i = divmod(v, 4)  # d[4j + i]
        row = 16 * warp + lane // 4 + 8 * (i >= 2)
        col = 8 * j + 2 * (lane % 4) + i % 2
        assert layout(shape, stride, (t, v)) == row + 64 * col


# --- GEMM 12: the N-major B stage and its descriptor ------------------------------------------


def test_gemm12_b_stage_and_descriptor_offsets() -> None:
    shape, stride = (64, (64, 4)), (64, (1, 4096))  # (k, (n in box, box)) in elements
    for k, n in itertools.product(range(64), range(256)):
        kernel = (n // 64) * 64 * 64 + k * 64 + n % 64  # box * B_BOX_BYTES/2 + row * 64 + col
        assert layout(shape, stride, (k, (n % 64, n // 64))) == kernel
    # leading byte offset: one box along N; stride byte offset: eight rows of k
    assert 2 * layout(shape, stride, (0, (0, 1))) == 8192
    assert 2 * layout(shape, stride, (8, (0, 0))) == 1024


def test_global_tiling_of_a_row_major_matrix() -> None:
    m, k = 512, 256
    shape = ((128, 64), (m // 128, k // 64))
    stride = ((k, 1), (128 * k, 64))
    for r, c in itertools.product(range(0, m, 7), range(0, k, 5)):
        tile = (r // 128, c // 64)
        inside = (r % 128, c % 64)
        assert layout(shape, stride, (inside, tile)) == r * k + c
    assert size(shape) == m * k
