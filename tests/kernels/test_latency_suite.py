"""The latency suite without a GPU: its cases and names, the chase is one cycle through every
slot, and a NumPy run of the kernel's walk over the suite's own inputs ends where the
reference says; headers and ptxas resources; plus an on-device check marked `gpu`."""

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

from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

STEMS = ["01_pointer_chase", "02_pointer_chase_cg"]
KIB = [16, 64, 192, 1024, 8192, 32768, 49152, 65536, 262144, 1048576]


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(KERNELS / "latency")


@pytest.fixture(scope="module")
def suite(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_latency"]


def test_cases_and_names(loaded: LoadedSuite, suite: ModuleType) -> None:
    assert [v.stem for v in loaded.versions] == STEMS
    cases = plan_cases([loaded])
    for stem in STEMS:
        mine = [c for c in cases if c.version.stem == stem]
        assert [c.shape_label for c in mine] == [f"kib={k}" for k in KIB]
        assert [c.shape_label for c in mine if c.headline] == ["kib=1048576"]
    for bench in loaded.suite.benchmarks:
        assert not bench.bounded and not bench.flush_l2 and bench.tolerance == 0.0
        assert bench.items is not None and bench.items({"kib": 16}) == suite.STEPS == 32768
        assert bench.bytes({"kib": 16}) == 8 * 128 * 32768
    assert [b.name for b in loaded.suite.benchmarks] == ["pointer_chase", "pointer_chase_cg"]


def test_loads_cache_where_the_header_says(loaded: LoadedSuite) -> None:
    source = {v.stem: v.source for v in loaded.versions}
    assert "ld.global.u64" in source["01_pointer_chase"]
    assert "ld.global.cg.u64" in source["02_pointer_chase_cg"]
    assert "ld.global.ca" not in source["02_pointer_chase_cg"]


@pytest.mark.parametrize("kib", [16, 64, 1024])
def test_the_chase_is_one_cycle_through_every_slot(suite: ModuleType, kib: int) -> None:
    n = kib * 1024 // 128
    with numpy_as_cupy():
        order = np.random.default_rng(kib).permutation(n)
        follow = suite.chain(order, np)
    seen = np.zeros(n, dtype=bool)
    s = int(order[0])
    for _ in range(n):
        assert not seen[s]
        seen[s] = True
        s = int(follow[s])
    assert seen.all() and s == order[0]


@pytest.mark.parametrize("kib", [16, 192, 1024])
def test_numpy_walk_of_the_inputs_ends_at_the_reference(
    loaded: LoadedSuite, suite: ModuleType, kib: int
) -> None:
    bench = loaded.claims["01_pointer_chase"]
    shape = {"kib": kib}
    inputs, ref = inputs_and_reference(bench, shape)
    nxt = inputs["next"]
    # Only the first word of each 128-byte slot is an offset, and it points at a slot.
    slots = nxt.reshape(-1, 16)
    assert (slots[:, 1:] == 0).all()
    offsets = slots[:, 0].astype(np.int64)
    assert ((offsets % 128) == 0).all() and offsets.min() >= 0
    assert offsets.max() < kib * 1024
    off = inputs["starts"].astype(np.int64)
    assert len(set(off.tolist())) == min(128, kib * 8)  # distinct starts while slots allow
    for _ in range(suite.STEPS):
        off = nxt[off // 8].astype(np.int64)
    np.testing.assert_array_equal(off.astype(np.float64), ref["out"])


def test_the_chain_holds_no_addresses(loaded: LoadedSuite) -> None:
    """The re-check copies fresh values into the checked buffer: values that named their own
    buffer (device addresses) would send the chase into another one. Made twice, in two
    buffers, the inputs are the same bits."""
    bench = loaded.claims["01_pointer_chase"]
    first, _ = inputs_and_reference(bench, {"kib": 64}, seed=5)
    second, _ = inputs_and_reference(bench, {"kib": 64}, seed=5)
    assert first["next"].ctypes.data != second["next"].ctypes.data
    for name in first:
        np.testing.assert_array_equal(first[name], second[name])


def test_slots_must_be_whole(suite: ModuleType) -> None:
    assert suite.slots({"kib": 1048576}) == 1 << 23
    with pytest.raises(ValueError):
        suite.slots({"kib": 0.0625})  # 64 bytes: half a slot


@pytest.mark.parametrize("stem", STEMS)
def test_header_and_registers(loaded: LoadedSuite, stem: str) -> None:
    version = next(v for v in loaded.versions if v.stem == stem)
    assert_header(version)
    assert "Near and far L2" in " ".join(version.header)
    regs, smem, _ = assert_registers_recorded(version)
    assert smem == 0


@pytest.mark.gpu
@pytest.mark.parametrize("stem", STEMS)
@pytest.mark.parametrize("kib", [16, 8192])
def test_on_the_gpu(loaded: LoadedSuite, stem: str, kib: int) -> None:
    version = next(v for v in loaded.versions if v.stem == stem)
    assert check_on_device(loaded, version, {"kib": kib}) == 0.0
