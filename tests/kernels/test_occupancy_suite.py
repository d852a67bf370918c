"""The occupancy suite without a GPU: its cases, the shared-memory request that lets exactly
warps_per_sm / 4 blocks share an SM, the work model, and the references (an exact sum; the
dependent FMA chain replayed in NumPy with one rounding per step); headers and ptxas
resources; plus an on-device check marked `gpu`."""

from __future__ import annotations

import sys
from types import ModuleType

import numpy as np
import pytest
from mb_suite_shim import assert_header, assert_registers_recorded, inputs_and_reference, rel_err
from microbench_checks import KERNELS, check_on_device

from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

STEMS = ["01_stream_read", "02_dependent_fma"]
WARPS = [4, 8, 16, 32, 64]


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(KERNELS / "occupancy")


@pytest.fixture(scope="module")
def suite(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_occupancy"]


def test_cases_and_names(loaded: LoadedSuite) -> None:
    assert [v.stem for v in loaded.versions] == STEMS
    cases = plan_cases([loaded])
    for stem in STEMS:
        mine = [c for c in cases if c.version.stem == stem]
        assert [c.shape_label for c in mine] == [f"warps_per_sm={w}" for w in WARPS]
        assert [c.shape_label for c in mine if c.headline] == ["warps_per_sm=64"]
    read, fma = (loaded.claims[s] for s in STEMS)
    assert read.flush_l2 and read.roofline.bandwidth == "read"
    assert not fma.bounded and fma.items is not None


@pytest.mark.parametrize("warps", WARPS)
def test_exactly_b_blocks_fit_per_sm(suite: ModuleType, warps: int) -> None:
    shape = {"warps_per_sm": warps}
    b = suite.blocks_per_sm(shape)
    assert b * 4 == warps and suite.grid(shape) == 132 * b
    smem = suite.smem_per_block(shape)
    per_block = smem + suite.BLOCK_RESERVED
    assert smem <= 227 * 1024  # the largest opt-in request of sm_90
    assert b * per_block <= 228 * 1024 < (b + 1) * per_block
    assert 128 * b <= 2048 and b <= 32  # threads and blocks do not limit first


def test_bad_warp_counts(suite: ModuleType) -> None:
    for w in (2, 6, 68):
        with pytest.raises(ValueError):
            suite.blocks_per_sm({"warps_per_sm": w})


def test_work_model(loaded: LoadedSuite) -> None:
    read, fma = (loaded.claims[s] for s in STEMS)
    assert read.bytes({"warps_per_sm": 4}) == read.bytes({"warps_per_sm": 64}) == 2**30 + 8
    assert fma.flops({"warps_per_sm": 4}) == 2 * 132 * 128 * 65536
    assert fma.flops({"warps_per_sm": 64}) == 16 * fma.flops({"warps_per_sm": 4})


def test_stream_reference_is_the_exact_sum(
    loaded: LoadedSuite, suite: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(suite, "READ_WORDS", 1 << 16)  # the same code on a small buffer
    inputs, ref = inputs_and_reference(loaded.claims["01_stream_read"], {"warps_per_sm": 4})
    assert ref["out"].shape == (1,)
    assert int(ref["out"][0]) == int(inputs["src"].astype(np.int64).sum())
    assert (2**30 // 4) * (2**16 - 1) < 2**45  # the full buffer's sum fits the 64-bit total


def test_dependent_fma_replay_fits_the_tolerance(loaded: LoadedSuite, suite: ModuleType) -> None:
    bench = loaded.claims["02_dependent_fma"]
    inputs, ref = inputs_and_reference(bench, {"warps_per_sm": 4})
    a = inputs["x"][:1024]
    b, c = float(np.float32(suite.FMA_B)), float(np.float32(suite.FMA_C))
    for _ in range(suite.FMA_ITERS):
        a = (a.astype(np.float64) * b + c).astype(np.float32)
    assert rel_err(a, ref["out"][:1024]) < bench.tolerance / 2


@pytest.mark.parametrize("stem", STEMS)
def test_header_and_registers(loaded: LoadedSuite, stem: str) -> None:
    version = next(v for v in loaded.versions if v.stem == stem)
    assert_header(version)
    regs, smem, _ = assert_registers_recorded(version)
    assert regs <= 32 and smem == 0  # 16 blocks of 128 threads fit by registers


@pytest.mark.gpu
@pytest.mark.parametrize("stem", STEMS)
@pytest.mark.parametrize("warps", [4, 64])
def test_on_the_gpu(loaded: LoadedSuite, stem: str, warps: int) -> None:
    version = next(v for v in loaded.versions if v.stem == stem)
    bench = loaded.claims[stem]
    assert check_on_device(loaded, version, {"warps_per_sm": warps}) <= bench.tolerance
