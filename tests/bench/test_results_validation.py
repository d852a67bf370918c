"""Results files are validated on load: every violation at its JSON line, with its case id,
and `curriculum check` fails on them (one test per error code)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLE, TEMPLATES
from fakebench import FakeBackend, fake_root_fixture, options  # noqa: F401 (fixture)

from curriculum.bench.runner import SilentReporter, run_bench
from curriculum.cli import main
from curriculum.results import CEILING_TOLERANCE, check_text, format_data, read_results


@pytest.fixture(name="measured")
def measured_fixture(root: Path) -> Path:
    """A schema-2 results file of the fake topic: 01 and 03 are not recorded, 01 at two shapes."""
    s = run_bench(options(root, only="fake/01_*"), FakeBackend(), SilentReporter())
    return s.results_path


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def line_of(path: Path, shape: str, key: str) -> int:
    """1-based line of `key` inside the case at `shape`."""
    text = lines(path)
    start = next(i for i, t in enumerate(text) if t.startswith('  {"id": ') and shape in t)
    return next(i for i in range(start, len(text)) if f'"{key}": ' in text[i]) + 1


def edit_case(path: Path, shape: str, change) -> None:
    """Apply `change(case_dict)` to the case at `shape`, written in the writer's layout."""
    data = json.loads(path.read_text())
    for case in data["cases"]:
        if case["shape_label"] == shape:
            change(case)
    path.write_text(format_data(data))


def violations(path: Path):
    _, found = check_text(path.read_text())
    return found


def codes(path: Path) -> set[str]:
    return {v.code for v in violations(path)}


def stat_edit(**values: object):
    def change(case: dict) -> None:
        case["stat"].update(values)

    return change


@pytest.mark.parametrize(
    ("values", "code"),
    [
        ({"median_ms": -0.01}, "results.not-positive"),
        ({"median_ms": 0.0}, "results.not-positive"),
        ({"median_ms": math.nan}, "results.not-finite"),
        ({"p80_ms": math.inf}, "results.not-finite"),
    ],
)
def test_bad_median_fails_with_file_line_and_case(measured: Path, values, code: str) -> None:
    edit_case(measured, "n=4096", stat_edit(**values))
    found = violations(measured)
    assert {v.code for v in found} >= {code}
    v = next(v for v in found if v.code == code)
    assert v.line == line_of(measured, "n=4096", "stat")
    assert v.case == "fake/01_copy_good @ n=4096"
    assert "cases.1.stat" in v.text() and "fake/01_copy_good @ n=4096" in v.text()


def test_unordered_percentiles(measured: Path) -> None:
    def swap(case: dict) -> None:
        case["stat"]["p20_ms"], case["stat"]["p80_ms"] = case["stat"]["p80_ms"] * 1.5, \
            case["stat"]["p20_ms"]

    edit_case(measured, "n=1024", swap)
    found = violations(measured)
    assert [v.code for v in found] == ["results.percentiles"]
    assert found[0].line == line_of(measured, "n=1024", "stat")
    assert found[0].case == "fake/01_copy_good @ n=1024"


def test_inconsistent_sample_count(measured: Path) -> None:
    edit_case(measured, "n=1024", stat_edit(samples=999))
    assert codes(measured) == {"results.samples"}


def test_above_ceiling_median(measured: Path) -> None:
    """A median faster than the copy ceiling allows, everything derived from it consistent."""
    results = read_results(measured)
    ceiling = results.runs[results.cases[1].run].ceilings["copy"].gbps
    assert ceiling is not None

    def faster(case: dict) -> None:
        ms = case["bytes"] / (ceiling * 1.2 * 1e9) * 1e3  # 20% above the copy bandwidth
        case["stat"].update(median_ms=ms, p20_ms=ms, min_ms=ms * 0.99, p80_ms=ms, max_ms=ms)
        case["stat"]["raw_ms"] = [ms] * case["stat"]["samples"]
        case["stat"]["min_ms"] = ms
        case["gbps"] = case["bytes"] / (ms * 1e-3) / 1e9
        case["tflops"] = 0.0
        case["pct_roofline"] = 100 * case["roofline_ms"] / ms
        lib = next(b for b in case["baselines"] if b["name"] == case["library"])
        case["pct_library"] = 100 * lib["stat"]["median_ms"] / ms

    edit_case(measured, "n=4096", faster)
    found = violations(measured)
    assert {v.code for v in found} == {"results.above-ceiling"}
    assert all(v.line == line_of(measured, "n=4096", "stat") for v in found)
    assert any("above the run's copy ceiling" in v.message for v in found)
    assert f"tolerance {100 * CEILING_TOLERANCE:.0f}%" in found[0].message


def test_within_tolerance_of_the_ceiling_is_accepted(measured: Path) -> None:
    assert violations(measured) == []


def test_missing_provenance(measured: Path) -> None:
    data = json.loads(measured.read_text())
    run = next(iter(data["runs"].values()))
    del run["provenance"]["driver"]
    run["provenance"]["git_rev"] = ""
    measured.write_text(json.dumps(data, indent=1))
    found = violations(measured)
    assert {v.code for v in found} == {"results.provenance"}
    assert len(found) == 2  # both at once
    text = lines(measured)
    assert all(text[v.line - 1].strip().startswith(('"provenance"', '"git_rev"')) for v in found)


def test_run_missing_and_inconsistent_numbers(measured: Path) -> None:
    edit_case(measured, "n=1024", lambda c: c.update(run="nowhere"))
    edit_case(measured, "n=4096", lambda c: c.update(gbps=c["gbps"] * 2))
    found = violations(measured)
    assert {(v.code, v.case) for v in found} == {
        ("results.run-missing", "fake/01_copy_good @ n=1024"),
        ("results.inconsistent", "fake/01_copy_good @ n=4096"),
    }
    assert next(v for v in found if v.code == "results.inconsistent").line == line_of(
        measured, "n=4096", "gbps")


def test_library_winner_must_be_the_fastest_candidate(measured: Path) -> None:
    edit_case(measured, "n=4096", lambda c: c.update(library="someone else"))
    assert codes(measured) == {"results.library"}


def test_failed_check_recorded_is_an_error(measured: Path) -> None:
    edit_case(measured, "n=4096", lambda c: c.update(rel_err=0.5))
    assert codes(measured) == {"results.rel-err"}


def test_duplicate_case(measured: Path) -> None:
    data = json.loads(measured.read_text())
    data["cases"].append(data["cases"][0])
    measured.write_text(json.dumps(data, indent=1))
    assert codes(measured) == {"results.duplicate"}


def test_every_violation_reported_at_once(measured: Path) -> None:
    edit_case(measured, "n=1024", stat_edit(median_ms=math.nan))
    edit_case(measured, "n=4096", stat_edit(median_ms=-1.0))
    found = violations(measured)
    assert {v.case for v in found} == {"fake/01_copy_good @ n=1024", "fake/01_copy_good @ n=4096"}
    assert [v.line for v in found] == sorted(v.line for v in found)


def test_schema1_file_gets_lines_too(measured: Path) -> None:
    data = json.loads(measured.read_text())
    data["schema_version"] = 1
    for c in data["cases"]:
        c["baseline"] = c.pop("baselines")[0]
        for key in ("unavailable", "library"):
            c.pop(key)
    data["cases"][1]["stat"]["median_ms"] = 0.0
    text = json.dumps(data, indent=1, sort_keys=True)
    measured.write_text(text)
    found = violations(measured)
    assert [v.code for v in found] == ["results.not-positive"]
    assert text.splitlines()[found[0].line - 1].strip().startswith('"median_ms": 0.0')


def test_curriculum_check_fails_with_file_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    shutil.copytree(SAMPLE, site, ignore=shutil.ignore_patterns(".cache"))
    args = ["--root", str(site), "--templates", str(TEMPLATES), "check"]
    assert main(args) == 0
    path = site / "kernels" / "results" / "test-gpu.json"
    data = json.loads(path.read_text())
    data["cases"][0]["stat"]["median_ms"] = float("nan")
    data["cases"][1]["stat"]["median_ms"] = -2.0
    text = json.dumps(data, indent=1, sort_keys=True)
    path.write_text(text)
    capsys.readouterr()
    assert main(args) != 0
    err = capsys.readouterr().err
    want = [i + 1 for i, t in enumerate(text.splitlines()) if t.strip().startswith('"median_ms"')]
    for code, line in (("results.not-finite", want[0]), ("results.not-positive", want[1])):
        assert f"kernels/results/test-gpu.json:{line}:1: error[{code}]" in err, err
    assert "demo/01_copy @ n=134217728" in err


def test_missing_field(measured: Path) -> None:
    data = json.loads(measured.read_text())
    del data["cases"][0]["tolerance"]
    measured.write_text(json.dumps(data, indent=1))
    found = violations(measured)
    assert [(v.code, v.case) for v in found] == [("results.missing", "fake/01_copy_good @ n=1024")]


def test_wrong_type_is_invalid(measured: Path) -> None:
    edit_case(measured, "n=4096", lambda c: c.update(headline="maybe"))
    assert codes(measured) == {"results.invalid"}


def _sample(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    shutil.copytree(SAMPLE, site, ignore=shutil.ignore_patterns(".cache"))
    return site


@pytest.mark.parametrize("touch", ["kernels/demo/suite.py", "kernels/demo/01_copy.cu"])
def test_one_byte_of_a_suite_or_kernel_makes_strict_check_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], touch: str
) -> None:
    site = _sample(tmp_path)
    args = ["--root", str(site), "--templates", str(TEMPLATES), "check", "--strict"]
    assert main(args) == 0
    path = site / touch
    path.write_bytes(path.read_bytes() + b"\n")
    capsys.readouterr()
    assert main(args) != 0
    err = capsys.readouterr().err
    assert "figure.stale" in err and "demo/01_copy" in err
    assert main(args[:-1]) == 0  # a warning without --strict
