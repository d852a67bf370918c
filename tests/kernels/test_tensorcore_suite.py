"""The tensor-core suite without a GPU: its cases, FLOP counts equal to the same-FLOP cuBLAS
shapes, one warp of 01 played out in NumPy through the PTX fragment layout of
mma.m16n8k16, the shared-memory placement of 02 equal to the 128-byte swizzle its
descriptors describe, and exact references; headers and ptxas resources (no wgmma
serialization); plus an on-device check marked `gpu`."""

from __future__ import annotations

import sys
from types import ModuleType

import numpy as np
import pytest
from mb_suite_shim import (
    assert_header,
    assert_registers_recorded,
    inputs_and_reference,
    numpy_as_cupy,
)
from microbench_checks import KERNELS, check_on_device

from curriculum.bench import kit
from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

STEMS = ["01_mma_sync_bf16", "02_wgmma_bf16", "03_wgmma_fp8", "04_mma_sync_fp8"]


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(KERNELS / "tensorcore")


@pytest.fixture(scope="module")
def suite(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_tensorcore"]


def test_cases_and_comparisons(loaded: LoadedSuite) -> None:
    assert [v.stem for v in loaded.versions] == STEMS
    labels = [(c.version.stem, c.shape_label, c.headline) for c in plan_cases([loaded])]
    assert labels == [
        ("01_mma_sync_bf16", "iters=4096", True),
        ("02_wgmma_bf16", "iters=2048", True),
        ("03_wgmma_fp8", "iters=2048", True),
        ("04_mma_sync_fp8", "iters=4096", True),
    ]
    mma, wgmma, fp8, mma8 = (loaded.claims[s] for s in STEMS)
    assert not mma8.bounded
    assert mma.roofline.compute == "gemm_bf16" and mma.roofline.bandwidth is None
    assert not wgmma.bounded and not fp8.bounded  # a loop with no memory may beat cuBLAS
    assert wgmma.version_options == {"02_wgmma_bf16": ("-arch=sm_90a",)}
    assert fp8.version_options == {"03_wgmma_fp8": ("-arch=sm_90a",)}
    for bench, lib in (
        (mma, "cuBLAS bf16 GEMM"),
        (wgmma, "cuBLAS bf16 GEMM"),
        (fp8, "cuBLASLt fp8 GEMM"),
        (mma8, "cuBLASLt fp8 GEMM"),
    ):
        assert [b.name.split(" (")[0] for b in bench.candidates] == [lib]
        assert "same FLOPs" in bench.candidates[0].name
        assert not bench.flush_l2


@pytest.mark.parametrize("iters", [1, 2048, 4096])
def test_flops_equal_the_library_shapes(suite: ModuleType, iters: int) -> None:
    shape = {"iters": iters}
    m, n, k = suite.mma_library_shape(shape)
    assert suite.mma_flops(shape) == 2 * m * n * k == 4224 * 8 * iters * 4096
    m, n, k = suite.wgmma_library_shape(shape)
    assert suite.wgmma_flops(shape) == 2 * m * n * k == 132 * 2 * 4 * iters * 2 * 64 * 256 * 16
    m, n, k = suite.mma_fp8_library_shape(shape)
    assert suite.mma_fp8_flops(shape) == 2 * m * n * k == 4224 * 4 * 2 * iters * 2 * 16 * 8 * 32
    m, n, k = suite.wgmma_fp8_library_shape(shape)
    assert suite.wgmma_fp8_flops(shape) == 2 * m * n * k == 132 * 2 * 4 * iters * 2 * 64 * 256 * 32


def _lane_fragments(a: np.ndarray, b: np.ndarray, lane: int) -> tuple[list, list, list]:
    """What lane `lane` of 01 loads (A 16x16, B 16x8), as (row, col) of each element, in
    register order; and where it stores its four accumulators."""
    g, t = lane // 4, lane % 4
    a_idx = [
        (g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1),
        (g, 2 * t + 8), (g, 2 * t + 9), (g + 8, 2 * t + 8), (g + 8, 2 * t + 9),
    ]  # fmt: skip
    b_idx = [(2 * t, g), (2 * t + 1, g), (2 * t + 8, g), (2 * t + 9, g)]
    d_idx = [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]
    return a_idx, b_idx, d_idx


def test_source_loads_the_fragments_the_replay_assumes(loaded: LoadedSuite) -> None:
    src = next(v for v in loaded.versions if v.stem == "01_mma_sync_bf16").source
    for expr in (
        "a[0] = pack2(A, g * 16 + 2 * t, g * 16 + 2 * t + 1);",
        "a[1] = pack2(A, (g + 8) * 16 + 2 * t, (g + 8) * 16 + 2 * t + 1);",
        "a[2] = pack2(A, g * 16 + 2 * t + 8, g * 16 + 2 * t + 9);",
        "a[3] = pack2(A, (g + 8) * 16 + 2 * t + 8, (g + 8) * 16 + 2 * t + 9);",
        "b[j][0] = pack2(bj, (2 * t) * 8 + g, (2 * t + 1) * 8 + g);",
        "b[j][1] = pack2(bj, (2 * t + 8) * 8 + g, (2 * t + 9) * 8 + g);",
        "d + g * 8 + 2 * t) = make_float2(acc[j][0], acc[j][1]);",
        "d + (g + 8) * 8 + 2 * t) = make_float2(acc[j][2], acc[j][3]);",
    ):
        assert expr in src, expr


def test_one_warp_through_the_ptx_layout(loaded: LoadedSuite) -> None:
    """PTX ISA, mma.m16n8k16 .bf16: a_i at row g (+8 for i in 2,3,6,7), col 2t + i%2 (+8 for
    i >= 4); b_i at row 2t + i%2 (+8 for i >= 2), col g; c_i at row g (+8 for i >= 2), col
    2t + i%2. Rebuild A and B from what the 32 lanes hold, multiply, scatter back."""
    rng = np.random.default_rng(5)
    a = rng.integers(-1, 2, (16, 16)).astype(np.float64)
    b = rng.integers(-1, 2, (16, 8)).astype(np.float64)
    a_seen, b_seen = np.full((16, 16), np.nan), np.full((16, 8), np.nan)
    held = {}
    for lane in range(32):
        a_idx, b_idx, d_idx = _lane_fragments(a, b, lane)
        g, t = lane // 4, lane % 4
        for i, (r, c) in enumerate(a_idx):
            ptx = (g + 8 * (i in (2, 3, 6, 7)), 2 * t + i % 2 + 8 * (i >= 4))
            assert (r, c) == ptx
            a_seen[ptx] = a[r, c]
        for i, (r, c) in enumerate(b_idx):
            ptx = (2 * t + i % 2 + 8 * (i >= 2), g)
            assert (r, c) == ptx
            b_seen[ptx] = b[r, c]
        held[lane] = d_idx
    assert not np.isnan(a_seen).any() and not np.isnan(b_seen).any()
    d = a_seen @ b_seen
    out = np.full((16, 8), np.nan)
    for lane, d_idx in held.items():
        g, t = lane // 4, lane % 4
        for i, (r, c) in enumerate(d_idx):
            assert (r, c) == (g + 8 * (i >= 2), 2 * t + i % 2)
            out[r, c] = d[r, c]
    np.testing.assert_array_equal(out, a @ b)


def _tma_swizzle_128b(offset: int) -> int:
    """Where TMA's 128-byte swizzle puts the byte at `offset` of a 1024-byte-aligned box:
    address bits 4-6 XOR bits 7-9."""
    return offset ^ (((offset >> 7) & 7) << 4)


def test_wgmma_tiles_are_placed_as_tma_would(loaded: LoadedSuite) -> None:
    src = next(v for v in loaded.versions if v.stem == "02_wgmma_bf16").source
    assert "return static_cast<unsigned>(r * 128 + ((c ^ (r & 7)) << 4));" in src
    assert "(n8 / 8) * B_BOX_BYTES + swizzled(k, n8 % 8)" in src
    assert "fence.proxy.async.shared::cta" in src and "wgmma.fence.sync.aligned" in src

    def swizzled(r: int, c: int) -> int:
        return r * 128 + ((c ^ (r & 7)) << 4)

    # A: 128 rows x 64 bf16, K-major rows of 128 bytes; chunk c holds k = 8c .. 8c + 7.
    placed = {swizzled(r, c) for r in range(128) for c in range(8)}
    assert placed == set(range(0, 128 * 128, 16))
    for r in range(128):
        for c in range(8):
            assert swizzled(r, c) == _tma_swizzle_128b(r * 128 + c * 16)
    # B: 4 boxes of 64 columns x 64 k-rows, box after box (8192 bytes each).
    for k in range(64):
        for n8 in range(32):
            logical = (n8 // 8) * 8192 + k * 128 + (n8 % 8) * 16
            assert (n8 // 8) * 8192 + swizzled(k, n8 % 8) == _tma_swizzle_128b(logical)


def test_fp8_tiles_are_k_major_and_swizzled_like_a(loaded: LoadedSuite) -> None:
    src = next(v for v in loaded.versions if v.stem == "03_wgmma_fp8").source
    assert "m64n256k32.f32.e4m3.e4m3" in src and "}, %128, %129, p, 1, 1;" in src  # no trans
    assert "tiles + A_BYTES + swizzled(r, c)) = B[e];" in src
    assert "db[kk] = smem_desc(b_smem + kk * WGMMA_K, 16, SWIZZLE_ATOM);" in src


@pytest.mark.parametrize("stem", ["02_wgmma_bf16", "03_wgmma_fp8"])
def test_wgmma_restart_flag_is_a_runtime_value(loaded: LoadedSuite, stem: str) -> None:
    """With a constant restart flag ptxas deletes the overwritten wgmma; `it & keep` with keep
    passed as 0 at run time keeps every instruction and restarts every iteration."""
    src = next(v for v in loaded.versions if v.stem == stem).source
    assert "kk == 0 ? (it & keep) : 1" in src and "int iters, int keep)" in src


def test_e4m3_bytes_decode(suite: ModuleType) -> None:
    with numpy_as_cupy():
        got = suite.e4m3_ternary_to_float64(np.array([0x38, 0xB8, 0x00], dtype=np.uint8))
    np.testing.assert_array_equal(got, [1.0, -1.0, 0.0])
    # e4m3: sign, 4 exponent bits (bias 7), 3 mantissa bits: 0x38 = 0 0111 000 = +2^0
    assert suite.E4M3[1] == 0b0_0111_000 and suite.E4M3[-1] == 0b1_0111_000


@pytest.mark.parametrize("stem", STEMS)
def test_references_are_exact_integers(loaded: LoadedSuite, suite: ModuleType, stem: str) -> None:
    bench = loaded.claims[stem]
    inputs, ref = inputs_and_reference(bench, dict(bench.headline))
    decode = suite.e4m3_ternary_to_float64 if "fp8" in stem else kit.bf16_bits_to_float64
    with numpy_as_cupy():
        for bits in inputs.values():
            assert set(np.unique(decode(bits)).tolist()) == {-1.0, 0.0, 1.0}
    d = ref["d"]
    assert np.array_equal(d, np.round(d)) and np.abs(d).max() < 2**24
    assert np.abs(d).max() > 0


@pytest.mark.parametrize("stem", STEMS)
def test_header_and_registers(loaded: LoadedSuite, stem: str) -> None:
    version = next(v for v in loaded.versions if v.stem == stem)
    assert_header(version)
    regs, smem, _ = assert_registers_recorded(version)
    assert smem == 0  # 02's tiles are dynamic shared memory
    assert regs <= (64 if stem.startswith("01") else 255)


@pytest.mark.gpu
@pytest.mark.parametrize("stem", STEMS)
def test_on_the_gpu(loaded: LoadedSuite, stem: str) -> None:
    version = next(v for v in loaded.versions if v.stem == stem)
    bench = loaded.claims[stem]
    assert check_on_device(loaded, version, {"iters": 64}) <= bench.tolerance
    assert check_on_device(loaded, version, dict(bench.headline)) <= bench.tolerance


def test_mma_fp8_fragments_follow_the_ptx_layout(loaded: LoadedSuite) -> None:
    """PTX ISA, mma.m16n8k32 with 8-bit operands: a_i at row g (+8 for i in 4-7 and 12-15),
    col 4t + i%4 (+16 for i >= 8); b_i at row 4t + i%4 (+16 for i >= 4), col g. The kernel
    packs register r of A from 4 consecutive k (stride 1) and of B from 4 consecutive k rows
    (stride 8): replay one warp and compare A @ B."""
    src = next(v for v in loaded.versions if v.stem == "04_mma_sync_fp8").source
    starts = {
        "a[0]": "g * 32 + 4 * t",
        "a[1]": "(g + 8) * 32 + 4 * t",
        "a[2]": "g * 32 + 4 * t + 16",
        "a[3]": "(g + 8) * 32 + 4 * t + 16",
    }
    for reg, start in starts.items():
        assert f"{reg} = pack4(A, {start}, 1);" in src
    assert "b[j][0] = pack4(bj, (4 * t) * 8 + g, 8);" in src
    assert "b[j][1] = pack4(bj, (4 * t + 16) * 8 + g, 8);" in src
    rng = np.random.default_rng(9)
    a = rng.integers(-1, 2, (16, 32)).astype(np.float64)
    b = rng.integers(-1, 2, (32, 8)).astype(np.float64)
    a_seen, b_seen = np.full_like(a, np.nan), np.full_like(b, np.nan)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for reg, (row, col0) in enumerate(
            [(g, 4 * t), (g + 8, 4 * t), (g, 4 * t + 16), (g + 8, 4 * t + 16)]
        ):
            for byte in range(4):
                i = 4 * reg + byte  # a_i: register i // 4, byte i % 4
                ptx = (g + 8 * ((i // 4) % 2), 4 * t + i % 4 + 16 * (i >= 8))
                assert (row, col0 + byte) == ptx
                a_seen[ptx] = a[ptx]
        for reg, k0 in enumerate([4 * t, 4 * t + 16]):
            for byte in range(4):
                i = 4 * reg + byte
                ptx = (4 * t + i % 4 + 16 * (i >= 4), g)
                assert (k0 + byte, g) == ptx
                b_seen[ptx] = b[ptx]
    assert not np.isnan(a_seen).any() and not np.isnan(b_seen).any()
    np.testing.assert_array_equal(a_seen @ b_seen, a @ b)


def test_mma_fp8_sign_sum_replays_the_kernels_lcg(loaded: LoadedSuite, suite: ModuleType) -> None:
    src = next(v for v in loaded.versions if v.stem == "04_mma_sync_fp8").source
    assert "x = x * 1664525u + 1013904223u;" in src
    assert "(x & 0x80000000u) ? SIGNS : 0u" in src and "(x & 0x40000000u) ? SIGNS : 0u" in src
    x, signs = suite.F8_SEED, []
    for _ in range(6):
        x = (x * 1664525 + 1013904223) % 2**32
        signs += [1 - 2 * (x >> 31), 1 - 2 * ((x >> 30) & 1)]
    assert suite.lcg_sign_sum(suite.F8_SEED, 3) == sum(signs[:6])
    assert suite.lcg_sign_sum(suite.F8_SEED, 6) == sum(signs)
    total = suite.lcg_sign_sum(suite.F8_SEED, suite.F8_MMA_ITERS)
    assert total + 1 != 0 and abs(total + 1) * 32 < 2**24  # a nonzero, exact answer
