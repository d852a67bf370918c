"""Charts from a synthetic results file: kinds, errors, determinism, cache keys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TEMPLATES
from pydantic import ValidationError

from curriculum.charts import ChartSpec, chart_inputs_hash, render_chart
from curriculum.results import (
    Baseline,
    CaseResult,
    Ceiling,
    Clocks,
    Provenance,
    ResultsFile,
    Run,
    Stat,
)

RUN = "20260101T000000Z-abcd"


def stat(ms: float) -> Stat:
    return Stat(
        median_ms=ms,
        p20_ms=ms * 0.99,
        p80_ms=ms * 1.01,
        min_ms=ms * 0.98,
        max_ms=ms * 1.05,
        samples=3,
        raw_ms=[ms, ms * 0.99, ms * 1.01],
    )


def case(version: str, bench: str, n: int, ms: float, flops: float = 0.0, headline: bool = False):
    nbytes = 8.0 * n
    clocks = Clocks(sm_mhz=1980, mem_mhz=3201)
    floor = nbytes / 4e12 * 1e3
    return CaseResult(
        id=f"memory/{version}",
        topic="memory",
        version=version,
        benchmark=bench,
        title=f"{version[:2]} title",
        shape={"n": n},
        shape_label=f"n={n}",
        headline=headline,
        source_hash="a" * 64,
        suite_hash="b" * 64,
        run=RUN,
        stat=stat(ms),
        flops=flops,
        bytes=nbytes,
        gbps=nbytes / (ms * 1e-3) / 1e9,
        tflops=flops / (ms * 1e-3) / 1e12,
        roofline_ms=floor,
        pct_roofline=100 * floor / ms,
        baseline=Baseline(name="lib", stat=stat(floor * 1.05), gbps=1.0),
        pct_library=100 * floor * 1.05 / ms,
        rel_err=0.0,
        tolerance=0.0,
        clocks_before=clocks,
        clocks_after=clocks,
        throttled=False,
    )


def results() -> ResultsFile:
    prov = Provenance(
        gpu_name="NVIDIA H200",
        gpu_slug="nvidia-h200",
        sm_count=132,
        l2_bytes=60 << 20,
        memory_bytes=141 << 30,
        sm_clock_max_mhz=1980,
        mem_clock_max_mhz=3201,
        driver="580",
        cuda_runtime="13.0",
        cupy="14.2.0",
        date="2026-01-01T00:00:00Z",
        git_rev="abc",
        git_dirty=False,
    )
    ceilings = {
        "copy": Ceiling(name="copy", description="copy", stat=stat(1.0), gbps=4000.0),
        "read": Ceiling(name="read", description="read", stat=stat(1.0), gbps=4400.0),
        "sgemm_fp32": Ceiling(name="sgemm_fp32", description="s", stat=stat(1.0), tflops=50.0),
    }
    cases = []
    for n in (1 << 20, 1 << 24, 1 << 28):
        head = n == 1 << 28
        cases.append(case("01_copy_scalar", "copy", n, 8e-9 * n / 2.5, headline=head))
        cases.append(case("02_copy_vec4", "copy", n, 8e-9 * n / 4.0, headline=head))
        cases.append(case("04_reduce_tree", "reduce", n, 4e-9 * n / 4.2, flops=n, headline=head))
    return ResultsFile(
        gpu_slug="nvidia-h200", runs={RUN: Run(provenance=prov, ceilings=ceilings)}, cases=cases
    )


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    topic = tmp_path / "memory"
    topic.mkdir()
    for stem in ("01_copy_scalar", "02_copy_vec4", "03_copy_unmeasured", "04_reduce_tree"):
        (topic / f"{stem}.cu").write_text(f"// {stem}\n")
    return tmp_path


@pytest.mark.parametrize(
    "kind,bench,field",
    [
        ("ladder", None, "pct_library"),
        ("ladder", "copy", "gbps"),
        ("roofline", None, "pct_library"),
        ("sweep", "copy", "tbps"),
        ("sweep", None, "us"),
    ],
)
def test_every_kind_renders_svg_with_text(sources: Path, kind: str, bench, field: str) -> None:
    spec = ChartSpec(kind=kind, topic="memory", benchmark=bench, field=field, alt="a chart")
    svg = render_chart(spec, results(), sources)
    assert svg.startswith("<?xml") and "</svg>" in svg
    assert "<text" in svg  # svg.fonttype none: labels stay text, searchable and scalable
    assert "<dc:date>" not in svg and "Matplotlib v" not in svg


def test_same_input_gives_identical_bytes(sources: Path) -> None:
    spec = ChartSpec(kind="ladder", topic="memory", alt="ladder")
    assert render_chart(spec, results(), sources) == render_chart(spec, results(), sources)


def test_identical_across_processes(sources: Path) -> None:
    code = (
        "import sys; from pathlib import Path;"
        "sys.path.insert(0, sys.argv[1]);"
        "import test_charts as t; from curriculum.charts import ChartSpec, render_chart;"
        "spec = ChartSpec(kind='roofline', topic='memory', alt='r');"
        "sys.stdout.write(render_chart(spec, t.results(), Path(sys.argv[2])))"
    )
    outs = [
        subprocess.run(
            [sys.executable, "-c", code, str(Path(__file__).parent), str(sources)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for _ in range(2)
    ]
    assert outs[0] == outs[1] and outs[0].startswith("<?xml")


def test_ladder_shows_unmeasured_versions(sources: Path) -> None:
    spec = ChartSpec(kind="ladder", topic="memory", alt="ladder")
    svg = render_chart(spec, results(), sources)
    assert "03 copy_unmeasured" in svg and "not measured" in svg
    only_copy = ChartSpec(kind="ladder", topic="memory", benchmark="copy", alt="ladder")
    svg = render_chart(only_copy, results(), sources)
    assert "unmeasured" not in svg and "04 reduce_tree" not in svg


def test_roofline_needs_flops(sources: Path) -> None:
    spec = ChartSpec(kind="roofline", topic="memory", benchmark="copy", alt="r")
    with pytest.raises(ValueError, match="count FLOPs"):
        render_chart(spec, results(), sources)


def test_topic_without_cases_is_a_clear_error(sources: Path) -> None:
    spec = ChartSpec(kind="ladder", topic="gemm", alt="g")
    with pytest.raises(ValueError, match="no measured cases for topic 'gemm'"):
        render_chart(spec, results(), sources)
    spec = ChartSpec(kind="sweep", topic="memory", benchmark="transpose", alt="t")
    with pytest.raises(ValueError, match="benchmark 'transpose'"):
        render_chart(spec, results(), sources)


def test_spec_is_strict() -> None:
    with pytest.raises(ValidationError):
        ChartSpec(kind="ladder", topic="memory", alt="")
    with pytest.raises(ValidationError):
        ChartSpec(kind="ladder", topic="memory")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        ChartSpec(kind="pie", topic="memory", alt="x")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="unknown field"):
        ChartSpec(kind="ladder", topic="memory", alt="x", field="speed")
    with pytest.raises(ValidationError):
        ChartSpec(kind="ladder", topic="memory", alt="x", colour="red")  # type: ignore[call-arg]
    spec = ChartSpec(kind="ladder", topic="memory", alt="x")
    with pytest.raises(ValidationError):
        spec.topic = "gemm"  # type: ignore[misc]


def test_inputs_hash_tracks_what_is_drawn(sources: Path) -> None:
    spec = ChartSpec(kind="ladder", topic="memory", alt="x")
    base = results()
    h = chart_inputs_hash(spec, base)
    assert h == chart_inputs_hash(spec, results())
    assert h != chart_inputs_hash(spec.model_copy(update={"field": "gbps"}), base)
    assert h != chart_inputs_hash(spec, base, sources)
    changed = base.model_copy(
        update={"cases": [c.model_copy(update={"gbps": 1.0}) for c in base.cases]}
    )
    assert h != chart_inputs_hash(spec, changed)


def test_drawn_charts_are_kept_and_reused(sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chart is drawn once per set of inputs; later checks read it from `.cache/charts`."""
    import curriculum.charts as charts
    from curriculum.build import check_project
    from curriculum.measure import CHART_CACHE

    diags, catalog, _ = check_project(sample, TEMPLATES)
    assert catalog is not None and not diags.errors
    kept = sorted((sample / CHART_CACHE).glob("*.svg"))
    assert kept, "the sample project draws at least one chart"
    for path in kept:
        path.write_text("<svg>kept</svg>")

    def refuse(*args: object, **kwargs: object) -> str:
        raise AssertionError("drew a chart that was kept")

    monkeypatch.setattr(charts, "render_chart", refuse)
    again, catalog, measurements = check_project(sample, TEMPLATES)
    assert catalog is not None and not again.errors
    assert measurements is not None and measurements._charts
    assert {c.svg for c in measurements._charts.values()} == {"<svg>kept</svg>"}

    monkeypatch.undo()
    kept[0].unlink()  # a chart missing from the cache is drawn and kept again
    third, _, measurements = check_project(sample, TEMPLATES)
    assert not third.errors and kept[0].read_text().startswith("<?xml")


def latency_results() -> ResultsFile:
    """A pointer-chase sweep: shape key `kib`, items so ns_per_item is defined."""
    base = results()
    cases = []
    for version, scale in (("01_pointer_chase", 1.0), ("02_pointer_chase_cg", 1.3)):
        for kib, ns in ((16, 18.0), (1024, 140.0), (65536, 480.0), (1048576, 650.0)):
            steps = 32768
            c = case(version, "pointer_chase", kib, ns * scale * steps * 1e-6)
            cases.append(
                c.model_copy(
                    update={
                        "shape": {"kib": kib},
                        "shape_label": f"kib={kib}",
                        "items": float(steps),
                        "items_label": "dependent loads",
                    }
                )
            )
    return base.model_copy(update={"cases": cases})


def test_sweep_against_a_shape_key_on_log_axes(sources: Path) -> None:
    spec = ChartSpec(
        kind="sweep",
        topic="memory",
        field="ns_per_item",
        x="kib",
        x_label="working set (KiB)",
        log_x=True,
        log_y=True,
        marks={"L1": 256, "L2": 51200},
        alt="latency by working set",
    )
    svg = render_chart(spec, latency_results(), sources)
    assert svg.startswith("<?xml") and "</svg>" in svg
    for text in ("working set (KiB)", "1048576", "L1", "L2", "ns per item", "01 pointer_chase"):
        assert text in svg, text
    assert svg == render_chart(spec, latency_results(), sources)
    plain = ChartSpec(kind="sweep", topic="memory", field="ns_per_item", x="kib", alt="x")
    assert render_chart(plain, latency_results(), sources) != svg
    h = chart_inputs_hash(plain, latency_results())
    assert h != chart_inputs_hash(spec, latency_results())


def test_category_sweep_takes_a_log_y_axis(sources: Path) -> None:
    spec = ChartSpec(kind="sweep", topic="memory", field="ns_per_item", log_y=True, alt="y")
    assert "kib=1048576" in render_chart(spec, latency_results(), sources)


def test_sweep_options_are_checked() -> None:
    with pytest.raises(ValidationError, match="sweep only"):
        ChartSpec(kind="ladder", topic="memory", alt="x", x="kib")
    with pytest.raises(ValidationError, match="need x"):
        ChartSpec(kind="sweep", topic="memory", alt="x", log_x=True)
    with pytest.raises(ValidationError, match="need x"):
        ChartSpec(kind="sweep", topic="memory", alt="x", marks={"L2": 51200})
    with pytest.raises(ValidationError, match="positive"):
        ChartSpec(kind="sweep", topic="memory", alt="x", x="kib", log_x=True, marks={"z": 0})


def test_sweep_against_a_missing_key_is_a_clear_error(sources: Path) -> None:
    spec = ChartSpec(kind="sweep", topic="memory", alt="x", x="warps_per_sm")
    with pytest.raises(ValueError, match="shape key 'warps_per_sm'"):
        render_chart(spec, latency_results(), sources)


def test_where_keeps_only_the_matching_shapes(sources: Path) -> None:
    spec = ChartSpec(kind="sweep", topic="memory", field="ns_per_item", where={"kib": 16}, alt="z")
    svg = render_chart(spec, latency_results(), sources)
    assert "kib=16" in svg and "kib=1024" not in svg
    everything = ChartSpec(kind="sweep", topic="memory", field="ns_per_item", alt="z")
    assert chart_inputs_hash(spec, latency_results()) != chart_inputs_hash(
        everything, latency_results()
    )
    none = ChartSpec(kind="sweep", topic="memory", alt="z", where={"kib": 3})
    with pytest.raises(ValueError, match="shapes with kib=3"):
        render_chart(none, latency_results(), sources)


def test_versions_keeps_only_the_named_versions(sources: Path) -> None:
    spec = ChartSpec(kind="sweep", topic="memory", benchmark="copy", versions=["02_copy_vec4"],
                     alt="v")
    svg = render_chart(spec, results(), sources)
    assert "02 copy_vec4" in svg and "01 copy_scalar" not in svg
    ladder = ChartSpec(kind="ladder", topic="memory", versions=["04_reduce_tree"], alt="v")
    svg = render_chart(ladder, results(), sources)
    assert "not measured" not in svg  # 03 exists as a source, but was not asked for
    typo = ChartSpec(kind="sweep", topic="memory", versions=["02_copy_vec4", "2_copy"], alt="v")
    with pytest.raises(ValueError, match="'2_copy'"):
        render_chart(typo, results(), sources)
    none = ChartSpec(kind="sweep", topic="memory", versions=["09_x"], alt="v")
    with pytest.raises(ValueError, match="versions 09_x"):
        render_chart(none, results(), sources)


def test_chart_of_an_unmeasured_topic_is_a_located_warning(sample: Path) -> None:
    """A chart of a topic the results file lacks warns at its line; the check does not crash."""
    from conftest import edit

    from curriculum.build import check_project

    rel = "content/courses/demo/capsules/tiling.md"
    edit(sample, rel, "kind: ladder\ntopic: demo\n", "kind: sweep\ntopic: nowhere\n")
    diags, catalog, _ = check_project(sample, TEMPLATES)
    assert catalog is not None
    missing = [d for d in diags.warnings if d.code == "chart.missing"]
    assert len(missing) == 1, [str(d) for d in diags.warnings]
    assert missing[0].loc.path.endswith("tiling.md") and missing[0].loc.line == 20
    assert "'nowhere'" in missing[0].message
