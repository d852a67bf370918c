"""The SwiGLU suite without a GPU: it loads, claims every file, plans every launch and counts
its work; and the roundings of both versions, replayed in NumPy, fit inside the tolerance."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from conftest import KERNEL_ENTRY

from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

SWIGLU = Path(__file__).resolve().parents[2] / "kernels" / "swiglu"
HEADLINE = {"tokens": 8192, "d": 28672}
ENTRIES = {"01_unfused": {"unfused_sigmoid", "unfused_mul"}, "02_fused": {"fused"}}


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(SWIGLU)


@pytest.fixture(scope="module")
def suite(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_swiglu"]


def test_one_benchmark_claims_both_versions(loaded: LoadedSuite) -> None:
    assert {v.stem: loaded.claims[v.stem].name for v in loaded.versions} == {
        "01_unfused": "swiglu",
        "02_fused": "swiglu",
    }
    assert len(plan_cases([loaded])) == 2 * 2


def test_entry_points_and_grid(loaded: LoadedSuite, suite: ModuleType) -> None:
    for version in loaded.versions:
        assert set(KERNEL_ENTRY.findall(version.source)) == ENTRIES[version.stem]
        assert version.stem in suite.LAUNCHES
    bench = loaded.suite.benchmarks[0]
    for shape in bench.shapes:
        values = shape["tokens"] * shape["d"]
        assert suite.blocks(shape) * 256 * 2 * 8 == values
        assert values * 2 >= 100 << 20  # every tensor past the 50 MB L2
    with pytest.raises(ValueError, match="multiple of 4096"):
        suite.blocks({"tokens": 3, "d": 1000})


def test_work_model_at_headline(loaded: LoadedSuite) -> None:
    bench = loaded.suite.benchmarks[0]
    values = 8192 * 28672
    assert dict(bench.headline) == HEADLINE
    assert bench.bytes(HEADLINE) == 3 * 2 * values == 1_409_286_144
    assert bench.flops(HEADLINE) == 4 * values
    assert bench.roofline.bandwidth == "copy" and bench.roofline.compute is None
    names = [c.name for c in bench.candidates]
    assert names == ["F.silu(gate) * up", "torch.compile(F.silu(gate) * up)"]
    assert bench.compare is not None and bench.tolerance == 1e-2


@pytest.mark.parametrize("stem", sorted(ENTRIES))
def test_header_states_idea_bound_and_constraints(loaded: LoadedSuite, stem: str) -> None:
    version = next(v for v in loaded.versions if v.stem == stem)
    assert re.match(rf"^{stem[:2]} SwiGLU \S.*: \S", version.title), version.title
    text = " ".join(version.header)
    previous = "Idea:" if stem.startswith("01") else "Idea against 01:"
    for label in (previous, "Expected bound:", "Size constraints:"):
        assert label in text, f"{stem}: header lacks {label!r}"
    assert "tokens = 8192, d = 28672" in text and "4.28 TB/s" in text and " us" in text
    assert "static_assert" in version.source


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("stem", sorted(ENTRIES))
def test_compiles_for_sm90_without_spills(stem: str) -> None:
    proc = subprocess.run(
        ["nvcc", "-arch=sm_90", "-std=c++17", "-Xptxas", "-v", "-c", "-o", "/dev/null"]
        + [str(SWIGLU / f"{stem}.cu")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
    spills = re.findall(r"(\d+) bytes (?:stack frame|spill stores|spill loads)", proc.stderr)
    assert spills and all(n == "0" for n in spills), proc.stderr


def _round(suite: ModuleType, v: np.ndarray) -> np.ndarray:
    return suite.bf16_bits_to_float64(suite.to_bf16_bits(v.astype(np.float32), np), np)


def test_roundings_of_both_versions_fit_the_tolerance(
    loaded: LoadedSuite, suite: ModuleType
) -> None:
    rng = np.random.default_rng(3)
    gate = _round(suite, 3.0 * rng.standard_normal(200_000))
    up = _round(suite, rng.standard_normal(200_000))
    want = suite.swiglu64(gate, up, np)
    np.testing.assert_allclose(want, gate * up / (1 + np.exp(-gate)), rtol=1e-15)
    fused = _round(suite, want)  # fp32 inside, one rounding at the store
    s = _round(suite, 1.0 / (1.0 + np.exp(-gate)))  # 01: three stored bf16 results
    unfused = _round(suite, _round(suite, gate * s) * up)
    tolerance = loaded.suite.benchmarks[0].tolerance

    def rel(got: np.ndarray) -> float:
        return float(np.linalg.norm(got - want) / np.linalg.norm(want))

    assert 1e-3 < rel(fused) < tolerance / 5
    assert rel(fused) < rel(unfused) < tolerance / 2
