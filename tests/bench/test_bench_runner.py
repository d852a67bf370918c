"""The harness end to end on the fake backend: checks, refusals, recording, skipping."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakebench import FakeBackend, fake_backend_fixture, fake_root_fixture, make_topic, options  # noqa: F401 (fixtures)

from curriculum.bench.errors import SuiteError, UsageError
from curriculum.bench.runner import SilentReporter, run_bench
from curriculum.results import read_results


def bench(root: Path, backend: FakeBackend, **kw: object):
    return run_bench(options(root, **kw), backend, SilentReporter())


def statuses(summary) -> dict[tuple[str, str], str]:
    return {(o.case.version.stem, o.case.shape_label): o.status for o in summary.outcomes}


def test_good_case_recorded_with_run_ceilings_and_ratios(root: Path, backend: FakeBackend) -> None:
    summary = bench(root, backend, only="fake/01_*")
    assert summary.exit_code == 0
    results = read_results(summary.results_path)
    assert summary.results_path == root / "kernels" / "results" / "fake-gpu-9000.json"
    assert [c.shape_label for c in results.cases] == ["n=1024", "n=4096"]
    case = results.case("fake/01_copy_good")
    assert case is not None and case.headline and case.shape_label == "n=4096"
    assert case.pct_roofline == pytest.approx(80.0, rel=1e-6)
    assert case.pct_library == pytest.approx(100 * 0.8 / 0.9, rel=1e-6)
    assert case.baseline is not None and case.baseline.name == "fake copy"
    assert case.rel_err == 0.0 and case.tolerance == 0.0
    assert case.title == "01_copy_good"
    assert case.stat.p20_ms <= case.stat.median_ms <= case.stat.p80_ms
    run = results.runs[case.run]
    assert run.provenance.gpu_name == "Fake GPU 9000"
    assert set(run.ceilings) == {"copy", "read"}
    assert case.gbps == pytest.approx(800.0, rel=1e-6)
    assert backend.ceiling_calls == 1


def test_failed_check_is_not_recorded_and_run_continues(root: Path, backend: FakeBackend) -> None:
    summary = bench(root, backend)
    got = statuses(summary)
    assert got[("02_copy_wrong", "n=1024")] == "failed"
    assert got[("01_copy_good", "n=4096")] == "recorded"
    assert summary.exit_code == 1
    ids = {c.id for c in read_results(summary.results_path).cases}
    assert "fake/02_copy_wrong" not in ids and "fake/01_copy_good" in ids
    wrong = next(o for o in summary.outcomes if o.case.version.stem == "02_copy_wrong")
    text = "\n".join(wrong.messages)
    assert "(3,): got" in text and "input seed" in text


def test_faster_than_floor_is_refused(root: Path, backend: FakeBackend) -> None:
    summary = bench(root, backend, only="fake/03_*")
    assert {o.status for o in summary.outcomes} == {"refused"}
    assert summary.exit_code == 1
    assert "measurement bug" in summary.outcomes[0].messages[0]
    assert read_results(summary.results_path).cases == []


def test_within_three_percent_of_floor_is_accepted(tmp_path: Path, backend: FakeBackend) -> None:
    make_topic(tmp_path, {"01_copy_quick": ("good", 1.02)})
    summary = bench(tmp_path, backend)
    assert summary.exit_code == 0
    assert read_results(summary.results_path).cases[0].pct_roofline == pytest.approx(102.0)


@pytest.mark.parametrize("behaviour", ["nan", "skip", "stateful", "raise"])
def test_bad_kernels_fail(tmp_path: Path, backend: FakeBackend, behaviour: str) -> None:
    make_topic(tmp_path, {"01_copy_bad": (behaviour, 0.8)})
    summary = bench(tmp_path, backend)
    assert {o.status for o in summary.outcomes} == {"failed"}
    assert read_results(summary.results_path).cases == []
    if behaviour == "stateful":
        assert "after the timed launches" in summary.outcomes[0].messages[0]


def test_compile_error_fails_every_shape_once(tmp_path: Path, backend: FakeBackend) -> None:
    topic = make_topic(tmp_path, {"01_copy_good": ("good", 0.8)})
    (topic / "02_copy_broken.cu").write_text("// 02 broken\n#error no\n")
    summary = bench(tmp_path, backend)
    broken = [o for o in summary.outcomes if o.case.version.stem == "02_copy_broken"]
    assert [o.status for o in broken] == ["failed", "failed"]
    assert "compile failed" in broken[0].messages[0]
    assert len(backend.compiled) == 2  # one good, one broken: each compiled once


def test_unchanged_cases_are_skipped_unless_forced(root: Path, backend: FakeBackend) -> None:
    first = bench(root, backend, only="fake/01_*")
    path = first.results_path
    before = read_results(path)
    second = bench(root, backend, only="fake/01_*")
    assert {o.status for o in second.outcomes} == {"skipped"}
    assert backend.ceiling_calls == 1  # nothing to run: no ceilings, no new run
    assert read_results(path) == before
    forced = bench(root, backend, only="fake/01_*", force=True)
    assert {o.status for o in forced.outcomes} == {"recorded"}
    after = read_results(path)
    assert len(after.runs) == 1 and set(after.runs) != set(before.runs)  # old run pruned


def test_changed_source_is_rerun(root: Path, backend: FakeBackend) -> None:
    bench(root, backend, only="fake/01_*")
    cu = root / "kernels" / "fake" / "01_copy_good.cu"
    cu.write_text(cu.read_text() + "// a comment changes the hash\n")
    again = bench(root, backend, only="fake/01_*")
    assert {o.status for o in again.outcomes} == {"recorded"}


def test_shards_partition_the_cases(root: Path) -> None:
    seen = []
    for i in range(3):
        s = bench(root, FakeBackend(), shard=(i, 3), check_only=True)
        seen.append({(o.case.id, o.case.shape_label) for o in s.outcomes})
    union = set().union(*seen)
    assert sum(len(s) for s in seen) == len(union) == 6


def test_shards_write_one_file(root: Path) -> None:
    for i in range(2):
        bench(root, FakeBackend(), shard=(i, 2), only="fake/01_*")
    results = read_results(root / "kernels" / "results" / "fake-gpu-9000.json")
    assert len(results.cases) == 2 and len(results.runs) == 2


def test_check_only_writes_nothing(root: Path, backend: FakeBackend) -> None:
    summary = bench(root, backend, check_only=True, small=True)
    assert summary.results_path is None
    assert statuses(summary) == {
        ("01_copy_good", "n=1024"): "checked",
        ("02_copy_wrong", "n=1024"): "failed",
        ("03_copy_fast", "n=1024"): "checked",
    }
    assert not (root / "kernels" / "results").exists()
    assert backend.ceiling_calls == 0


def test_check_shapes_launches_only_the_check_shapes(root: Path, backend: FakeBackend) -> None:
    suite = root / "kernels" / "fake" / "suite.py"
    suite.write_text(suite.read_text().replace(
        "    headline=", '    check_shapes=[{"n": 96}, {"n": 130}],\n    headline='))
    summary = bench(root, backend, check_only=True, check_shapes=True)
    assert summary.results_path is None and backend.ceiling_calls == 0
    got = statuses(summary)  # one outcome a version, whatever --small says
    assert got == {("01_copy_good", "n=1024"): "checked", ("02_copy_wrong", "n=1024"): "failed",
                   ("03_copy_fast", "n=1024"): "checked"}
    assert [m.sizes for m in backend.modules] == [[96, 130], [96], [96, 130]]
    good = next(o for o in summary.outcomes if o.case.version.stem == "01_copy_good")
    assert good.checked_at == ["n=96", "n=130"]  # what the report line names, not n=1024
    wrong = next(o for o in summary.outcomes if o.case.version.stem == "02_copy_wrong")
    assert "n=96" in wrong.messages[0]


def test_check_shapes_without_any_checks_the_smallest_shape(root: Path, backend: FakeBackend
                                                           ) -> None:
    summary = bench(root, backend, only="fake/01_*", check_only=True, check_shapes=True)
    assert statuses(summary) == {("01_copy_good", "n=1024"): "checked"}
    assert [m.sizes for m in backend.modules] == [[1024]]


def test_headline_filter(root: Path, backend: FakeBackend) -> None:
    summary = bench(root, backend, only="fake/01_*", headline=True)
    assert [o.case.shape_label for o in summary.outcomes] == ["n=4096"]


def test_repeat_reports_every_median(root: Path, backend: FakeBackend) -> None:
    summary = bench(root, backend, only="fake/01_*", headline=True, repeat=2)
    assert len(summary.outcomes[0].repeat_medians_ms) == 2


def test_throttle_flagged_but_idle_ignored(root: Path) -> None:
    s = bench(
        root, FakeBackend(throttle=["gpu_idle", "applications_clocks_setting"]), only="fake/01_*"
    )
    assert not read_results(s.results_path).cases[0].throttled
    s = bench(root, FakeBackend(throttle=["sw_thermal_slowdown"]), only="fake/01_*", force=True)
    case = read_results(s.results_path).cases[0]
    assert case.throttled
    assert any("sw_thermal_slowdown" in m for o in s.outcomes for m in o.messages)


def test_no_nvml_means_unknown_clocks(root: Path) -> None:
    s = bench(root, FakeBackend(nvml=False), only="fake/01_*")
    case = read_results(s.results_path).cases[0]
    assert case.clocks_before.sm_mhz is None and not case.throttled


def test_only_matching_nothing_is_a_usage_error(root: Path, backend: FakeBackend) -> None:
    with pytest.raises(UsageError):
        bench(root, backend, only="fake/99_*")


def test_unclaimed_and_misnamed_files_are_suite_errors(root: Path, backend: FakeBackend) -> None:
    topic = root / "kernels" / "fake"
    (topic / "04_scale.cu").write_text("// 04 scale\n")
    (topic / "5_copy_x.cu").write_text("// bad name\n")
    with pytest.raises(SuiteError) as info:
        bench(root, backend)
    text = str(info.value)
    assert "04_scale.cu: claimed by no benchmark" in text
    assert "5_copy_x.cu: not named NN_name.cu" in text


def test_double_claim_is_a_suite_error(root: Path, backend: FakeBackend) -> None:
    suite = root / "kernels" / "fake" / "suite.py"
    suite.write_text(
        suite.read_text()
        .replace("benchmarks=[COPY]", 'benchmarks=[COPY, dataclasses.replace(COPY, name="copy2")]')
        .replace("import numpy", "import dataclasses\nimport numpy")
    )
    with pytest.raises(SuiteError, match="claimed by several benchmarks"):
        bench(root, backend)


def test_topic_without_suite_is_an_error_unless_filtered_out(
    root: Path, backend: FakeBackend
) -> None:
    other = root / "kernels" / "other"
    other.mkdir()
    (other / "01_x.cu").write_text("// 01 x\n")
    with pytest.raises(SuiteError, match="no suite.py"):
        bench(root, backend, check_only=True)
    summary = bench(root, backend, only="fake/01_*", check_only=True)
    assert summary.exit_code == 0


def test_shape_glob_picks_shapes_by_label(root: Path, backend: FakeBackend) -> None:
    summary = bench(root, backend, only="fake/01_*", shape="n=40*", check_only=True)
    assert statuses(summary) == {("01_copy_good", "n=4096"): "checked"}
    with pytest.raises(UsageError, match="at --shape 'n=7'"):
        bench(root, backend, shape="n=7", check_only=True)
