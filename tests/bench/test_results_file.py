"""The results file: schema 2 written compactly, schema 1 read and migrated in memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakebench import FakeBackend, fake_root_fixture, options  # noqa: F401 (fixture)

from curriculum.bench.runner import SilentReporter, run_bench
from curriculum.results import (
    CASE_LINES,
    SCHEMA_VERSION,
    format_results,
    parse_results,
    read_results,
    write_results,
)

REPO = Path(__file__).resolve().parents[2]


def measured(root: Path):
    s = run_bench(options(root, only="fake/01_*"), FakeBackend(), SilentReporter())
    return s.results_path, read_results(s.results_path)


def as_schema1(data: dict) -> dict:
    """What schema 1 wrote for the same content: one `baseline`, no fingerprint."""
    old = dict(data, schema_version=1)
    cases = []
    for c in data["cases"]:
        c = dict(c)
        winner = next((b for b in c["baselines"] if b["name"] == c["library"]), None)
        for key in ("baselines", "unavailable", "library", "fingerprint", "harness", "items",
                    "items_label", "throttle_reasons", "remeasured"):
            c.pop(key, None)
        c["baseline"] = winner
        cases.append(c)
    old["cases"] = cases
    return old


def test_written_file_is_schema2_and_round_trips(root: Path) -> None:
    path, results = measured(root)
    text = path.read_text()
    assert json.loads(text)["schema_version"] == SCHEMA_VERSION == 2
    assert parse_results(text) == results
    assert format_results(results) == text


def test_each_case_is_a_few_lines_with_samples_on_one(root: Path) -> None:
    path, results = measured(root)
    lines = path.read_text().splitlines()
    openings = [i for i, line in enumerate(lines) if line.startswith('  {"id": ')]
    assert len(openings) == len(results.cases) == 2
    assert openings[1] - openings[0] <= len(CASE_LINES)  # whatever the number of samples
    stat_lines = [line for line in lines if line.lstrip().startswith('"stat": ')]
    assert len(stat_lines) == 2 and all('"raw_ms": [' in line for line in stat_lines)
    assert len(lines) < 40


def test_a_rerun_diff_shows_the_changed_line_only(root: Path) -> None:
    path, results = measured(root)
    case = results.cases[0]
    changed = results.model_copy(
        update={"cases": [case.model_copy(update={"rel_err": 0.5}), *results.cases[1:]]}
    )
    before, after = format_results(results).splitlines(), format_results(changed).splitlines()
    diff = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert len(diff) == 1 and '"rel_err": 0.5' in diff[0][1]


def test_schema1_file_is_migrated_in_memory(root: Path, tmp_path: Path) -> None:
    path, results = measured(root)
    data = json.loads(path.read_text())
    old = tmp_path / "old.json"
    old.write_text(json.dumps(as_schema1(data), indent=1, sort_keys=True))
    migrated = read_results(old)
    assert migrated.schema_version == 2
    for new, was in zip(results.cases, migrated.cases, strict=True):
        assert was.fingerprint is None
        assert was.library == new.library and was.baselines == [new.baseline]
        assert was.baseline == new.baseline and was.pct_library == new.pct_library
    # the next write converts the file
    write_results(old, migrated)
    assert json.loads(old.read_text())["schema_version"] == 2


def test_newer_schema_is_refused(root: Path) -> None:
    path, _ = measured(root)
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    with pytest.raises(ValueError, match="newer"):
        parse_results(json.dumps(data))


def test_committed_results_load() -> None:
    for path in sorted((REPO / "kernels" / "results").glob("*.json")):
        results = read_results(path)
        assert results.cases, path
        assert all(c.library is None or c.baseline is not None for c in results.cases)
