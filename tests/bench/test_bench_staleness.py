"""Staleness: recorded cases against the current kernel and suite sources."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakebench import (
    FakeBackend,
    fake_root_fixture,  # noqa: F401 (fixture)
    make_topic,
    options,
)

from curriculum.bench import staleness
from curriculum.bench.runner import SilentReporter, run_bench
from curriculum.bench.staleness import fingerprint, includes, stale_cases
from curriculum.results import read_results, write_results


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


# --- the fingerprint: one rule for bench (skip) and build (stale) ------------------------------


def _with_include(root: Path) -> Path:
    """01 includes common/util.cuh, which includes detail.cuh next to it."""
    topic = root / "kernels" / "fake"
    (topic / "common").mkdir(exist_ok=True)
    (topic / "common" / "util.cuh").write_text('#pragma once\n#include "detail.cuh"\n')
    (topic / "common" / "detail.cuh").write_text("#define DETAIL 1\n")
    cu = topic / "01_copy_good.cu"
    cu.write_text(cu.read_text() + '#include "common/util.cuh"\n#include <cuda_fp16.h>\n')
    return topic


def test_includes_are_followed_recursively(root: Path) -> None:
    topic = _with_include(root)
    found = includes(topic / "01_copy_good.cu")
    assert found == [
        (topic / "common" / "util.cuh").resolve(),
        (topic / "common" / "detail.cuh").resolve(),
    ]


@pytest.mark.parametrize(
    ("touch", "reason"),
    [
        ("01_copy_good.cu", "source-changed"),
        ("common/util.cuh", "include-changed"),
        ("common/detail.cuh", "include-changed"),
        ("suite.py", "suite-changed"),
    ],
)
def test_touching_any_input_makes_the_figure_stale(root: Path, touch: str, reason: str) -> None:
    topic = _with_include(root)
    results = measured(root)
    before = fingerprint(root, "fake", "01_copy_good")
    assert stale_cases(root, results) == []
    path = topic / touch
    path.write_bytes(path.read_bytes() + b" ")  # one byte, even in a comment or whitespace
    assert fingerprint(root, "fake", "01_copy_good") != before
    assert {s.reason for s in stale_cases(root, results)} == {reason}
    # bench uses the same rule: the stale cases run again, nothing else
    again = run_bench(options(root, only="fake/01_*"), FakeBackend(), SilentReporter())
    assert {o.status for o in again.outcomes} == {"recorded"}
    assert stale_cases(root, read_results(again.results_path)) == []


def test_an_include_from_another_topic_does_not_tie_the_figure_to_one_checkout(
    root: Path, tmp_path: Path
) -> None:
    import shutil

    topic = root / "kernels" / "fake"
    other = root / "kernels" / "shared_kernels"
    other.mkdir()
    (other / "common.cuh").write_text("#define SHARED 1\n")
    cu = topic / "01_copy_good.cu"
    cu.write_text(cu.read_text() + '#include "../shared_kernels/common.cuh"\n')
    here = fingerprint(root, "fake", "01_copy_good")
    moved = tmp_path / "elsewhere" / "checkout"
    shutil.copytree(root, moved)
    assert fingerprint(moved, "fake", "01_copy_good") == here
    (moved / "kernels" / "shared_kernels" / "common.cuh").write_text("#define SHARED 2\n")
    assert fingerprint(moved, "fake", "01_copy_good") != here


def test_a_missing_include_counts_and_its_arrival_changes_the_fingerprint(root: Path) -> None:
    topic = root / "kernels" / "fake"
    cu = topic / "01_copy_good.cu"
    cu.write_text(cu.read_text() + '#include "later.cuh"\n')
    before = fingerprint(root, "fake", "01_copy_good")
    (topic / "later.cuh").write_text("// now here\n")
    assert fingerprint(root, "fake", "01_copy_good") != before


def test_harness_version_is_part_of_the_fingerprint(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = measured(root)
    monkeypatch.setattr(staleness, "HARNESS_VERSION", staleness.HARNESS_VERSION + 1)
    assert {s.reason for s in stale_cases(root, results)} == {"harness-changed"}


def test_an_unrelated_suite_changes_nothing(root: Path) -> None:
    make_topic(root, {"01_copy_other": ("good", 0.8)}, topic="other")
    results = measured(root)
    other = root / "kernels" / "other"
    (other / "suite.py").write_text((other / "suite.py").read_text() + "\n# edited\n")
    (other / "01_copy_other.cu").write_text("// changed\n")
    assert stale_cases(root, results) == []
    again = run_bench(options(root, only="fake/01_*"), FakeBackend(), SilentReporter())
    assert {o.status for o in again.outcomes} == {"skipped"}


def test_cases_carry_their_fingerprint(root: Path) -> None:
    results = measured(root)
    want = fingerprint(root, "fake", "01_copy_good")
    assert want is not None
    assert {c.fingerprint for c in results.cases} == {want}
    assert {c.harness for c in results.cases} == {staleness.HARNESS_VERSION}


def test_schema1_cases_judged_by_their_hashes_but_rerun_by_bench(root: Path) -> None:
    results = measured(root)
    legacy = results.model_copy(
        update={"cases": [c.model_copy(update={"fingerprint": None}) for c in results.cases]}
    )
    write_results(root / "kernels" / "results" / "fake-gpu-9000.json", legacy)
    assert stale_cases(root, legacy) == []  # the build keeps showing them
    again = run_bench(options(root, only="fake/01_*"), FakeBackend(), SilentReporter())
    assert {o.status for o in again.outcomes} == {"recorded"}  # bench measures them again
