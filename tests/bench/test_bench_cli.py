"""The `bench` command's options, refusals and exit codes."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from fakebench import (
    FakeBackend,
    fake_root_fixture,  # noqa: F401 (fixture)
)

from curriculum.bench import cli, cupy_backend
from curriculum.bench.errors import NoGpuError


def parse(root: Path, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path)
    cli.configure(parser)
    return parser.parse_args(["--root", str(root), *argv])


def test_options() -> None:
    ns = parse(
        Path("."),
        "--only",
        "memory/*",
        "--force",
        "--shard",
        "1/2",
        "--out",
        "x.json",
        "--time-cap",
        "3",
        "--small",
        "--repeat",
        "2",
    )
    assert (ns.only, ns.force, ns.shard, ns.out, ns.time_cap, ns.small, ns.repeat) == (
        "memory/*",
        True,
        "1/2",
        Path("x.json"),
        3.0,
        True,
        2,
    )
    assert not ns.list and not ns.check_only and not ns.headline and ns.device == 0


def test_refuses_without_gpu_when_devices_hidden(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert cli.run(parse(root, "--only", "fake/*")) == 2
    assert "CUDA_VISIBLE_DEVICES" in capsys.readouterr().err
    assert not (root / "kernels" / "results").exists()


def test_refusal_reason_checks_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert cupy_backend.gpu_refusal_reason() is not None
    with pytest.raises(NoGpuError):
        cupy_backend.open_cupy_backend()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert cupy_backend.gpu_refusal_reason() is None


def test_refuses_when_cupy_missing(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def no_cupy() -> None:
        raise NoGpuError("CuPy cannot be imported")

    monkeypatch.setattr(cupy_backend, "import_cupy", no_cupy)
    assert cli.run(parse(root, "--only", "fake/*")) == 2
    assert not (root / "kernels" / "results").exists()


def test_list_needs_no_gpu(root: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert cli.run(parse(root, "--list")) == 0
    out = capsys.readouterr().out
    assert "fake/01_copy_good" in out and "headline" in out and "6 case(s)" in out


@pytest.mark.parametrize("shard", ["2/2", "x", "1/0", "1/2/3"])
def test_bad_shard_is_exit_2(root: Path, shard: str) -> None:
    assert cli.run(parse(root, "--list", "--shard", shard)) == 2


def test_full_run_exit_codes(root: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(cupy_backend, "open_cupy_backend", lambda device, pool: FakeBackend())
    assert cli.run(parse(root, "--only", "fake/01_*", "--time-cap", "5")) == 0
    assert cli.run(parse(root, "--only", "fake/02_*")) == 1
    err = capsys.readouterr().err
    assert "recorded" in err and "failed" in err and "(3,): got" in err


def test_check_shapes_needs_check_only(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(parse(root, "--only", "fake/*", "--check-shapes")) == 2
    assert "--check-shapes needs --check-only" in capsys.readouterr().err
    assert not (root / "kernels" / "results").exists()


def test_a_check_at_other_shapes_names_them(root: Path) -> None:
    from fakebench import options

    from curriculum.bench.runner import SilentReporter, run_bench

    suite = root / "kernels" / "fake" / "suite.py"
    suite.write_text(suite.read_text().replace(
        "    headline=", '    check_shapes=[{"n": 96}],\n    headline='))
    summary = run_bench(options(root, only="fake/01_*", check_only=True, check_shapes=True),
                        FakeBackend(), SilentReporter())
    assert cli._outcome_line(summary.outcomes[0]).startswith("checked  fake/01_copy_good [n=96]")
