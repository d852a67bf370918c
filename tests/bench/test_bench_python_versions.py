"""Versions written in Python (`NN_name.py`, a Triton kernel and its launcher on the device)
on the fake backend: imported instead of compiled, then checked, refused, timed, recorded and
fingerprinted exactly like a `.cu` version; plus a suite that reuses another topic's suite, and
several --only patterns in one run."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from fakebench import FakeBackend, make_topic, options

from curriculum.bench.api import discover_versions
from curriculum.bench.errors import SuiteError
from curriculum.bench.runner import SilentReporter, plan, run_bench
from curriculum.bench.staleness import fingerprint, stale_cases, used_topics, version_file
from curriculum.bench.suites import load_suite, select_cases, topic_globs_of
from curriculum.results import read_results

# What each fake Python version does when launched (the fake suite calls module.run).
BEHAVIOURS = {
    "good": "out[:] = x",
    "wrong": "out[:] = x\nout[3] += 1.0",
    "constant": "out[:] = 1.0",
    "skip": "pass",
    "once": "if not _calls:\n    out[:] = x\n_calls.append(1)",
    "stateful": "_calls.append(1)\nout[:] = x if len(_calls) == 1 else x * 2",
}


def python_version(title: str, behaviour: str = "good", speed: float = 0.8) -> str:
    """A `.py` version for the fake suite: `run(shape, arrays)` writes `out` and spends
    device time on the fake clock, as a fake `.cu` module does."""
    body = textwrap.indent(BEHAVIOURS[behaviour], "    ")
    return (
        f"# {title}\n"
        "# a version written in Python\n"
        "import fakebench\n\n"
        "_calls = []\n\n\n"
        "def run(shape, arrays):\n"
        '    x, out = arrays["x"], arrays["out"]\n'
        f"{body}\n"
        f'    fakebench.spend(fakebench.copy_floor_ms(8.0 * shape["n"]) / {speed})\n'
    )


def topic_with_python(root: Path, behaviour: str = "good") -> Path:
    topic = make_topic(root, {"01_copy_cuda": ("good", 0.8)})
    (topic / "02_copy_python.py").write_text(python_version("02 copy in Python", behaviour))
    return topic


def bench(root: Path, backend: FakeBackend, **kw: object):
    return run_bench(options(root, **kw), backend, SilentReporter())


def test_python_version_is_discovered_in_number_order(tmp_path: Path) -> None:
    topic = topic_with_python(tmp_path)
    (topic / "helpers.py").write_text("X = 1\n")  # not a version: no number
    versions = discover_versions(topic)
    assert [(v.stem, v.language) for v in versions] == [
        ("01_copy_cuda", "cuda"),
        ("02_copy_python", "python"),
    ]
    assert versions[1].title == "02 copy in Python"
    assert versions[1].header[:2] == ["02 copy in Python", "a version written in Python"]
    assert versions[0].title == "01_copy_cuda"  # the .cu header is read as before


def test_python_version_is_imported_checked_timed_and_recorded(tmp_path: Path) -> None:
    topic_with_python(tmp_path)
    backend = FakeBackend()
    summary = bench(tmp_path, backend)
    assert summary.exit_code == 0
    assert {o.status for o in summary.outcomes} == {"recorded"}
    assert len(backend.compiled) == 1  # the .cu file only: the .py file is imported
    results = read_results(summary.results_path)
    case = results.case("fake/02_copy_python")
    assert case is not None and case.title == "02 copy in Python"
    assert case.pct_roofline == pytest.approx(80.0, rel=1e-6)
    assert case.baseline is not None and case.baseline.name == "fake copy"
    assert case.fingerprint == fingerprint(tmp_path, "fake", "02_copy_python")


@pytest.mark.parametrize(
    ("behaviour", "status", "says"),
    [
        ("wrong", "failed", "above-tolerance"),
        ("constant", "refused", "constant-output"),
        ("skip", "failed", "got nan"),
        ("stateful", "failed", "after the timed launches"),
        ("once", "refused", "stale-output"),
    ],
)
def test_python_version_gets_every_check(
    tmp_path: Path, behaviour: str, status: str, says: str
) -> None:
    topic_with_python(tmp_path, behaviour)
    summary = bench(tmp_path, FakeBackend(), only="fake/02_*")
    first = summary.outcomes[0]  # the smallest shape, the first the version is launched at
    assert first.status == status
    assert summary.exit_code == 1
    text = "\n".join(first.messages)
    assert says in text
    assert read_results(summary.results_path).case("fake/02_copy_python") is None


def test_import_error_fails_every_shape_with_the_file_named(tmp_path: Path) -> None:
    topic = topic_with_python(tmp_path)
    (topic / "02_copy_python.py").write_text("import no_such_module_anywhere\n")
    summary = bench(tmp_path, FakeBackend(), only="fake/02_*")
    assert [o.status for o in summary.outcomes] == ["failed", "failed"]
    for outcome in summary.outcomes:
        text = "\n".join(outcome.messages)
        assert "02_copy_python.py: import failed: ModuleNotFoundError" in text


def test_python_source_is_fingerprinted_and_goes_stale(tmp_path: Path) -> None:
    topic = topic_with_python(tmp_path)
    backend = FakeBackend()
    results = read_results(bench(tmp_path, backend).results_path)
    assert stale_cases(tmp_path, results) == []
    again = bench(tmp_path, backend)
    assert {o.status for o in again.outcomes} == {"skipped"}
    py = topic / "02_copy_python.py"
    assert version_file(topic, "02_copy_python") == py
    before = fingerprint(tmp_path, "fake", "02_copy_python")
    py.write_text(py.read_text().replace("\n", "\r\n"))  # line endings alone change nothing
    assert fingerprint(tmp_path, "fake", "02_copy_python") == before
    py.write_text(py.read_text() + "# edited\n")
    assert fingerprint(tmp_path, "fake", "02_copy_python") != before
    stale = {(s.id, s.reason) for s in stale_cases(tmp_path, results)}
    assert stale == {("fake/02_copy_python", "source-changed")}
    rerun = bench(tmp_path, backend)
    assert {o.case.version.stem for o in rerun.outcomes if o.status == "recorded"} == {
        "02_copy_python"
    }
    py.unlink()
    reasons = {s.reason for s in stale_cases(tmp_path, read_results(rerun.results_path))}
    assert reasons == {"source-missing"}


def test_cu_fingerprint_is_unchanged_by_python_support(tmp_path: Path) -> None:
    """The .cu rule hashes what it always did: a results file measured before stays fresh."""
    import hashlib

    topic = make_topic(tmp_path, {"01_copy_cuda": ("good", 0.8)})
    cu = (topic / "01_copy_cuda.cu").read_bytes()
    suite = (topic / "suite.py").read_bytes()
    h = hashlib.sha256()
    h.update(b"harness 2\n")
    h.update(b"cu\n" + hashlib.sha256(cu).hexdigest().encode() + b"\n")
    h.update(f"suite {hashlib.sha256(suite).hexdigest()}\n".encode())
    assert fingerprint(tmp_path, "fake", "01_copy_cuda") == h.hexdigest()


def test_misnamed_and_doubled_python_versions_are_suite_errors(tmp_path: Path) -> None:
    topic = topic_with_python(tmp_path)
    (topic / "3_copy_bad.py").write_text(python_version("bad"))
    (topic / "01_copy_cuda.py").write_text(python_version("twice"))
    with pytest.raises(SuiteError) as err:
        load_suite(topic)
    text = str(err.value)
    assert "3_copy_bad.py: not named NN_name.py" in text
    assert "01_copy_cuda.cu and 01_copy_cuda.py are one version twice" in text


def test_python_version_must_be_claimed(tmp_path: Path) -> None:
    topic = topic_with_python(tmp_path)
    (topic / "04_scale.py").write_text(python_version("unclaimed"))
    with pytest.raises(SuiteError, match="04_scale.py: claimed by no benchmark"):
        load_suite(topic)


# --- a suite that reuses another topic's benchmark -------------------------------------------

REUSING_SUITE = """
import dataclasses

from curriculum.bench.api import Suite
from curriculum.bench.suites import suite_module

BASE = suite_module("fake", __file__)

SUITE = Suite(
    topic="again",
    benchmarks=[dataclasses.replace(BASE.COPY, match="*_copy_*", shapes=[{"n": 4096}])],
)
"""


def reusing_topic(root: Path) -> Path:
    make_topic(root, {"01_copy_cuda": ("good", 0.8)})
    again = root / "kernels" / "again"
    again.mkdir()
    (again / "suite.py").write_text(REUSING_SUITE)
    (again / "01_copy_python.py").write_text(python_version("01 copy again"))
    return again


def test_reused_suite_is_part_of_the_fingerprint(tmp_path: Path) -> None:
    again = reusing_topic(tmp_path)
    assert used_topics((again / "suite.py").read_bytes()) == ["fake"]
    loaded = load_suite(again)
    bench_ = loaded.claims["01_copy_python"]
    assert bench_.name == "copy" and [dict(s) for s in bench_.shapes] == [{"n": 4096}]
    summary = bench(tmp_path, FakeBackend(), only="again/*")
    assert {o.status for o in summary.outcomes} == {"recorded"}
    results = read_results(summary.results_path)
    assert stale_cases(tmp_path, results) == []
    before = fingerprint(tmp_path, "again", "01_copy_python")
    used = tmp_path / "kernels" / "fake" / "suite.py"
    used.write_text(used.read_text() + "\n# inputs reconsidered\n")
    assert fingerprint(tmp_path, "again", "01_copy_python") != before
    assert {s.reason for s in stale_cases(tmp_path, results)} == {"include-changed"}


def test_reusing_a_missing_topic_is_a_suite_error(tmp_path: Path) -> None:
    again = reusing_topic(tmp_path)
    (again / "suite.py").write_text(REUSING_SUITE.replace('"fake"', '"nowhere"'))
    with pytest.raises(SuiteError, match="uses topic 'nowhere'"):
        load_suite(again)


# --- several --only patterns: a Triton version and its CUDA counterpart in one run ------------


def test_only_takes_several_patterns(tmp_path: Path) -> None:
    reusing_topic(tmp_path)
    assert topic_globs_of("again/*") == ["again"]
    assert topic_globs_of("again/*,fake/01_*") == ["again", "fake"]
    assert topic_globs_of("again/*, again/01_*") == ["again"]
    assert topic_globs_of("again/*,*copy*") == topic_globs_of(None) == ["*"]
    cases = plan(options(tmp_path, only="again/*,fake/01_*", headline=True))
    assert sorted(c.id for c in cases) == ["again/01_copy_python", "fake/01_copy_cuda"]
    assert select_cases(cases, "nothing/*,again/*") == [
        c for c in cases if c.id == "again/01_copy_python"
    ]


def test_one_run_times_the_shared_library_candidate_once(tmp_path: Path) -> None:
    reusing_topic(tmp_path)
    backend = FakeBackend()
    summary = bench(tmp_path, backend, only="again/*,fake/01_*", headline=True)
    assert {o.status for o in summary.outcomes} == {"recorded"}
    results = read_results(summary.results_path)
    python, cuda = results.case("again/01_copy_python"), results.case("fake/01_copy_cuda")
    assert python is not None and cuda is not None and python.run == cuda.run
    assert python.baseline == cuda.baseline  # one timing of "fake copy" at n=4096
    # three timings: the two kernels and the one library candidate they share
    assert len(backend.timers) == 3


def test_several_patterns_load_only_their_topics(tmp_path: Path) -> None:
    reusing_topic(tmp_path)
    broken = tmp_path / "kernels" / "broken"
    broken.mkdir()
    (broken / "suite.py").write_text("raise RuntimeError('half-written suite')\n")
    cases = plan(options(tmp_path, only="again/*,fake/01_*"))
    assert {c.topic for c in cases} == {"again", "fake"}
    with pytest.raises(SuiteError, match="half-written suite"):
        plan(options(tmp_path, only="*/01_*"))
