"""04_nvfp4 without a GPU: the NVFP4 encoding it reads (microscaling's, shared with the error
artifact), the bit placement that widens an E2M1 code to fp16, the scale swizzle, and one warp of
the kernel played out in NumPy through the PTX layout of mma.m16n8k16."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from curriculum import microscaling as ms
from curriculum.bench.suites import load_suite

GEMV = Path(__file__).resolve().parents[2] / "kernels" / "gemv"
SOURCE = (GEMV / "04_nvfp4.cu").read_text()


@pytest.fixture(scope="module")
def suite() -> ModuleType:
    load_suite(GEMV)
    return sys.modules["curriculum_suite_gemv"]


def _f16(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint16).view(np.float16)[0])


def e2m1_pair(q: int, j: int) -> tuple[int, int]:
    """04's e2m1_pair<J>: the fp16 bits of values j and j + 4 of a word."""
    sign = (q << (12 - 4 * j)) & 0xFFFFFFFF
    mag = q >> 3 if j == 3 else (q << (9 - 4 * j)) & 0xFFFFFFFF
    out = (sign & 0x80008000) | (mag & 0x0E000E00)
    return out & 0xFFFF, out >> 16


def test_the_kernel_places_bits_as_the_test_does():
    assert "const unsigned sign = q << (12 - 4 * J);" in SOURCE
    assert "const unsigned mag = J == 3 ? q >> 3 : q << (9 - 4 * J);" in SOURCE
    assert "(sign & 0x80008000u) | (mag & 0x0E000E00u)" in SOURCE
    assert "__ldg(tscale) * 16384.0f" in SOURCE


def test_every_e2m1_code_widens_to_its_value_times_2_to_the_minus_14():
    table = ms.e2m1_values()
    for code in range(16):
        for j in range(4):
            lo, hi = e2m1_pair(code << (4 * j) | (15 - code) << (4 * j + 16), j)
            assert _f16(lo) * 2.0**14 == table[code]
            assert _f16(hi) * 2.0**14 == table[15 - code]


def test_code_times_block_scale_is_exact_in_fp16():
    e2m1 = ms.e2m1_values()[:8] * 2.0**-14
    e4m3 = ms.e4m3_values()[:0x7F]
    products = (e2m1[:, None] * e4m3[None, :]).ravel()
    f16 = products.astype(np.float16).astype(np.float64)
    np.testing.assert_array_equal(f16, products)
    assert e4m3.astype(np.float16).astype(np.float64).tolist() == e4m3.tolist()


def test_encoding_round_trips_and_matches_the_error_artifacts_quantiser():
    w = np.random.default_rng(3).standard_t(3, size=(32, 256))
    codes, scale_codes, t = ms.nvfp4_encode(w)
    assert codes.dtype == np.uint8 and codes.shape == w.shape and codes.max() <= 15
    assert scale_codes.shape == (32, 16) and scale_codes.max() <= 0x7E  # finite, at most 448
    assert t == float(np.float32(t)) and t == pytest.approx(np.abs(w).max() / (6 * 448), rel=1e-7)
    decoded = ms.nvfp4_decode(codes, scale_codes, t)
    np.testing.assert_array_equal(decoded, ms.nvfp4(w))
    # each block's largest magnitude is at most half an E2M1 step away in its block's units
    assert np.linalg.norm(decoded - w) / np.linalg.norm(w) < 0.12
    words = ms.pack_e2m1(codes)
    np.testing.assert_array_equal(ms.unpack_e2m1(words), codes)
    np.testing.assert_array_equal(ms.unpack_e2m1(words.astype(np.float64)), codes)
    first = words.view(np.uint8)[:, 0]
    np.testing.assert_array_equal(first, codes[:, 0] | codes[:, 1] << 4)  # even value low


def test_scale_swizzle_round_trips_and_gives_each_lane_its_four_bytes(suite):
    rng = np.random.default_rng(4)
    scale_codes = rng.integers(0, 0x7F, size=(16, 64), dtype=np.uint8)  # K = 1024: 4 stages
    words = suite.swizzle_nvfp4_scales(scale_codes, np)
    assert words.shape == (16, 16) and words.dtype == np.uint32
    np.testing.assert_array_equal(suite.unswizzle_nvfp4_scales(words, np), scale_codes)
    np.testing.assert_array_equal(
        suite.unswizzle_nvfp4_scales(words.astype(np.float64), np), scale_codes
    )
    for stage in range(4):
        for t in range(4):
            b = np.ascontiguousarray(words[:, 4 * stage + t]).view(np.uint8).reshape(16, 4)
            for p in range(2):
                for h in range(2):
                    block = 2 * (8 * stage + 4 * p + t) + h
                    np.testing.assert_array_equal(b[:, 2 * p + h], scale_codes[:, block])


def test_work_model_counts_codes_block_scales_and_tensor_scale(suite):
    n, k = 28672, 8192
    bench = next(b for b in load_suite(GEMV).suite.benchmarks if b.name == "gemv_nvfp4")
    shape = {"batch": 1, "k": k, "n": n}
    assert bench.bytes(shape) == n * k // 2 + n * k // 16 + 4 + 2 * (k + n) == 132_194_308
    assert [dict(s)["batch"] for s in bench.shapes] == [1, 1]
    assert dict(bench.headline) == shape and bench.roofline.bandwidth == "read"


def _mma(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """d of mma.m16n8k16 per lane: a (32, 4, 2) and b (32, 2, 2) value pairs -> d (32, 4)."""
    big_a, big_b = np.zeros((16, 16)), np.zeros((16, 8))
    for lane in range(32):
        g, t = divmod(lane, 4)
        for h in range(2):
            big_a[g, 2 * t + h], big_a[g + 8, 2 * t + h] = a[lane, 0, h], a[lane, 1, h]
            big_a[g, 2 * t + 8 + h], big_a[g + 8, 2 * t + 8 + h] = a[lane, 2, h], a[lane, 3, h]
            big_b[2 * t + h, g], big_b[2 * t + 8 + h, g] = b[lane, 0, h], b[lane, 1, h]
    d = big_a @ big_b
    return np.array(
        [
            [d[g, 2 * t], d[g, 2 * t + 1], d[g + 8, 2 * t], d[g + 8, 2 * t + 1]]
            for g, t in (divmod(lane, 4) for lane in range(32))
        ]
    )


def test_one_warp_computes_x_wt(suite):
    """A 16-row tile over K = 512 (two stages), as one warp of slice 0 walks it: lane (g, t) reads
    piece 8s + 4p + t of rows g and g + 8, word i of it is values 8i..8i+7, each pair
    (8i + j, 8i + j + 4) times its block's scale in fp16, against x pairs (x_j, x_{j+4}) that
    lanes 0-3 read (column 0; the others' B registers are garbage, NaN here); y = (sum) x t x 2^14.
    """
    k = 512
    rng = np.random.default_rng(5)
    codes, scale_codes, t_scale = ms.nvfp4_encode(rng.standard_normal((16, k)))
    words = ms.pack_e2m1(codes)
    swizzled = suite.swizzle_nvfp4_scales(scale_codes, np)
    x = rng.standard_normal(k)
    x = np.where(np.abs(x) < 2.0**-12, 2.0**-12, x)
    x = suite.bf16_bits_to_float64(suite.to_bf16_bits(x.astype(np.float32), np), np)
    e4m3 = ms.e4m3_values()

    acc = np.zeros((32, 4))
    for stage in range(k // 256):
        for p in range(2):
            for i in range(4):
                a_regs, b_regs = np.zeros((2, 32, 4, 2)), np.full((2, 32, 2, 2), np.nan)
                for lane in range(32):
                    g, t = divmod(lane, 4)
                    piece = 8 * stage + 4 * p + t
                    regs = []
                    for row in (g, g + 8):
                        q = int(words[row, 4 * piece + i])
                        sw = int(swizzled[row, 4 * stage + t])
                        scale = e4m3[(sw >> (16 * p + 8 * (i // 2))) & 0xFF]
                        pairs = [e2m1_pair(q, j) for j in range(4)]
                        regs.append([(_f16(lo) * scale, _f16(hi) * scale) for lo, hi in pairs])
                    for m in range(2):  # the word's two mmas: pairs (0, 1), then (2, 3)
                        j0, j1 = 2 * m, 2 * m + 1
                        a_regs[m, lane] = (regs[0][j0], regs[1][j0], regs[0][j1], regs[1][j1])
                        if g == 0:
                            v = x[32 * piece + 8 * i : 32 * piece + 8 * i + 8].astype(np.float16)
                            b_regs[m, lane] = ((v[j0], v[j0 + 4]), (v[j1], v[j1 + 4]))
                for m in range(2):
                    acc += _mma(a_regs[m], b_regs[m])
    y = np.concatenate([acc[0::4, 0], acc[0::4, 2]]) * t_scale * 2.0**14
    want = ms.nvfp4_decode(codes, scale_codes, t_scale) @ x
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
