"""The MLA decode suite, without a GPU: what it declares, its launch plans and its reference."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from conftest import KERNEL_ENTRY, version_named

from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

MLA = Path(__file__).resolve().parents[2] / "kernels" / "mla"
H200_SMS = 132


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(MLA)


@pytest.fixture(scope="module")
def suite(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_mla"]


def test_declares_one_benchmark_over_the_sweep(loaded: LoadedSuite, suite: ModuleType) -> None:
    (bench,) = loaded.suite.benchmarks
    assert {v.stem: loaded.claims[v.stem].name for v in loaded.versions} == {
        "01_split_latent": "mla_decode",
        "02_bulk_ring": "mla_decode",
        "03_wgmma": "mla_decode",
        "04_phase_pipeline": "mla_decode",
    }
    assert dict(bench.headline) == {"b": 1, "h": 128, "t": 32768}
    assert len(bench.shapes) == 6
    assert len(plan_cases([loaded])) == 4 * len(bench.shapes)
    assert bench.roofline.bandwidth == "copy" and bench.roofline.compute == "gemm_bf16"
    names = [c.name for c in bench.candidates]
    assert "cuDNN SDPA" in names and "torch.matmul + softmax (cuBLAS)" in names


def test_work_model(suite: ModuleType) -> None:
    shape = {"b": 1, "h": 128, "t": 32768}
    cache = 32768 * 576 * 2
    assert suite.mla_bytes(shape) == cache + 128 * 576 * 2 + 128 * 512 * 2 + 512 * 4
    assert suite.mla_flops(shape) == 2 * 128 * 32768 * 1088
    # 16 heads: bytes-bound; 128 heads: above the ridge of ~780 TFLOP/s over ~4.29 TB/s
    ridge = 780e12 / 4.29e12
    assert suite.mla_flops({**shape, "h": 16}) / suite.mla_bytes({**shape, "h": 16}) < ridge
    assert suite.mla_flops(shape) / suite.mla_bytes(shape) > ridge


def test_every_variant_is_built_and_every_shape_planned(
    loaded: LoadedSuite, suite: ModuleType
) -> None:
    version = version_named(loaded, "01_split_latent")
    entries = set(KERNEL_ENTRY.findall(version.source))
    assert entries == {f"split_latent_{v}" for v in suite.ENTRIES}
    for variant in suite.ENTRIES:
        for shape in loaded.claims["01_split_latent"].shapes:
            for per_sm in (1, 2):
                chosen, splits, per, blocks = suite.plan(variant, shape, H200_SMS, per_sm)
                mt, _ = suite.parse_variant(chosen)
                assert shape["h"] == blocks * 16 * mt
                assert per % suite.PAGE == 0 and splits * per >= shape["t"] > (splits - 1) * per
                # one wave: the merge's last CTAs wait on every other CTA of their group
                assert splits * blocks * shape["b"] <= per_sm * H200_SMS
                assert splits <= suite.MAX_SPLITS


def test_header_names_the_measured_variant_by_head_count(
    loaded: LoadedSuite, suite: ModuleType
) -> None:
    version = version_named(loaded, "01_split_latent")
    assert suite.measured_variant(version, 16) == suite.measured_variant(version, 128) == "m1_s2"
    # a rule "h>=N:OTHER" in the header switches the variant from N heads up
    ruled = dataclasses.replace(
        version, source=version.source.replace("m1_s2 (the", "m1_s2 h>=64:m4_s3 (the", 1)
    )
    assert suite.measured_variant(ruled, 16) == "m1_s2"
    assert suite.measured_variant(ruled, 128) == "m4_s3"


def test_shared_memory_mirrors_the_kernel(loaded: LoadedSuite, suite: ModuleType) -> None:
    source = version_named(loaded, "01_split_latent").source
    consts = {m[0]: int(m[1]) for m in re.findall(r"constexpr int (\w+) = (\d+);", source)}
    assert consts["DQK"] == suite.DQK and consts["DV"] == suite.DV and consts["PAGE"] == suite.PAGE
    assert consts["TT"] == suite.TILE and consts["WARPS"] * 32 == suite.THREADS
    for variant in suite.ENTRIES:
        smem = suite.smem_bytes(*suite.parse_variant(variant))
        assert smem <= 227 * 1024
        # m1_s2 is built for two CTAs an SM (228 KB, 1 KB reserved a CTA); the rest for one
        assert (2 * (smem + 1024 + 16) <= 228 * 1024) == (variant == "m1_s2")


def test_ring_variants_are_built_planned_and_fit(loaded: LoadedSuite, suite: ModuleType) -> None:
    version = version_named(loaded, "02_bulk_ring")
    assert set(KERNEL_ENTRY.findall(version.source)) == {f"ring_{v}" for v in suite.RING_ENTRIES}
    consts = {m[0]: int(m[1]) for m in re.findall(r"constexpr int (\w+) = (\d+);", version.source)}
    assert consts["TT"] == suite.TILE and consts["DQK"] + 8 == suite.ROW
    assert consts["WPG"] * consts["GROUPS"] * 32 == suite.RING_THREADS
    assert consts["GROUPS"] == suite.RING_GROUPS
    assert "constexpr int RSTRIDE = DV + 8;" in version.source and suite.RSTRIDE == suite.DV + 8
    assert suite.measured_variant(version, 16) == "m1_s5"
    assert suite.measured_variant(version, 128) == "m2_s4"
    for variant in suite.RING_ENTRIES:
        mt, stages = suite.parse_ring_variant(variant)
        smem = suite.ring_smem_bytes(mt, stages)
        # one CTA an SM, and never two: the grid is sized as one CTA an SM
        assert smem + 1024 <= 227 * 1024 and 2 * (smem + 1024) > 228 * 1024
        # the end-of-CTA combine and the merge reuse the ring
        assert 16 * mt * suite.RSTRIDE * 4 <= stages * suite.TILE * suite.ROW * 2
        for shape in loaded.claims["02_bulk_ring"].shapes:
            chosen, splits, per, blocks = suite.plan_ring(variant, shape, H200_SMS)
            hb = 16 * suite.parse_ring_variant(chosen)[0]
            assert shape["h"] == blocks * hb
            assert per % suite.PAGE == 0 and splits * per >= shape["t"] > (splits - 1) * per
            assert splits * blocks * shape["b"] <= H200_SMS and splits <= suite.MAX_SPLITS
    assert suite.plan_ring("m2_s4", {"b": 1, "h": 16, "t": 4096}, H200_SMS)[0] == "m1_s5"
    with pytest.raises(ValueError, match="one wave"):
        suite.plan_ring("m1_s5", {"b": 133, "h": 16, "t": 4096}, H200_SMS)


def test_wgmma_version_plans_64_heads_a_cta_and_falls_back_below(
    loaded: LoadedSuite, suite: ModuleType
) -> None:
    version = version_named(loaded, "03_wgmma")
    assert set(KERNEL_ENTRY.findall(version.source)) == {"wgmma_m64_s3"}
    assert '#include "02_bulk_ring.cu"' in version.source
    # the header's shared memory figure is the suite's, and one CTA an SM fits
    assert f"{suite.WGMMA_SMEM} bytes" in version.source
    assert suite.WGMMA_SMEM + 1024 <= 227 * 1024
    for shape in loaded.claims["03_wgmma"].shapes:
        entry, splits, per, blocks = suite.plan_wgmma(shape, H200_SMS)
        if shape["h"] % 64:
            assert entry == "ring_m1_s5" and blocks * 16 == shape["h"]
        else:
            assert entry == "wgmma_m64_s3" and blocks * 64 == shape["h"]
        assert per % suite.PAGE == 0 and splits * per >= shape["t"] > (splits - 1) * per
        assert splits * blocks * shape["b"] <= H200_SMS and splits <= suite.MAX_SPLITS
    options = loaded.claims["03_wgmma"].version_options["03_wgmma"]
    assert "-arch=sm_90a" in options and f"-I{suite.HERE}" in options


def test_pipeline_variants_are_built_planned_and_fit(
    loaded: LoadedSuite, suite: ModuleType
) -> None:
    version = version_named(loaded, "04_phase_pipeline")
    built = set(
        re.findall(r"^PIPE_ENTRY\((\d+), (\d+), (true|false), (q?)\)$", version.source, re.M)
    )
    assert {f"w{w}_r{r}{q}" for w, r, _, q in built} == set(suite.PIPE_ENTRIES)
    assert all((flag == "true") == (q == "q") for _, _, flag, q in built)
    consts = {m[0]: int(m[1]) for m in re.findall(r"constexpr int (\w+) = (\d+);", version.source)}
    assert consts["TT"] == suite.TILE and consts["HB"] == suite.PIPE_HEADS
    assert consts["DQK"] + 8 == suite.ROW and consts["MAX_SPLITS"] == suite.MAX_SPLITS
    assert suite.measured_variant(version, 16) in suite.PIPE_ENTRIES
    for variant in suite.PIPE_ENTRIES:
        warps, slots = suite.parse_pipe_variant(variant)
        smem = suite.pipe_smem_bytes(warps, slots)
        # one CTA an SM, and never two: the grid is sized as one CTA an SM
        assert smem + 16 <= 227 * 1024 and 2 * (smem + 1024) > 228 * 1024
    for shape in loaded.claims["04_phase_pipeline"].shapes:
        splits, per, blocks = suite.plan_pipe(shape, H200_SMS)
        assert blocks * 16 == shape["h"]
        assert per % suite.TILE == 0 and splits * per >= shape["t"] > (splits - 1) * per
        assert splits * blocks * shape["b"] <= H200_SMS and splits <= suite.MAX_SPLITS
    # the memory-bound shape: 16 splits of 2048 tokens a sequence, 128 of the 132 SMs
    assert suite.plan_pipe({"b": 8, "h": 16, "t": 32768}, H200_SMS) == (16, 2048, 1)
    with pytest.raises(ValueError, match="one wave"):
        suite.plan_pipe({"b": 133, "h": 16, "t": 4096}, H200_SMS)
    with pytest.raises(ValueError, match="multiple of 16 heads"):
        suite.plan_pipe({"b": 1, "h": 24, "t": 4096}, H200_SMS)


def test_plan_refuses_ragged_contexts(suite: ModuleType) -> None:
    with pytest.raises(ValueError, match="multiple of the 64-token page"):
        suite.plan("m1_s4", {"b": 1, "h": 16, "t": 4100}, H200_SMS)
    with pytest.raises(ValueError, match="one wave"):
        suite.plan("m1_s4", {"b": 200, "h": 16, "t": 4096}, H200_SMS)


def test_reference_matches_a_per_head_loop(suite: ModuleType) -> None:
    rng = np.random.default_rng(1)
    b, h, t = 2, 3, 128
    q = rng.standard_normal((b, h, 576))
    pool = rng.standard_normal((b * t // 64, 64, 576))
    table = rng.permutation(b * t // 64).reshape(b, t // 64)
    cache = suite.gather(pool, table)
    assert np.array_equal(cache[1, 64:128], pool[table[1, 1]])
    out = suite.mla_reference(q, cache)
    for bi in range(b):
        for hi in range(h):
            s = cache[bi] @ q[bi, hi] * suite.SCALE
            p = np.exp(s - s.max())
            p /= p.sum()
            np.testing.assert_allclose(out[bi, hi], p @ cache[bi, :, :512], rtol=1e-12)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize(
    "name", ["01_split_latent.cu", "02_bulk_ring.cu", "03_wgmma.cu", "04_phase_pipeline.cu"]
)
def test_compiles_for_sm90_without_spills(name: str) -> None:
    # wgmma needs the arch-specific target (nvcc's plain -arch=sm_90a also emits compute_90 PTX)
    arch = "-gencode=arch=compute_90a,code=sm_90a" if name == "03_wgmma.cu" else "-arch=sm_90"
    proc = subprocess.run(
        ["nvcc", arch, "-std=c++17", f"-I{MLA}", "-Xptxas", "-v", "-c", "-o", "/dev/null"]
        + [str(MLA / name)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    spills = re.findall(r"(\d+) bytes (?:stack frame|spill stores|spill loads)", proc.stderr)
    assert spills and all(n == "0" for n in spills), proc.stderr
