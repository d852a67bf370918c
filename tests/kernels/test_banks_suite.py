"""The banks suite without a GPU: it loads, its shapes and work model are the ones
pages cite, the stride-to-conflict model holds, its reference equals a NumPy run of
the kernel's index arithmetic; plus an on-device check marked `gpu`."""

from __future__ import annotations

import sys
from types import ModuleType

import numpy as np
import pytest
from conftest import version_named
from microbench_checks import (
    KERNELS,
    RecordingModule,
    assert_header,
    assert_resources_recorded,
    check_on_device,
)

from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

STEMS = ["01_smem_stride"]


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(KERNELS / "banks")


@pytest.fixture(scope="module")
def module(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_banks"]


def test_cases_and_names(loaded: LoadedSuite) -> None:
    assert [v.stem for v in loaded.versions] == STEMS
    cases = plan_cases([loaded])
    assert [c.shape_label for c in cases] == [f"stride={s}" for s in (1, 2, 4, 8, 16, 32, 33)]
    assert [c.shape_label for c in cases if c.headline] == ["stride=32"]
    bench = loaded.claims["01_smem_stride"]
    assert not bench.bounded and not bench.flush_l2
    assert bench.items is not None and bench.items({"stride": 1}) == 32 * 1536 * 8
    assert bench.bytes({"stride": 1}) == 128 * 32 * 1536 * 8


def test_conflict_degree_per_stride(module: ModuleType) -> None:
    # 4-byte words, 32 banks: stride 2^k puts 2^k lanes on a bank up to 32; 33 none.
    assert [module.wavefronts(s) for s in (1, 2, 4, 8, 16, 32, 33)] == [1, 2, 4, 8, 16, 32, 1]
    assert module.wavefronts(64) == 32


def test_every_stride_fits_the_table(module: ModuleType, loaded: LoadedSuite) -> None:
    for shape in loaded.claims["01_smem_stride"].shapes:
        assert module.max_word(shape["stride"]) < module.WORDS


def test_reference_is_the_kernel_in_numpy(module: ModuleType) -> None:
    rng = np.random.default_rng(5)
    table = rng.integers(1, 1000, size=module.WORDS).astype(np.uint32)
    for stride in (1, 16, 32, 33):
        tid = np.arange(module.BLOCK)
        lane = tid & 31
        acc = np.zeros(module.BLOCK, dtype=np.uint64)
        for j in range(module.UNROLL):  # one trip, then times the trips
            acc += table[lane * stride + j]
        acc *= module.ITERS
        assert acc.max() < 2**32  # no wrap in the kernel's uint32
        ref = module._reference({"table": table.astype(np.float64)}, {"stride": stride})["out"]
        np.testing.assert_array_equal(ref, acc.astype(np.float64))


def test_launch_plan(module: ModuleType, loaded: LoadedSuite) -> None:
    version = version_named(loaded, "01_smem_stride")
    rec = RecordingModule()
    arrays = {"table": "T", "out": "O"}
    module._launch(rec, version, {"stride": 33}, arrays)
    name, grid, block, args = rec.launches[0]
    assert (name, grid, block) == ("smem_stride", (1,), (1024,))
    assert args[:2] == ("T", "O") and int(args[2]) == 33 and int(args[3]) == module.ITERS
    with pytest.raises(ValueError, match="stride 66"):
        module._launch(rec, version, {"stride": 66}, arrays)


@pytest.mark.parametrize("stem", STEMS)
def test_header(loaded: LoadedSuite, stem: str) -> None:
    version = version_named(loaded, stem)
    assert_header(version)
    text = " ".join(version.header)
    assert "32-way" in text and "393,216" in text


@pytest.mark.parametrize("stem", STEMS)
def test_compiles_and_header_states_resources(loaded: LoadedSuite, stem: str) -> None:
    assert_resources_recorded(version_named(loaded, stem))


@pytest.mark.gpu
def test_on_device(loaded: LoadedSuite) -> None:
    version = version_named(loaded, "01_smem_stride")
    for shape in loaded.claims["01_smem_stride"].shapes:
        assert check_on_device(loaded, version, dict(shape)) == 0.0
