"""Results-file writes: atomic, merged under a lock, never mixing GPUs."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from curriculum.bench import store
from curriculum.bench.errors import ResultsFileError
from curriculum.bench.timing import summarize
from curriculum.results import (
    CaseResult,
    Ceiling,
    Clocks,
    Provenance,
    ResultsFile,
    Run,
    read_results,
    write_results,
)

SLUG = "fake-gpu"


def make_run(date: str = "2026-01-01T00:00:00Z") -> Run:
    prov = Provenance(
        gpu_name="Fake GPU",
        gpu_slug=SLUG,
        sm_count=1,
        l2_bytes=1,
        memory_bytes=1,
        sm_clock_max_mhz=None,
        mem_clock_max_mhz=None,
        driver="1",
        cuda_runtime="13.0",
        cupy="14",
        date=date,
        git_rev="unknown",
        git_dirty=True,
    )
    stat = summarize([1.0])
    return Run(
        provenance=prov,
        ceilings={"copy": Ceiling(name="copy", description="c", stat=stat, gbps=1.0)},
    )


def make_case(case_id: str, run: str, n: int = 1) -> CaseResult:
    topic, version = case_id.split("/")
    clocks = Clocks(sm_mhz=None, mem_mhz=None)
    return CaseResult(
        id=case_id,
        topic=topic,
        version=version,
        benchmark="b",
        title=version,
        shape={"n": n},
        shape_label=f"n={n}",
        headline=True,
        source_hash="s",
        suite_hash="t",
        run=run,
        stat=summarize([2.0]),
        flops=0.0,
        bytes=8.0,
        gbps=4e-9,
        tflops=0.0,
        roofline_ms=1.0,
        pct_roofline=50.0,
        rel_err=0.0,
        tolerance=0.0,
        clocks_before=clocks,
        clocks_after=clocks,
        throttled=False,
    )


def test_crash_mid_write_leaves_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "r.json"
    store.record(path, SLUG, "r1", make_run(), [make_case("t/01_a", "r1")])
    before = path.read_bytes()

    def crash(src: str, dst: str) -> None:
        raise OSError("killed mid-write")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="killed"):
        store.record(path, SLUG, "r1", make_run(), [make_case("t/02_b", "r1")])
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.json.lock"]


def test_merge_replaces_same_case_and_prunes_uncited_runs(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    store.record(
        path, SLUG, "r1", make_run(), [make_case("t/01_a", "r1"), make_case("t/02_b", "r1")]
    )
    store.record(path, SLUG, "r2", make_run(), [make_case("t/01_a", "r2")])
    results = read_results(path)
    assert {(c.id, c.run) for c in results.cases} == {("t/01_a", "r2"), ("t/02_b", "r1")}
    assert set(results.runs) == {"r1", "r2"}
    store.record(path, SLUG, "r3", make_run(), [make_case("t/02_b", "r3")])
    assert set(read_results(path).runs) == {"r2", "r3"}


def test_a_run_without_cases_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    store.record(path, SLUG, "r1", make_run())
    assert set(read_results(path).runs) == {"r1"}


def test_other_gpu_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_results(path, ResultsFile(gpu_slug="nvidia-h100"))
    with pytest.raises(ResultsFileError, match="nvidia-h100"):
        store.record(path, SLUG, "r1", make_run())


def test_invalid_file_is_refused_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text("{ not json")
    with pytest.raises(ResultsFileError, match="nothing was overwritten"):
        store.record(path, SLUG, "r1", make_run())
    assert path.read_text() == "{ not json"


def _writer(path: str, prefix: str, count: int) -> None:
    for i in range(count):
        run_id = f"{prefix}-run"
        store.record(
            Path(path), SLUG, run_id, make_run(), [make_case(f"t/{prefix}_{i:03d}", run_id)]
        )


def test_two_writers_never_drop_each_others_cases(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(path), p, 40)) for p in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    results = read_results(path)
    assert len(results.cases) == 80
    assert set(results.runs) == {"a-run", "b-run"}
