"""The bandwidth suite without a GPU: its cases and work model, the rotating read pattern
(no repeated address inside an unrolled iteration, 32 consecutive vectors per warp), and a
NumPy run of each kernel's index arithmetic over the suite's inputs equal to the reference;
headers and ptxas resources; plus an on-device check marked `gpu`."""

from __future__ import annotations

import re
import sys
from types import ModuleType

import numpy as np
import pytest
from mb_suite_shim import assert_header, assert_registers_recorded, inputs_and_reference
from microbench_checks import KERNELS, check_on_device

from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

STEMS = ["01_smem_read", "02_l1_read", "03_l2_read", "04_hbm_read"]


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(KERNELS / "bandwidth")


@pytest.fixture(scope="module")
def suite(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_bandwidth"]


def _bench(loaded: LoadedSuite, stem: str):  # noqa: ANN202
    return loaded.claims[stem]


def test_cases_and_names(loaded: LoadedSuite) -> None:
    assert [v.stem for v in loaded.versions] == STEMS
    labels = {(c.version.stem, c.shape_label, c.headline) for c in plan_cases([loaded])}
    assert labels == {
        ("01_smem_read", "passes=256", True),
        ("02_l1_read", "passes=256", True),
        ("03_l2_read", "kib=4096", False),
        ("03_l2_read", "kib=16384", True),
        ("03_l2_read", "kib=32768", False),
        ("04_hbm_read", "kib=1048576", True),
    }
    for stem in STEMS[:3]:
        bench = _bench(loaded, stem)
        assert not bench.flush_l2 and not bench.bounded
    hbm = _bench(loaded, "04_hbm_read")
    assert hbm.flush_l2 and hbm.roofline.bandwidth == "read" and hbm.roofline.compute is None


def test_work_model(loaded: LoadedSuite, suite: ModuleType) -> None:
    assert _bench(loaded, "01_smem_read").bytes({"passes": 256}) == 2112 * 256 * 64 * 256
    assert _bench(loaded, "03_l2_read").bytes({"kib": 16384}) == 16 * 2**20 * 256
    assert _bench(loaded, "04_hbm_read").bytes({"kib": 1048576}) == 2**30 + 4 * 32768
    assert suite.l2_blocks({"kib": 16384}) == 2048 and suite.hbm_blocks({"kib": 1048576}) == 32768
    with pytest.raises(ValueError):
        suite.l2_blocks({"kib": 4100})


def _kernel_constants(source: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"constexpr int (\w+) = (\d+);", source)}


@pytest.mark.parametrize(
    ("stem", "vecs_name"),
    [("01_smem_read", "ON_CHIP_VECS"), ("02_l1_read", "ON_CHIP_VECS"), ("03_l2_read", "L2_VECS")],
)
def test_read_pattern(loaded: LoadedSuite, suite: ModuleType, stem: str, vecs_name: str) -> None:
    version = next(v for v in loaded.versions if v.stem == stem)
    k = _kernel_constants(version.source)
    threads, vecs, unroll = k["THREADS"], k["VECS"], k["UNROLL"]
    assert threads == suite.THREADS and vecs == getattr(suite, vecs_name)
    assert "rot = static_cast<unsigned>(p) * 512" in version.source  # 32 vectors a pass
    chunk = threads * vecs
    t = np.arange(threads)[:, None, None]
    u = np.arange(unroll)[None, :, None]
    kk = np.arange(vecs)[None, None, :]
    for p in range(0, 64, unroll):
        idx = (t + 32 * (p + u) + threads * kk) % chunk
        flat = idx.reshape(threads, -1)
        # no thread reads one vector twice in an unrolled iteration: nothing to merge
        assert all(len(set(row.tolist())) == row.size for row in flat)
        # a warp reads 32 consecutive vectors per load
        per_warp = idx.reshape(threads // 32, 32, -1)
        assert (np.diff(per_warp, axis=1) == 1).all()


def _kernel_sums(words: np.ndarray, threads: int, vecs: int, passes: int) -> np.ndarray:
    """A thread-by-thread NumPy run of the loop of 01-03 over one tile or chunk."""
    vec = words.reshape(-1, 4).astype(np.int64).sum(axis=1)
    chunk = threads * vecs
    out = np.zeros(threads, dtype=np.int64)
    for t in range(threads):
        for p in range(passes):
            for k in range(vecs):
                out[t] += vec[(t + 32 * p + threads * k) % chunk]
    return out


def test_tile_reference_is_the_kernels_sum(loaded: LoadedSuite, suite: ModuleType) -> None:
    shape = {"passes": 32}
    inputs, ref = inputs_and_reference(_bench(loaded, "01_smem_read"), shape)
    want = _kernel_sums(inputs["src"], 256, 4, 32)
    assert ref["out"].shape == (2112, 256)
    np.testing.assert_array_equal(ref["out"][0], want)
    np.testing.assert_array_equal(ref["out"][-1], want)
    assert ref["out"].max() < 2**32


def test_l2_reference_is_the_kernels_sum(loaded: LoadedSuite, suite: ModuleType) -> None:
    inputs, ref = inputs_and_reference(_bench(loaded, "03_l2_read"), {"kib": 4096})
    words = inputs["src"].reshape(512, -1)
    for b in (0, 7, 511):
        want = _kernel_sums(words[b], 256, 2, suite.L2_PASSES)
        np.testing.assert_array_equal(ref["out"][b], want)
    assert ref["out"].max() < 2**32


def test_hbm_reference_sums_each_block(
    loaded: LoadedSuite, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = _bench(loaded, "04_hbm_read")
    inputs, ref = inputs_and_reference(bench, {"kib": 1024})
    blocks = inputs["src"].reshape(32, -1).astype(np.int64).sum(axis=1)
    np.testing.assert_array_equal(ref["out"], blocks)
    assert ref["out"].max() < 2**29


@pytest.mark.parametrize("stem", STEMS)
def test_header_and_registers(loaded: LoadedSuite, stem: str) -> None:
    version = next(v for v in loaded.versions if v.stem == stem)
    assert_header(version)
    _, smem, _ = assert_registers_recorded(version)
    assert smem == {"01_smem_read": 16384, "04_hbm_read": 32}.get(stem, 0)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("stem", "shape"),
    [
        ("01_smem_read", {"passes": 256}),
        ("02_l1_read", {"passes": 256}),
        ("03_l2_read", {"kib": 4096}),
        ("04_hbm_read", {"kib": 65536}),
    ],
)
def test_on_the_gpu(loaded: LoadedSuite, stem: str, shape: dict[str, int]) -> None:
    version = next(v for v in loaded.versions if v.stem == stem)
    assert check_on_device(loaded, version, shape) == 0.0
