"""`curriculum build --bench`: the bench runs first where a GPU is, and is skipped, saying
so, where none is."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from conftest import TEMPLATES

from curriculum.bench import cli as bench_cli
from curriculum.bench import cupy_backend
from curriculum.bench.errors import NoGpuError
from curriculum.cli import main


def build(sample: Path, out: Path) -> int:
    return main(["--root", str(sample), "--templates", str(TEMPLATES), "build", "--bench",
                 "--out", str(out)])


def test_without_a_gpu_the_bench_is_skipped_and_said_so(
        sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_gpu(*args: object, **kwargs: object) -> object:
        raise NoGpuError("CUDA reports no device")

    ran: list[argparse.Namespace] = []
    monkeypatch.setattr(cupy_backend, "open_cupy_backend", no_gpu)
    monkeypatch.setattr(bench_cli, "run", lambda args: ran.append(args) or 0)
    assert build(sample, tmp_path / "out") == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "--bench: skipping the benchmarks: no usable GPU (CUDA reports no device)" in err
    assert ran == []
    assert (tmp_path / "out" / "public" / "index.html").is_file()


class FakeBackend:
    def release(self) -> None:
        pass


def test_with_a_gpu_missing_and_stale_cases_run_first(
        sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[argparse.Namespace] = []
    monkeypatch.setattr(cupy_backend, "open_cupy_backend", lambda *a, **k: FakeBackend())
    monkeypatch.setattr(bench_cli, "run", lambda args: ran.append(args) or 0)
    assert build(sample, tmp_path / "out") == 0
    [args] = ran
    assert args.root == sample.resolve()
    assert not args.force and args.only is None and not args.list  # fresh results are kept


def test_a_failed_bench_stops_the_build(sample: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cupy_backend, "open_cupy_backend", lambda *a, **k: FakeBackend())
    monkeypatch.setattr(bench_cli, "run", lambda args: 1)
    assert build(sample, tmp_path / "out") == 1
    assert not (tmp_path / "out").exists()
