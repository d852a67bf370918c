"""On a GPU: every kernel of every suite passes its check at its smallest shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from curriculum.bench.runner import BenchOptions, SilentReporter, run_bench
from curriculum.bench.suites import expects_refusal, topic_dirs

ROOT = Path(__file__).resolve().parents[2]
# A suite of cheating kernels expects every check to refuse: test_cheats_gpu.py runs it.
TOPICS = [p.name for p in topic_dirs(ROOT) if not expects_refusal(p)]

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


# The library candidates each topic must measure (not merely list) on an H100/H200-class GPU.
MUST_MEASURE = {
    "attention": {"decode": "cuDNN SDPA", "prefill": "cuDNN SDPA"},
    "layernorm": {"layernorm": "torch.compile(F.layer_norm)"},
    "rmsnorm": {"rmsnorm": "torch.compile(F.rms_norm)"},
    "softmax": {"softmax": "torch.compile(torch.softmax)"},
    "gemm": {"sgemm": "cuBLAS (cupy.matmul)", "bf16": "torch.matmul (bf16 C)"},
    "gemv": {"gemv_bf16": "F.linear"},
}


@pytest.mark.parametrize("topic", sorted(MUST_MEASURE))
def test_library_candidates_run_at_the_smallest_shape(
    gpu_backend, topic: str, tmp_path: Path
) -> None:
    from curriculum.bench.timing import TimingPolicy
    from curriculum.results import check_text, read_results

    options = BenchOptions(
        root=ROOT,
        out=tmp_path / "results.json",
        only=f"{topic}/*",
        small=True,
        policy=TimingPolicy(warmup_ms=5.0, min_samples=5, batch=5, time_cap_s=2.0),
    )
    summary = run_bench(options, gpu_backend, SilentReporter())
    results = read_results(tmp_path / "results.json")
    assert not check_text((tmp_path / "results.json").read_text())[1]
    measured: dict[str, set[str]] = {}
    for case in results.cases:
        measured.setdefault(case.benchmark, set()).update(b.name for b in case.baselines)
        assert case.library is None or case.baseline is not None
        if case.baselines:
            fastest = min(case.baselines, key=lambda b: b.stat.median_ms)
            assert case.library == fastest.name
    for bench, name in MUST_MEASURE[topic].items():
        unavailable = {
            u.name: u.reason for c in results.cases if c.benchmark == bench for u in c.unavailable
        }
        assert name in measured.get(bench, set()), (bench, unavailable, summary.exit_code)
