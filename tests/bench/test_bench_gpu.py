"""On a GPU: every kernel of every suite passes its check at its smallest shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from curriculum.bench.runner import BenchOptions, SilentReporter, run_bench
from curriculum.bench.suites import topic_dirs

ROOT = Path(__file__).resolve().parents[2]
TOPICS = [p.name for p in topic_dirs(ROOT)]

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

    return open_cupy_backend(0, pool=False)


@pytest.mark.parametrize("topic", TOPICS or [pytest.param("none", marks=pytest.mark.skip)])
def test_every_version_checks_at_its_smallest_shape(gpu_backend, topic: str) -> None:
    options = BenchOptions(root=ROOT, only=f"{topic}/*", small=True, check_only=True)
    summary = run_bench(options, gpu_backend, SilentReporter())
    assert summary.outcomes, f"{topic}: no cases"
    failures = {
        f"{o.case.id} [{o.case.shape_label}]": o.messages
        for o in summary.outcomes
        if o.status != "checked"
    }
    assert not failures, failures
