"""Helpers for the tests of the latency, bandwidth, pipes, tensorcore and occupancy suites:
run a suite's `inputs` and `reference` on NumPy (they are written against the array API
that CuPy and NumPy share), and check a header's register line against ptxas."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from microbench_checks import ptxas_resources

from curriculum.bench.api import Benchmark, Shape, Version

REGISTERS = re.compile(r"Registers \(nvcc 13\.0, sm_90a, -Xptxas -v\): (\d+) per thread, no spills")


@contextmanager
def numpy_as_cupy() -> Iterator[None]:
    """`import cupy` inside the suite's functions gives NumPy for the duration."""
    saved = sys.modules.get("cupy")
    sys.modules["cupy"] = np
    try:
        yield
    finally:
        if saved is None:
            del sys.modules["cupy"]
        else:
            sys.modules["cupy"] = saved


def inputs_and_reference(bench: Benchmark, shape: Shape, seed: int = 7) -> tuple[dict, dict]:
    """The suite's inputs (NumPy) and its reference from their float64 upcast, as the harness
    calls them."""
    with numpy_as_cupy():
        inputs = bench.inputs(shape, np.random.default_rng(seed))
        reference = bench.reference({k: a.astype(np.float64) for k, a in inputs.items()}, shape)
    for name, spec in bench.outputs.items():
        assert tuple(reference[name].shape) == tuple(spec.shape(shape)), name
    return inputs, reference


def rel_err(got: Any, want: Any) -> float:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return float(np.linalg.norm((got - want).ravel()) / np.linalg.norm(want.ravel()))


def assert_header(version: Version, extra: tuple[str, ...] = ()) -> None:
    """Title `NN what: detail`; idea, check, expected bound with an estimate, size constraints."""
    assert re.match(rf"^{version.stem[:2]} \S.*: \S", version.title), version.title
    text = " ".join(version.header)
    assert "Idea:" in text or "Idea against 0" in text, f"{version.stem}: header lacks its idea"
    for label in ("Check:", "Expected bound:", "Estimate", "Size constraints:", *extra):
        assert label in text, f"{version.stem}: header lacks {label!r}"
    assert "static_assert" in version.source
    assert re.search(
        rf'extern "C" __global__ void __launch_bounds__\([^)]*\)\s+{version.name}\(',
        version.source,
    ), f"{version.stem}: no entry point {version.name}"


def assert_registers_recorded(version: Version) -> tuple[int, int, str]:
    """No warnings, no spills, and the header's register count is ptxas's."""
    regs, smem, log = ptxas_resources(version.path)
    assert "warning" not in log.lower(), log
    assert "wgmma serialization" not in log, log
    spills = re.findall(r"(\d+) bytes (?:stack frame|spill stores|spill loads)", log)
    assert spills and all(n == "0" for n in spills), log
    m = REGISTERS.search(" ".join(version.header))
    assert m is not None, f"{version.stem}: no registers line"
    assert int(m[1]) == regs, f"{version.stem}: header says {m[1]} registers, ptxas {regs}"
    return regs, smem, log
