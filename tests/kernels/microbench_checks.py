"""Checks shared by the microbenchmark suites' tests (launch, divergence, atomics,
banks, streams): header habits, ptxas resources against the header, a recording
stand-in for a compiled module, and one on-device check like the harness's."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from curriculum.bench.api import Version
from curriculum.bench.suites import LoadedSuite

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
RESOURCES = re.compile(
    r"Resources \(nvcc -arch=sm_90a, -Xptxas -v\): (\d+) registers, "
    r"(no shared memory|(\d+) bytes static shared memory), no spills\."
)


def assert_header(version: Version) -> None:
    """Title `NN what: detail`, the three labelled paragraphs, the resources line."""
    assert re.match(rf"^{version.stem[:2]} \S.*: \S", version.title), version.title
    text = " ".join(version.header)
    first = "Idea:" if version.number == 1 else "Idea against 0"
    for label in (first, "Expected bound:", "Estimate", "Size constraints:"):
        assert label in text, f"{version.stem}: header lacks {label!r}"
    assert RESOURCES.search(text), f"{version.stem}: no resources line"
    assert "static_assert" in version.source
    assert re.search(
        rf'extern "C" __global__ void __launch_bounds__\(\w+\)\s+{version.name}\(', version.source
    ), f"{version.stem}: no entry point {version.name}"


def ptxas_resources(cu: Path) -> tuple[int, int, str]:
    """(registers, static shared bytes, ptxas output) of one .cu for sm_90a."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    proc = subprocess.run(
        ["nvcc", "-arch=sm_90a", "-std=c++17", "-Xptxas", "-v", "-cubin", "-o", "/dev/null"]
        + [str(cu)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    regs = re.search(r"Used (\d+) registers", proc.stderr)
    assert regs, proc.stderr
    smem = re.search(r"(\d+) bytes smem", proc.stderr)
    return int(regs[1]), int(smem[1]) if smem else 0, proc.stderr


def assert_resources_recorded(version: Version) -> None:
    """Compiles without warnings or spills, and the header states what ptxas reports."""
    regs, smem, log = ptxas_resources(version.path)
    assert "warning" not in log.lower(), log
    spills = re.findall(r"(\d+) bytes (?:stack frame|spill stores|spill loads)", log)
    assert spills and all(n == "0" for n in spills), log
    m = RESOURCES.search(" ".join(version.header))
    assert m is not None
    assert int(m[1]) == regs, f"{version.stem}: header says {m[1]} registers, ptxas {regs}"
    assert (int(m[3]) if m[3] else 0) == smem, f"{version.stem}: shared memory {smem} bytes"


class RecordingModule:
    """Stands for a compiled module: every launch of every entry is recorded."""

    def __init__(self) -> None:
        self.launches: list[tuple[str, tuple[int, ...], tuple[int, ...], tuple[Any, ...]]] = []

    def get_function(self, name: str) -> Any:
        def launch(grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...]) -> None:
            self.launches.append((name, grid, block, args))

        return launch


def gpu_or_skip() -> Any:
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA device")
    return cupy


def check_on_device(
    loaded: LoadedSuite, version: Version, shape: dict[str, int], launches: int = 2
) -> float:
    """The harness's check: fresh inputs, poisoned outputs, launch, compare; then a few
    more launches (as the timing does) and compare again. Returns the worst rel error."""
    cupy = gpu_or_skip()
    bench = loaded.claims[version.stem]
    options = tuple(bench.compile_options) + tuple(bench.version_options.get(version.stem, ()))
    module = cupy.RawModule(code=version.source, options=options)
    inputs = bench.inputs(shape, cupy.random.default_rng(1234))
    outputs = {}
    for name, spec in bench.outputs.items():
        out = cupy.empty(spec.shape(shape), dtype=spec.dtype)
        if out.dtype.kind == "f":
            out.fill(cupy.nan)
        else:
            out.view(cupy.uint8).fill(0xFF)
        outputs[name] = out
    arrays = {**inputs, **outputs}
    ref = bench.reference({k: a.astype(cupy.float64) for k, a in inputs.items()}, shape)
    worst = 0.0
    for _ in range(1 + launches):
        bench.launch(module, version, shape, arrays)
        cupy.cuda.runtime.deviceSynchronize()
        got = bench.compare(outputs) if bench.compare else outputs
        for name in bench.outputs:
            g = got[name].astype(cupy.float64)
            assert bool(cupy.isfinite(g).all()), f"{version.id} {shape}: {name} not finite"
            diff = float(cupy.linalg.norm(g - ref[name]))
            norm = float(cupy.linalg.norm(ref[name]))
            rel = diff / norm if norm else diff
            assert rel <= bench.tolerance, f"{version.id} {shape}: rel err {rel:.3e}"
            worst = max(worst, rel)
    return worst
