"""The block-scaled FP8 GEMM suite, checked without a GPU (nvcc where installed).

What is checked: the E4M3 table and encoder; that quantising and dequantising round-trips
within E4M3's precision and that the scales land in the layouts the kernel and torch read;
that the reference reading the harness's float64 copies equals the product of the values;
that a kernel-like computation (fp32 chunks of 128 k, promoted with the scales) meets the
tolerance and a missed promotion does not; the launch geometry read from the source; every
shape against the kernel's constraints; and, where nvcc is installed, a compile without spills.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import suite_module

from curriculum.bench.api import discover_versions

TOPIC_DIR = Path(__file__).resolve().parents[2] / "kernels" / "fp8gemm"
fp8 = suite_module("fp8gemm")
BENCH = fp8.SUITE.benchmarks[0]


def test_e4m3_table_has_the_format_limits() -> None:
    values = fp8.e4m3_values()
    assert values[0x7E] == 448.0 and values[0xFE] == -448.0
    assert values[0x01] == 2.0**-9  # smallest subnormal: 1/8 x 2^-6
    assert values[0x38] == 1.0
    assert np.isnan(values[0x7F]) and np.isnan(values[0xFF])


def test_encoder_picks_the_nearest_value() -> None:
    values = fp8.e4m3_values()
    x = np.array([1.0, 1.06, 1.07, -3.3, 447.0, 0.0013], dtype=np.float32)
    codes = fp8.encode_e4m3(x, np)
    finite = np.where(np.isnan(values), np.inf, values)
    want = [int(np.argmin(np.abs(finite - v))) for v in x]
    assert [int(values[c] == values[w]) for c, w in zip(codes, want, strict=True)] == [1] * 6


def _quantised(m: int, n: int, k: int, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    return a, b, *fp8.quantise_rows(a, np), *fp8.quantise_blocks(b, np)


def test_quantisation_layouts_and_round_trip() -> None:
    a, b, qa, sa, qb, sb = _quantised(256, 384, 640)
    assert qa.dtype == np.uint8 and sa.shape == (5, 256) and sa.flags.c_contiguous
    assert qb.dtype == np.uint8 and sb.shape == (3, 5) and sb.flags.c_contiguous
    # scale_a[kb, r] belongs to row r, k block kb: its block's max maps to 448
    assert np.isclose(sa[2, 7] * 448.0, np.abs(a[7, 256:384]).max())
    assert np.isclose(sb[1, 4] * 448.0, np.abs(b[128:256, 512:640]).max())
    da, db = fp8.dequantise_rows(qa, sa, np), fp8.dequantise_blocks(qb, sb, np)
    # 3 mantissa bits: a relative rounding error of at most 2^-4 per value, ~2.6% in the norm
    for x, d in ((a, da), (b, db)):
        assert 0.01 < np.linalg.norm(d - x) / np.linalg.norm(x) < 0.04


def _chunked(qa, sa, qb, sb, promote: bool) -> np.ndarray:
    """What the kernel computes: per 128-k block an fp32 product of the codes, then the
    block's scales applied in fp32 (or, without promotion, one scale pair for all K)."""
    values = fp8.e4m3_values()
    ca, cb = values[qa].astype(np.float32), values[qb].astype(np.float32)
    total = np.zeros((qa.shape[0], qb.shape[0]), dtype=np.float32)
    for kb in range(qa.shape[1] // fp8.BLOCK):
        cols = slice(kb * fp8.BLOCK, (kb + 1) * fp8.BLOCK)
        chunk = ca[:, cols] @ cb[:, cols].T
        used = kb if promote else 0
        factor = sa[used][:, None] * np.repeat(sb[:, used], fp8.BLOCK)[None, :]
        total += chunk * factor.astype(np.float32)
    return total


def test_reference_and_tolerance_separate_right_from_wrong() -> None:
    _, _, qa, sa, qb, sb = _quantised(256, 384, 640, seed=1)
    inputs64 = {"a": qa.astype(np.float64), "b": qb.astype(np.float64),
                "scale_a": sa.astype(np.float64), "scale_b": sb.astype(np.float64)}
    ref = fp8.dequantise_rows(inputs64["a"], inputs64["scale_a"], np) @ fp8.dequantise_blocks(
        inputs64["b"], inputs64["scale_b"], np).T

    def rel(out: np.ndarray) -> float:
        bf16 = out.astype(np.float32).view(np.uint32) + np.uint32(0x7FFF)
        rounded = (bf16 & np.uint32(0xFFFF0000)).view(np.float32).astype(np.float64)
        return float(np.linalg.norm(rounded - ref) / np.linalg.norm(ref))

    assert rel(_chunked(qa, sa, qb, sb, promote=True)) < 0.7 * BENCH.tolerance  # bf16: ~1.6e-3
    assert rel(_chunked(qa, sa, qb, sb, promote=False)) > 10 * BENCH.tolerance


def test_geometry_is_read_from_the_source() -> None:
    versions = discover_versions(TOPIC_DIR)
    assert [v.stem for v in versions] == list(fp8.GEOMETRY)
    for v in versions:
        assert BENCH.claims(v)
        g = fp8.GEOMETRY[v.stem]
        assert f"{g.entry}(" in fp8.with_includes(v.source)
        assert (g.bm, g.bk, g.threads) == (128, 128, 384) and g.bn in (128, 192)
        assert g.bn % g.cluster == 0 and g.grid({"m": 4096, "n": 4096}, 132)[0] % g.cluster == 0
        assert g.smem <= 227 * 1024
    assert fp8.GEOMETRY["02_cluster_multicast"].cluster == 2
    wide = fp8.GEOMETRY["05_wide_staged"]
    assert wide.bn == 192 and wide.ragged_n and wide.cluster == 1
    assert wide.grid({"m": 4096, "n": 4096}, 132) == (132,)  # 32 x 22 tiles, the last clipped
    assert wide.problems({"m": 4096, "n": 4096, "k": 4096}) == []  # 4096 = 21 x 192 + 64


def test_turn_versions_compile_their_base_with_the_turns_on() -> None:
    """03 and 04 are 01 and 02 with FP8_TURNS set: the same geometry and entry, the folder on
    NVRTC's include path, and turn code that exists in the base only behind the switch."""
    for stem, base in (("03_ordered_issue", "01_block_scaled"),
                       ("04_pairs_ordered", "02_cluster_multicast")):
        source = (TOPIC_DIR / f"{stem}.cu").read_text(encoding="utf-8")
        assert "#define FP8_TURNS 1" in source and f'#include "{base}.cu"' in source
        assert fp8.GEOMETRY[stem] == fp8.GEOMETRY[base]
        assert BENCH.version_options[stem] == (f"-I{TOPIC_DIR}",)
        base_source = (TOPIC_DIR / f"{base}.cu").read_text(encoding="utf-8")
        assert "#define FP8_TURNS 0" in base_source and base_source.count("#if FP8_TURNS") == 5


def test_every_version_takes_the_primitives_from_one_header() -> None:
    """hopper.cuh holds the wrappers every version uses (tensor map, mbarriers, TMA, wgmma
    group control); no version defines them again, and the header is in every version's
    fingerprint, so an edit to it stales them all."""
    from curriculum.bench.staleness import includes

    header = TOPIC_DIR / "hopper.cuh"
    assert "void mbar_wait(" in header.read_text(encoding="utf-8")
    stems = sorted(fp8.GEOMETRY)
    assert tuple(stems) == fp8.INCLUDERS and len(stems) == 7
    for stem in stems:
        source = (TOPIC_DIR / f"{stem}.cu").read_text(encoding="utf-8")
        assert "void mbar_wait(" not in source and "struct alignas(64) TensorMap" not in source
        assert header.resolve() in [p.resolve() for p in includes(TOPIC_DIR / f"{stem}.cu")]
        assert BENCH.version_options[stem] == (f"-I{TOPIC_DIR}",)


def test_wide_versions_share_one_header() -> None:
    """05, 06 and 07 include wide_staged.cuh (the geometry, the wrappers, the producer's loads,
    the k loop with its promotion, the staged epilogue) instead of copying it: the folder on
    NVRTC's include path, one geometry read through the include, and the header in each
    version's fingerprint, so an edit to it stales all three."""
    from curriculum.bench.staleness import includes

    header = TOPIC_DIR / "wide_staged.cuh"
    for stem in ("05_wide_staged", "06_split_tail", "07_pair_tail"):
        source = (TOPIC_DIR / f"{stem}.cu").read_text(encoding="utf-8")
        assert '#include "wide_staged.cuh"' in source and "accumulate_range(" in source
        assert "void accumulate_range(" not in source and "void store_staged(" not in source
        assert BENCH.version_options[stem] == (f"-I{TOPIC_DIR}",)
        assert header.resolve() in [p.resolve() for p in includes(TOPIC_DIR / f"{stem}.cu")]
        g = fp8.GEOMETRY[stem]
        assert (g.bm, g.bn, g.bk, g.threads, g.ragged_n, g.cluster) == (128, 192, 128, 384,
                                                                       True, 1)
    assert fp8.GEOMETRY["07_pair_tail"].smem == fp8.GEOMETRY["05_wide_staged"].smem + 16


def test_cluster_grid_takes_only_the_clusters_that_fit() -> None:
    g = fp8.GEOMETRY["02_cluster_multicast"]
    shape = {"m": 4096, "n": 4096}
    assert g.grid(shape, 132) == (132,)  # no count from the driver: one CTA per SM
    assert g.grid(shape, 132, clusters_at_once=60) == (120,)  # 66 pairs would not all fit
    assert g.grid(shape, 132, clusters_at_once=80) == (132,)
    assert g.grid({"m": 256, "n": 384}, 132, clusters_at_once=60) == (6,)  # 6 tiles


def test_every_shape_fits_the_kernel() -> None:
    for g in fp8.GEOMETRY.values():
        for shape in (*BENCH.shapes, *BENCH.check_shapes):
            assert g.problems(shape) == [], shape
    assert fp8.GEOMETRY["01_block_scaled"].problems({"m": 128, "n": 2112, "k": 7168})
    assert fp8.GEOMETRY["02_cluster_multicast"].problems({"m": 128, "n": 128, "k": 128})
    assert BENCH.headline in BENCH.shapes


def test_a_ragged_geometry_clips_the_last_tile_column() -> None:
    """A version with RAGGED_N 1 takes any N that is a multiple of the scale block, and its
    grid counts the clipped last tile column; without it N must fill whole tiles."""
    source = "\n".join([
        'extern "C" __global__ void k(int n) {}',
        *(f"constexpr int {name} = {value};" for name, value in (
            ("BM", 128), ("BN", 176), ("BK", 128), ("THREADS", 384), ("SMEM_BYTES", 197760),
            ("RAGGED_N", 1))),
    ])
    g = fp8.Geometry.of("99_wide", source)
    assert g.ragged_n and g.bn == 176 and g.entry == "k"
    assert g.problems({"m": 256, "n": 640, "k": 384}) == []
    assert g.problems({"m": 256, "n": 700, "k": 384}) == ["n = 700 is not a multiple of 128"]
    assert g.grid({"m": 256, "n": 640}, 132) == (8,)  # 2 rows x ceil(640 / 176) = 4 columns
    assert g.grid({"m": 4096, "n": 4096}, 132) == (132,)
    fixed = fp8.Geometry.of("98_fixed", source.replace("RAGGED_N = 1", "RAGGED_N = 0"))
    assert fixed.problems({"m": 256, "n": 640, "k": 384}) == ["n = 640 is not a multiple of 176"]
    assert {"m": 256, "n": 640, "k": 384} in BENCH.check_shapes  # 640 = 3 x 176 + 112


def test_work_model_at_the_headline() -> None:
    s = fp8.HEADLINE
    assert fp8.flops(s) == 2 * 4096**3
    assert fp8.min_bytes(s) == 2 * 4096**2 + (4096 * 32 + 32 * 32) * 4 + 4096**2 * 2
    assert fp8.min_bytes({**s, "cheaper_scales": 1}) == fp8.min_bytes(s)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_compiles_for_hopper_without_spills(tmp_path: Path) -> None:
    for v in discover_versions(TOPIC_DIR):
        run = subprocess.run(
            ["nvcc", "-gencode", "arch=compute_90a,code=sm_90a", "--resource-usage", "-c",
             str(v.path), "-o", str(tmp_path / f"{v.stem}.o")],
            capture_output=True, text=True, check=False,
        )
        assert run.returncode == 0, run.stderr
        assert "0 bytes spill stores" in run.stderr and "serialized" not in run.stderr
