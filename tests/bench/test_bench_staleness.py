"""Staleness: recorded cases against the current kernel and suite sources."""

from __future__ import annotations

from pathlib import Path

from fakebench import (
    FakeBackend,
    fake_root_fixture,  # noqa: F401 (fixture)
    options,
)

from curriculum.bench.runner import SilentReporter, run_bench
from curriculum.bench.staleness import stale_cases
from curriculum.results import read_results


def measured(root: Path):
    s = run_bench(options(root, only="fake/01_*"), FakeBackend(), SilentReporter())
    return read_results(s.results_path)


def test_fresh_results_are_not_stale(root: Path) -> None:
    assert stale_cases(root, measured(root)) == []


def test_changed_and_missing_sources(root: Path) -> None:
    results = measured(root)
    cu = root / "kernels" / "fake" / "01_copy_good.cu"
    cu.write_text(cu.read_text().replace("\n", "\r\n"))  # line endings alone change nothing
    assert stale_cases(root, results) == []
    cu.write_text(cu.read_text() + "// edited\n")
    stale = stale_cases(root, results)
    assert {(s.id, s.shape_label, s.reason) for s in stale} == {
        ("fake/01_copy_good", "n=1024", "source-changed"),
        ("fake/01_copy_good", "n=4096", "source-changed"),
    }
    assert "re-run `curriculum bench`" in stale[0].message()
    cu.unlink()
    assert {s.reason for s in stale_cases(root, results)} == {"source-missing"}


def test_changed_suite(root: Path) -> None:
    results = measured(root)
    suite = root / "kernels" / "fake" / "suite.py"
    suite.write_text(suite.read_text() + "\n# tolerance reconsidered\n")
    assert {s.reason for s in stale_cases(root, results)} == {"suite-changed"}
