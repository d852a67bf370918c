"""The atomics suite without a GPU: cases, work model, the launch plan, and the
reference against a NumPy replay of both kernels' additions; plus an on-device
check marked `gpu`."""

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

STEMS = ["01_global_add", "02_warp_aggregated", "03_global_add_lanes"]
ADDRESSES = (1, 32, 1024, 1048576)


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(KERNELS / "atomics")


@pytest.fixture(scope="module")
def module(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_atomics"]


def test_cases_and_names(loaded: LoadedSuite) -> None:
    assert [v.stem for v in loaded.versions] == STEMS
    cases = plan_cases([loaded])
    assert [(c.id, c.shape_label) for c in cases] == [
        (f"atomics/{s}", f"addresses={a}") for s in STEMS for a in ADDRESSES
    ]
    assert {c.shape_label for c in cases if c.headline} == {"addresses=1"}
    for stem in STEMS:
        bench = loaded.claims[stem]
        assert not bench.bounded and not bench.flush_l2 and bench.tolerance == 0.0
        assert bench.items is not None and bench.items({"addresses": 1}) == 1 << 22


def _replay(salt: np.ndarray, addresses: int, module: ModuleType, per_warp: bool) -> np.ndarray:
    """Both kernels' additions in NumPy: lane-by-lane (01) or one sum a warp (02)."""
    counters = np.zeros(addresses, dtype=np.uint64)
    warps = module.BLOCKS * module.BLOCK // 32
    for k in range(module.ITERS):
        event = k * warps + np.arange(warps)
        slot = event & (addresses - 1)
        values = salt.astype(np.uint64) + k
        if per_warp:
            np.add.at(counters, slot, int(values.sum()))
        else:
            for lane in range(32):
                np.add.at(counters, slot, int(values[lane]))
    return counters


@pytest.mark.parametrize("addresses", ADDRESSES)
def test_reference_is_the_kernels_in_numpy(module: ModuleType, addresses: int) -> None:
    rng = np.random.default_rng(addresses)
    salt = rng.integers(1, 8, size=32).astype(np.uint32)
    ref = module._reference({"salt": salt.astype(np.float64)}, {"addresses": addresses})
    counters = ref["counters"]
    assert counters.shape == (addresses,)
    want = _replay(salt, addresses, module, per_warp=True)
    assert want.max() < 2**32
    np.testing.assert_array_equal(counters, want.astype(np.float64))
    if addresses <= 32:  # the lane-by-lane replay is slow; the sums are the same anyway
        np.testing.assert_array_equal(_replay(salt, addresses, module, per_warp=False), want)
    assert counters.sum() == float(
        module.WARPS * module.ITERS * salt.sum() + 32 * module.WARPS * sum(range(module.ITERS))
    )


@pytest.mark.parametrize("addresses", ADDRESSES)
def test_lanes_reference_is_the_kernel_in_numpy(module: ModuleType, addresses: int) -> None:
    rng = np.random.default_rng(addresses + 1)
    salt = rng.integers(1, 8, size=32).astype(np.uint32)
    ref = module._reference_lanes({"salt": salt.astype(np.float64)}, {"addresses": addresses})
    counters = np.zeros(addresses, dtype=np.uint64)
    thread = np.arange(module.THREADS)
    for k in range(module.ITERS):  # as the kernel: thread-trip g on counter g & (addresses - 1)
        g = k * module.THREADS + thread
        np.add.at(counters, g & (addresses - 1), salt[thread % 32].astype(np.uint64) + k)
    assert counters.max() < 2**32
    np.testing.assert_array_equal(ref["counters"], counters.astype(np.float64))
    # the same total as 01 and 02: only where the additions land differs
    total = module._reference({"salt": salt.astype(np.float64)}, {"addresses": 1})["counters"]
    assert ref["counters"].sum() == total.sum()


def test_launch_zeroes_counters_then_launches(module: ModuleType, loaded: LoadedSuite) -> None:
    for stem, entry in zip(
        STEMS, ("global_add", "warp_aggregated", "global_add_lanes"), strict=True
    ):
        version = version_named(loaded, stem)
        rec = RecordingModule()
        counters = np.full(1024, 7, dtype=np.uint32)
        module._launch(rec, version, {"addresses": 1024}, {"salt": "S", "counters": counters})
        assert not counters.any()
        name, grid, block, args = rec.launches[0]
        assert (name, grid, block) == (entry, (1024,), (256,))
        assert args[0] == "S" and args[1] is counters
        assert int(args[2]) == 1024 and int(args[3]) == 16
        with pytest.raises(ValueError, match="power of two"):
            module._launch(rec, version, {"addresses": 1000}, {"salt": "S", "counters": counters})


@pytest.mark.parametrize("stem", STEMS)
def test_header(loaded: LoadedSuite, stem: str) -> None:
    assert_header(version_named(loaded, stem))


@pytest.mark.parametrize("stem", STEMS)
def test_compiles_and_header_states_resources(loaded: LoadedSuite, stem: str) -> None:
    assert_resources_recorded(version_named(loaded, stem))


def test_aggregated_uses_full_warp_shuffles(loaded: LoadedSuite) -> None:
    src = version_named(loaded, "02_warp_aggregated").source
    assert "__shfl_xor_sync(FULL_MASK" in src and "if (lane == 0)" in src


@pytest.mark.gpu
@pytest.mark.parametrize("stem", STEMS)
def test_on_device(loaded: LoadedSuite, stem: str) -> None:
    version = version_named(loaded, stem)
    for shape in loaded.claims[stem].shapes:
        assert check_on_device(loaded, version, dict(shape)) == 0.0
