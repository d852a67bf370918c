"""Library candidates, microbenchmark items, unflushed timing and unbounded rooflines."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from fakebench import FakeBackend, kernel_source, options

from curriculum.bench.runner import SilentReporter, run_bench
from curriculum.measure import CASE_FIELDS, case_value
from curriculum.results import check_text, read_results

SUITE = textwrap.dedent(
    """
    import numpy
    from curriculum.bench.api import Benchmark, LibraryBaseline, OutputSpec, Roofline, Suite
    import fakebench

    CALLS = {"slow": 0, "fast": 0, "broken": 0}


    def inputs(shape, rng):
        return {"x": rng.random(shape["n"], dtype=numpy.float32) + 0.5}


    def launch(module, version, shape, arrays):
        module.run(shape, arrays)


    def candidate(name, speed):
        def make(arrays, shape):
            CALLS[name] += 1
            if speed is None:
                raise RuntimeError("No available kernel. Aborting execution.\\nsecond line")
            return lambda: fakebench.spend(fakebench.copy_floor_ms(8.0 * shape["n"]) / speed)
        return make


    def bench(name, match, **kw):
        base = dict(
            name=name,
            match=match,
            inputs=inputs,
            outputs={"out": OutputSpec(shape=lambda s: (s["n"],), dtype="float32")},
            reference=lambda x64, s: {"out": x64["x"]},
            launch=launch,
            flops=lambda s: 0.0,
            bytes=lambda s: 8.0 * s["n"],
            work_convention="8n bytes",
            tolerance=0.0,
            tolerance_reason="exact",
            shapes=[{"n": 1024}, {"n": 4096}],
            headline={"n": 4096},
        )
        base.update(kw)
        return Benchmark(**base)


    SUITE = Suite(
        topic="fake",
        benchmarks=[
            bench(
                "copy",
                "*_copy_*",
                baselines=(
                    LibraryBaseline(name="slow lib", make=candidate("slow", 0.5)),
                    LibraryBaseline(name="fast lib", make=candidate("fast", 0.9)),
                    LibraryBaseline(name="broken lib", make=candidate("broken", None)),
                ),
            ),
            bench(
                "chase",
                "*_chase_*",
                roofline=Roofline(bandwidth=None, compute=None),
                items=lambda s: float(s["n"]),
                items_label="dependent loads",
                flush_l2=False,
            ),
            bench("mixed", "*_mixed_*", roofline=Roofline(bandwidth="copy", compute="gemm_bf16")),
        ],
    )
    """
)


def make_root(tmp_path: Path) -> Path:
    topic = tmp_path / "kernels" / "fake"
    topic.mkdir(parents=True)
    (topic / "suite.py").write_text(SUITE)
    (topic / "01_copy_a.cu").write_text(kernel_source("01 copy a", "good", 0.8))
    (topic / "02_copy_b.cu").write_text(kernel_source("02 copy b", "good", 0.8))
    (topic / "03_chase_a.cu").write_text(kernel_source("03 chase", "good", 0.8))
    (topic / "04_mixed_a.cu").write_text(kernel_source("04 mixed", "good", 0.8))
    return tmp_path


def run(root: Path, backend: FakeBackend | None = None, **kw: object):
    return run_bench(options(root, **kw), backend or FakeBackend(), SilentReporter())


def test_every_candidate_recorded_and_fastest_wins(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    summary = run(root, only="fake/0[12]_*")
    assert summary.exit_code == 0
    case = read_results(summary.results_path).case("fake/01_copy_a")
    assert case is not None
    assert [b.name for b in case.baselines] == ["slow lib", "fast lib"]
    assert case.library == "fast lib" and case.baseline is not None
    assert case.baseline.name == "fast lib"
    assert case.pct_library == pytest.approx(100 * 0.8 / 0.9, rel=1e-6)
    assert case.baselines[0].gbps == pytest.approx(500.0, rel=1e-6)
    assert case.baselines[0].stat.samples >= 5
    assert [(u.name, u.reason) for u in case.unavailable] == [
        ("broken lib", "RuntimeError: No available kernel. Aborting execution.")
    ]
    assert case_value(case, "library_ms") == case.baseline.stat.median_ms
    outcome = next(o for o in summary.outcomes if o.case.id == "fake/01_copy_a")
    assert any("broken lib unavailable" in m for m in outcome.messages)


def test_candidates_timed_once_per_benchmark_and_shape(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    run(root, only="fake/0[12]_*")
    import sys

    calls = sys.modules["curriculum_suite_fake"].CALLS
    # two versions x two shapes, but each candidate is made once a shape
    assert calls == {"slow": 2, "fast": 2, "broken": 2}


def test_microbenchmark_items_unbounded_and_unflushed(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    backend = FakeBackend()
    summary = run(root, backend, only="fake/03_*")
    assert summary.exit_code == 0, [o.messages for o in summary.outcomes]
    case = read_results(summary.results_path).case("fake/03_chase_a")
    assert case is not None
    assert case.roofline_ms is None and case.pct_roofline is None
    assert case.baselines == [] and case.library is None and case.pct_library is None
    assert case.items == 4096.0 and case.items_label == "dependent loads"
    ns = case.stat.median_ms * 1e6 / 4096
    assert case_value(case, "ns_per_item") == pytest.approx(ns)
    assert case_value(case, "cycles_per_item") == pytest.approx(ns * 1980 / 1000)
    assert case_value(case, "pct_roofline") is None
    # the kernel's timings never flushed the L2
    assert backend.timers and all(t.flushes == 0 for t in backend.timers)


def test_flushed_by_default(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    backend = FakeBackend()
    run(root, backend, only="fake/01_*")
    assert all(t.flushes > 0 for t in backend.timers)


def test_cycles_unknown_without_clock(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    summary = run(root, FakeBackend(nvml=False), only="fake/03_*")
    case = read_results(summary.results_path).case("fake/03_chase_a")
    assert case is not None and case_value(case, "ns_per_item") is not None
    assert case_value(case, "cycles_per_item") is None


def test_item_fields_are_figure_fields() -> None:
    assert {"ns_per_item", "cycles_per_item"} <= set(CASE_FIELDS)
    from curriculum.charts import FIELDS

    assert {"ns_per_item", "cycles_per_item"} <= set(FIELDS)


def test_a_declared_ceiling_not_measured_is_left_out(tmp_path: Path) -> None:
    """The fake card measures copy and read only: the floor comes from copy alone, and the
    case records only the ceiling it was bounded by, so the file checks clean."""
    root = make_root(tmp_path)
    summary = run(root, only="fake/04_*")
    assert summary.exit_code == 0
    case = read_results(summary.results_path).case("fake/04_mixed_a")
    assert case is not None
    assert (case.bandwidth_ceiling, case.compute_ceiling) == ("copy", None)
    outcome = summary.outcomes[0]
    assert any("['gemm_bf16'] not measured" in m for m in outcome.messages)


def test_every_file_the_runner_writes_checks_clean(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    summary = run(root)
    assert check_text(summary.results_path.read_text())[1] == []
