"""On a GPU: every cheating kernel of `kernels/cheats/` is refused, with its own code.

Run with `pytest -m gpu tests/bench/test_cheats_gpu.py`. The timed run is needed:
04 (timed only at the launch) is refused by the physical floor, which only a
measured time can reach, and 03 (cached) by the check after timing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import suite_module

from curriculum.bench.refusals import REASONS, code_of
from curriculum.bench.runner import BenchOptions, SilentReporter, run_bench
from curriculum.bench.timing import TimingPolicy

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_backend():
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no CuPy, no driver, or devices hidden
        pytest.skip(f"no usable GPU: {type(exc).__name__}: {exc}")
    if count < 1:
        pytest.skip("no CUDA device")
    from curriculum.bench.cupy_backend import open_cupy_backend

    return open_cupy_backend(0)


def test_every_cheat_is_refused_with_its_code(gpu_backend, tmp_path: Path) -> None:
    expected = suite_module("cheats").EXPECTED
    options = BenchOptions(
        root=ROOT,
        out=tmp_path / "results.json",
        only="cheats/*",
        force=True,
        policy=TimingPolicy(warmup_ms=5.0, min_samples=10, batch=5, time_cap_s=3.0),
    )
    summary = run_bench(options, gpu_backend, SilentReporter())
    got = {o.case.version.stem: o for o in summary.outcomes}
    assert set(got) == set(expected)
    wrong = {
        stem: (o.status, o.messages[:3])
        for stem, o in got.items()
        if o.status not in ("refused", "failed") or code_of(o.messages[0]) != expected[stem]
    }
    assert not wrong, wrong
    for stem, o in got.items():
        assert o.messages[0].startswith(f"{expected[stem]}: {REASONS[expected[stem]]}")
    assert summary.exit_code == 0
    assert not (tmp_path / "results.json").exists() or '"cheats/' not in (
        tmp_path / "results.json"
    ).read_text()
