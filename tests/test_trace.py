"""The trace command's data handling, without a GPU."""

from __future__ import annotations

import pytest

from curriculum import trace


def _events() -> list[dict]:
    def x(cat: str, name: str, ts: float, dur: float, **args: object) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": args}

    return [
        x("user_annotation", "step:eager", 100.0, 50.0),
        x("cuda_runtime", "cudaLaunchKernel", 101.0, 4.0, correlation=7),
        x("cuda_runtime", "cudaGetDevice", 105.0, 0.1, correlation=8),
        x("cuda_runtime", "cudaLaunchKernel", 110.0, 4.0, correlation=9),
        x("cuda_runtime", "cudaStreamSynchronize", 115.0, 20.0, correlation=10),
        x("kernel", "void gemv<float>(float*, int)", 108.0, 5.0, stream=7, correlation=7),
        x("kernel", "void add(float*)", 120.0, 2.0, stream=7, correlation=9),
        x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 125.0, 3.0, stream=7),
        {"ph": "s", "cat": "ac2g", "name": "flow", "ts": 101.0},
        x("cpu_op", "aten::add", 109.0, 6.0),
    ]


def test_parse_keeps_gpu_work_launches_and_marks() -> None:
    parsed = trace.parse_chrome_trace(_events())
    assert [r[0] for r in parsed["gpu"]] == [
        "void gemv<float>(float*, int)", "void add(float*)", "Memcpy HtoD (Pageable -> Device)"]
    assert [r[1] for r in parsed["gpu"]] == ["k", "k", "m"]
    assert parsed["gpu"][0][5] == 101.0 and parsed["gpu"][1][5] == 110.0
    assert parsed["gpu"][2][5] is None
    assert [h[0] for h in parsed["host"]] == [
        "cudaLaunchKernel", "cudaLaunchKernel", "cudaStreamSynchronize"]
    assert parsed["marks"] == [("step:eager", 100.0, 50.0)]


def test_compact_is_relative_to_the_first_mark() -> None:
    names: list[str] = []
    seg = trace.compact(trace.parse_chrome_trace(_events()), names)
    assert names[seg["gpu"][0][0]] == "gemv<float>"
    assert seg["gpu"][0][3:] == [8.0, 5.0, 1.0]
    assert seg["marks"] == [["step:eager", 0.0, 50.0]]
    assert trace.enqueue_calls(seg["host"], names) == 2


def test_summary_counts_idle_time_between_activities() -> None:
    gpu = [[0, "k", 7, 0.0, 5.0, None], [0, "k", 8, 2.0, 4.0, None],
           [1, "k", 7, 10.0, 2.0, -3.0], [2, "m", 7, 12.5, 0.5, None]]
    s = trace.summarize(gpu)
    assert (s.ops, s.kernels) == (4, 3)
    assert s.span_us == 13.0
    assert s.idle_us == pytest.approx(4.5)
    assert s.busy_us == pytest.approx(8.5)
    assert s.gaps == 1 and s.largest_gap_us == 4.0
    assert s.median_launch_delay_us == 13.0
    assert trace.idle_intervals(gpu) == [(6.0, 10.0), (12.0, 12.5)]
    assert trace.summarize([]).ops == 0


def test_short_name_drops_return_type_and_arguments() -> None:
    name = "void at::native::kernel<4, at::native::Add<float> >(int, float*)"
    assert trace.short_name(name) == "at::native::kernel<4, at::native::Add<float> >"
    assert trace.short_name("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"
    assert len(trace.short_name("x" * 200)) == 80


def test_without_torch_the_command_says_why_and_exits_2(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "gpu_missing", lambda: "PyTorch is not installed")
    assert trace.main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "PyTorch" in err


def test_weight_bytes_of_the_default_config() -> None:
    cfg = trace.Config()
    per_layer = 2048 * 3072 + 2048 * 2048 + 3 * 2048 * 5632 + 2 * 2048
    assert cfg.weight_bytes() == 2 * (8 * per_layer + 32000 * 2048 + 2048)


def test_cli_trace_without_a_gpu_exits_2(capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from curriculum import cli

    monkeypatch.setattr(trace, "gpu_missing", lambda: "PyTorch is not installed")
    assert cli.main(["trace"]) == 2
    assert "needs PyTorch and a CUDA GPU" in capsys.readouterr().err
