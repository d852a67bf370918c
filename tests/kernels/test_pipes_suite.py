"""The pipes suite without a GPU: its cases and operation counts, and each kernel's recurrence
replayed in NumPy with the device's rounding (fp32 FMA, fp16 HFMA2: one rounding per step) or
exactly (32-bit multiply-add), against the reference and inside the tolerance; headers and
ptxas resources; plus an on-device check marked `gpu`."""

from __future__ import annotations

import sys
from types import ModuleType

import numpy as np
import pytest
from mb_suite_shim import assert_header, assert_registers_recorded, inputs_and_reference, rel_err
from microbench_checks import KERNELS, check_on_device

from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

STEMS = ["01_fp32_fma", "02_fp16x2_fma", "03_int32_mad", "04_fp64_fma"]
SAMPLE = 2048  # threads replayed in NumPy


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(KERNELS / "pipes")


@pytest.fixture(scope="module")
def suite(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_pipes"]


def test_cases_and_op_counts(loaded: LoadedSuite) -> None:
    assert [v.stem for v in loaded.versions] == STEMS
    labels = [(c.version.stem, c.shape_label, c.headline) for c in plan_cases([loaded])]
    assert labels == [
        ("01_fp32_fma", "iters=8192", True),
        ("02_fp16x2_fma", "iters=8192", True),
        ("03_int32_mad", "iters=4096", True),
        ("04_fp64_fma", "iters=4096", True),
    ]
    threads = 1056 * 256
    fp32, fp16, int32, fp64 = (loaded.claims[s] for s in STEMS)
    assert fp64.flops({"iters": 4096}) == 2 * threads * 8 * 4096  # DFMA = 2
    assert fp32.flops({"iters": 8192}) == 2 * threads * 8 * 8192  # FMA = 2
    assert fp16.flops({"iters": 8192}) == 4 * threads * 8 * 8192  # HFMA2 = 4
    assert int32.flops({"iters": 4096}) == 2 * threads * 8 * 4096  # IMAD = 2
    for bench in (fp32, fp16, int32, fp64):
        assert not bench.bounded and not bench.flush_l2  # no ceiling bounds an FMA loop


def test_fp32_replay_fits_the_tolerance(loaded: LoadedSuite, suite: ModuleType) -> None:
    bench = loaded.claims["01_fp32_fma"]
    inputs, ref = inputs_and_reference(bench, {"iters": 8192})
    x = inputs["x"][:SAMPLE]
    a = (x[:, None] + np.float32(0.125) * np.arange(8, dtype=np.float32)).astype(np.float32)
    b, c = np.float32(suite.FMA_B), np.float32(suite.FMA_C)
    for _ in range(8192):  # fma: the product is exact in float64, one rounding to fp32
        a = (a.astype(np.float64) * float(b) + float(c)).astype(np.float32)
    err = rel_err(a, ref["out"][:SAMPLE])
    assert err < bench.tolerance / 10, err
    assert 0.5 < float(np.abs(ref["out"]).mean()) < 2


def test_fp16_replay_fits_the_tolerance(loaded: LoadedSuite, suite: ModuleType) -> None:
    bench = loaded.claims["02_fp16x2_fma"]
    inputs, ref = inputs_and_reference(bench, {"iters": 8192})
    c = inputs["x"][:SAMPLE].astype(np.float16).astype(np.float64)[:, None, :]
    j = np.arange(8, dtype=np.float64)
    a = np.stack([0.0625 * j, 0.0625 * (j + 1)], axis=-1)[None].astype(np.float16)
    a = np.broadcast_to(a, (SAMPLE, 8, 2))
    for _ in range(8192):  # 0.75 a + c is exact in float64: one rounding to fp16
        a = (a.astype(np.float64) * 0.75 + c).astype(np.float16)
    want = ref["out"][:SAMPLE]
    assert rel_err(a, want) < bench.tolerance
    ulp = np.spacing(want.astype(np.float16)).astype(np.float64)
    assert (np.abs(a.astype(np.float64) - want) <= 2 * ulp).all()


def test_affine_power_is_repeated_steps(suite: ModuleType) -> None:
    mask = (1 << 32) - 1
    for iters in (0, 1, 2, 3, 17, 100):
        a = 12345
        for _ in range(iters):
            a = (a * suite.LCG_M + suite.LCG_K) & mask
        m, k = suite.affine_power(suite.LCG_M, suite.LCG_K, iters)
        assert (m * 12345 + k) & mask == a


def test_int32_replay_equals_the_reference(loaded: LoadedSuite) -> None:
    bench = loaded.claims["03_int32_mad"]
    inputs, ref = inputs_and_reference(bench, {"iters": 4096})
    x = inputs["x"][:SAMPLE].astype(np.uint64)
    a = (x[:, None] + np.arange(8, dtype=np.uint64) * np.uint64(0x9E3779B9)) & np.uint64(0xFFFFFFFF)
    m, k, mask = np.uint64(1664525), np.uint64(1013904223), np.uint64(0xFFFFFFFF)
    for _ in range(4096):
        a = (a * m + k) & mask
    np.testing.assert_array_equal(a.astype(np.float64), ref["out"][:SAMPLE])


@pytest.mark.parametrize("stem", STEMS)
def test_header_and_registers(loaded: LoadedSuite, stem: str) -> None:
    version = next(v for v in loaded.versions if v.stem == stem)
    assert_header(version)
    regs, smem, _ = assert_registers_recorded(version)
    assert regs <= 32 and smem == 0  # 2048 threads per SM fit


@pytest.mark.gpu
@pytest.mark.parametrize("stem", STEMS)
def test_on_the_gpu(loaded: LoadedSuite, stem: str) -> None:
    version = next(v for v in loaded.versions if v.stem == stem)
    bench = loaded.claims[stem]
    assert check_on_device(loaded, version, dict(bench.headline)) <= bench.tolerance


def test_fp64_replay_fits_the_tolerance(loaded: LoadedSuite, suite: ModuleType) -> None:
    bench = loaded.claims["04_fp64_fma"]
    inputs, ref = inputs_and_reference(bench, {"iters": 4096})
    a = inputs["x"][:SAMPLE, None] + 0.125 * np.arange(8)
    for _ in range(4096):  # float64 a * b + c rounds twice where a DFMA rounds once
        a = a * suite.FMA_B + suite.FMA_C
    assert rel_err(a, ref["out"][:SAMPLE]) < bench.tolerance / 10
