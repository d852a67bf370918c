"""Trace data on pages: the timeline and steps charts, and `{fig:traces/...}` figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from curriculum.charts import ChartSpec, chart_inputs_hash, render_chart
from curriculum.errors import Diagnostics, Loc
from curriculum.measure import Measurements, _check_figure
from curriculum.timeline import category, figure, load


def _data() -> dict:
    names = ["gemv_kernel", "elementwise_kernel", "Memcpy HtoD (Pageable -> Device)",
             "cudaLaunchKernel", "cudaMemcpyAsync", "cudaStreamSynchronize", "cudaGraphLaunch"]
    step = {"median_us": 400.0, "p20_us": 390.0, "p80_us": 410.0, "samples": 50,
            "gpu_ops": 3, "kernels": 2, "enqueue_calls": 3}
    graph = {**step, "median_us": 100.0, "enqueue_calls": 1}
    return {
        "format": 1,
        "provenance": {"gpu_name": "NVIDIA H200", "driver": "580", "torch": "2.11",
                       "date": "2026-12-03T07:00:00Z", "git_rev": "f" * 40},
        "config": {"layers": 8, "hidden": 2048},
        "steps": {"1": {"eager": step, "graph": graph},
                  "8": {"eager": {**step, "median_us": 480.0}, "graph": {**graph, "median_us": 120.0}}},
        "names": names,
        "segments": {
            "eager_b1": {
                "title": "one eager decode step, batch 1",
                "gpu": [[0, "k", 7, 10.0, 20.0, 2.0], [1, "k", 7, 50.0, 2.0, 40.0],
                        [2, "m", 7, 60.0, 3355.443, 55.0]],
                "host": [[3, 2.0, 5.0], [3, 40.0, 5.0], [4, 55.0, 3400.0], [5, 3460.0, 1.0]],
                "marks": [["step:eager", 0.0, 3500.0]],
            },
            "broken": {"title": "a pattern that failed", "error": "RuntimeError('x')"},
        },
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "kernels" / "traces"
    folder.mkdir(parents=True)
    (folder / "decode_step.json").write_text(json.dumps(_data()))
    return tmp_path


@pytest.mark.parametrize("spec", [
    {"kind": "timeline", "segment": "eager_b1"},
    {"kind": "timeline", "segment": "eager_b1", "window": [0, 100]},
    {"kind": "steps"},
])
def test_trace_charts_render_deterministic_svg(root: Path, spec: dict) -> None:
    chart = ChartSpec(topic="traces", alt="a trace", **spec)
    svg = render_chart(chart, None, root)  # type: ignore[arg-type]
    assert svg.startswith("<?xml") and "</svg>" in svg and "<text" in svg
    assert svg == render_chart(chart, None, root)  # type: ignore[arg-type]
    if spec["kind"] == "timeline":
        assert "GPU stream 7" in svg and "host: CUDA calls" in svg


def test_timeline_title_says_span_and_busy_share(root: Path) -> None:
    svg = render_chart(ChartSpec(kind="timeline", topic="traces", segment="eager_b1", alt="t"),
                       None, root)  # type: ignore[arg-type]
    # span 10 .. 3415.443 µs; busy 20 + 2 + 3355.443 µs
    assert "span 3.41 ms" in svg and "GPU busy 99%" in svg and "3 enqueue calls" in svg


def test_steps_chart_labels_each_bar(root: Path) -> None:
    svg = render_chart(ChartSpec(kind="steps", topic="traces", alt="s"), None, root)  # type: ignore[arg-type]
    for label in ("400 µs", "100 µs", "480 µs", "120 µs", "batch 8"):
        assert label in svg


def test_trace_chart_errors_are_clear(root: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no segment 'nope'"):
        render_chart(ChartSpec(kind="timeline", topic="traces", segment="nope", alt="t"),
                     None, root)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="failed when traced"):
        render_chart(ChartSpec(kind="timeline", topic="traces", segment="broken", alt="t"),
                     None, root)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="curriculum trace"):
        render_chart(ChartSpec(kind="steps", topic="traces", alt="t"), None,  # type: ignore[arg-type]
                     tmp_path / "empty")


def test_trace_spec_options_are_checked() -> None:
    with pytest.raises(ValidationError, match="needs segment"):
        ChartSpec(kind="timeline", topic="traces", alt="t")
    with pytest.raises(ValidationError, match="timeline only"):
        ChartSpec(kind="steps", topic="traces", segment="eager_b1", alt="t")
    with pytest.raises(ValidationError, match="from < to"):
        ChartSpec(kind="timeline", topic="traces", segment="eager_b1", window=(5, 1), alt="t")


def test_inputs_hash_follows_the_trace_data(root: Path) -> None:
    spec = ChartSpec(kind="steps", topic="traces", alt="s")
    before = chart_inputs_hash(spec, None, root)  # type: ignore[arg-type]
    path = root / "kernels" / "traces" / "decode_step.json"
    data = json.loads(path.read_text())
    data["steps"]["1"]["graph"]["median_us"] = 99.0
    path.write_text(json.dumps(data))
    assert chart_inputs_hash(spec, None, root) != before  # type: ignore[arg-type]
    assert load(root)["steps"]["1"]["graph"]["median_us"] == 99.0


def test_figures_of_segments_and_steps(root: Path) -> None:
    assert figure(root, "traces/eager_b1", "kernels", None)[:2] == ("2", 2.0)
    assert figure(root, "traces/eager_b1", "enqueue_calls", None)[0] == "3"
    assert figure(root, "traces/eager_b1", "largest_gap_us", None)[0] == "20 µs"
    assert figure(root, "traces/eager_b1", "copy_gbps", None)[0] == "20.0 GB/s"
    text, value, prov = figure(root, "traces/graph", "us", "batch=8")
    assert (text, value) == ("120 µs", 120.0)
    assert "50 samples" in prov and "NVIDIA H200" in prov and "curriculum trace" in prov
    assert figure(root, "traces/eager", "speedup", "batch=1")[0] == "4.0×"
    assert figure(root, "traces/graph", "per_token_us", "batch=8")[0] == "15 µs"
    with pytest.raises(ValueError, match="needs its batch"):
        figure(root, "traces/graph", "us", None)
    with pytest.raises(ValueError, match="no graph step at batch 64"):
        figure(root, "traces/graph", "us", "batch=64")


def test_check_resolves_trace_figures(root: Path) -> None:
    m = Measurements(root=root, primary="nvidia-h200")
    diags = Diagnostics()
    loc = Loc("c.md", 1, 1)
    for case, field, shape in (("traces/eager_b1", "busy_pct", None),
                               ("traces/eager_b1", "bogus", None),
                               ("traces/graph", "us", "batch=64")):
        ref = {"case": case, "field": field, "shape": shape, "gpu": None}
        _check_figure(m, ref, loc, "capsule 'c'", set(), diags)
    codes = [(d.severity, d.code) for d in diags.sorted()]
    assert ("error", "figure.unknown-field") in codes
    assert ("warning", "figure.missing") in codes and len(codes) == 2
    fig = m.figure({"case": "traces/eager_b1", "field": "busy_pct", "shape": None})
    assert fig.text == "99%" and not fig.missing


def test_kernel_categories() -> None:
    assert category("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT", "k") == "matrix multiply"
    assert category("cudnn_generated_fort_native_sdpa_sm90_flash_fprop", "k") == "attention"
    assert category("at::native::reduce_kernel<512, 1>", "k") == "reduction"
    assert category("Memcpy HtoD (Pinned -> Device)", "m") == "copy"
    assert category("at::native::vectorized_elementwise_kernel<4>", "k") == "elementwise"
