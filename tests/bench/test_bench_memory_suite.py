"""The memory suite without a GPU: it loads, claims every file, and its kernels compile."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from curriculum.bench.suites import load_suite, plan_cases

MEMORY = Path(__file__).resolve().parents[2] / "kernels" / "memory"
EXPECTED = [
    "01_copy_scalar",
    "02_copy_vec4",
    "03_reduce_atomic",
    "04_reduce_smem_tree",
    "05_reduce_warp_shuffle",
    "06_transpose_naive",
    "07_transpose_smem",
    "08_transpose_padded",
]


def test_suite_claims_every_version() -> None:
    loaded = load_suite(MEMORY)
    assert [v.stem for v in loaded.versions] == EXPECTED
    assert {b.name for b in loaded.suite.benchmarks} == {"copy", "reduce", "transpose"}
    cases = plan_cases([loaded])
    headlines = {c.id: c.shape_label for c in cases if c.headline}
    assert headlines["memory/02_copy_vec4"] == "n=268435456"
    assert headlines["memory/08_transpose_padded"] == "rows=8192,cols=8192"
    assert len(cases) == 32


@pytest.mark.parametrize("stem", EXPECTED)
def test_header_states_idea_bound_and_constraints(stem: str) -> None:
    loaded = load_suite(MEMORY)
    version = next(v for v in loaded.versions if v.stem == stem)
    assert re.match(rf"^{stem[:2]} \w+", version.title), version.title
    text = " ".join(version.header).lower()
    for word in ("idea", "expected bound", "size constraints"):
        assert word in text, f"{stem}: header lacks {word!r}"
    assert f"{version.name}(" in version.source  # entry point named after the file
    assert "static_assert" in version.source


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("stem", EXPECTED)
def test_compiles_for_sm90(stem: str) -> None:
    cu = MEMORY / f"{stem}.cu"
    proc = subprocess.run(
        ["nvcc", "-arch=sm_90", "-std=c++17", "-c", "-o", "/dev/null", str(cu)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
