"""Kernels that pass a careless harness without doing the work: one cheat a version.

Every version is expected to be refused, each with the refusal code in `EXPECTED`
(`curriculum.bench.refusals` holds the codes and their text). The suite is
declared `expected_refusal`: `curriculum bench` leaves it out of a run over all
topics, runs it with `--only 'cheats/*'`, records none of its cases, and fails
if any one of them is let through. The GPU test `tests/bench/test_cheats_gpu.py`
asserts each refusal.

Two operations:

- `add` (01-04, 07): out = x + y over n fp32 values, x in [100, 101) and
  y in [0, 1). The answer is about 101 and varies by about 0.4, so a
  constant, or x itself, is within 1% of it in norm: a tolerance of 1e-2
  would accept both. The suite's own tolerance is that of one fp32 add.
- `sgemm` (05, 06): C = A B in fp32 with entries in [-1, 1), timed at 1024^3
  and checked, untimed, at 1000^3 as well.

The kernel entry point is `add` or `sgemm`; 03 also has `remember`, and 04's
host side launches on a stream of its own (that is its cheat).
"""

from __future__ import annotations

from typing import Any

from curriculum.bench.api import Arrays, Benchmark, OutputSpec, Roofline, Shape, Suite, Version

BLOCK = 256  # threads per block of the add kernels, as in the .cu files
TILE = 32  # sgemm tile edge, as in 05 and 06
# 64 MiB per array: the launch-only cheat's physical floor is about 30 us, well above an
# empty pair of events, and its kernel is shorter than one timed repetition (the L2 flush
# alone), so launches left running on its own stream do not pile up.
ADD_N = 1 << 24

EXPECTED = {
    "01_add_constant": "constant-output",
    "02_add_echo_input": "input-echo",
    "03_add_cached": "stale-output",
    "04_add_launch_only": "below-physical-floor",
    "05_sgemm_bf16": "above-tolerance",
    "06_sgemm_whole_tiles": "wrong-at-other-shape",
    "07_add_rewrite_inputs": "inputs-modified",
}

_functions: dict[tuple[int, str], tuple[Any, Any]] = {}
_side: list[Any] = []  # 04's private stream, made once


def _kernel(module: Any, entry: str) -> Any:
    key = (id(module), entry)
    if key not in _functions:
        _functions[key] = (module, module.get_function(entry))
    return _functions[key][1]


def _side_stream() -> Any:
    import cupy

    if not _side:
        _side.append(cupy.cuda.Stream(non_blocking=True))
    return _side[0]


# --- add -----------------------------------------------------------------------------------


def _add_inputs(shape: Shape, rng: Any) -> Arrays:
    import cupy

    n = shape["n"]
    return {
        "x": rng.random(n, dtype=cupy.float32) + cupy.float32(100.0),
        "y": rng.random(n, dtype=cupy.float32),
    }


def _launch_add(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    n = shape["n"]
    args = (arrays["x"], arrays["y"], arrays["out"], numpy.int64(n))
    grid = ((n + BLOCK - 1) // BLOCK,)
    if version.stem == "04_add_launch_only":
        with _side_stream():
            _kernel(module, "add")(grid, (BLOCK,), args)
        return
    _kernel(module, "add")(grid, (BLOCK,), args)
    if version.stem == "03_add_cached":
        _kernel(module, "remember")((1,), (1,), (arrays["x"],))


ADD = Benchmark(
    name="add",
    match="*_add_*",
    inputs=_add_inputs,
    outputs={"out": OutputSpec(shape=lambda s: (s["n"],), dtype="float32")},
    reference=lambda x64, s: {"out": x64["x"] + x64["y"]},
    launch=_launch_add,
    flops=lambda s: float(s["n"]),
    bytes=lambda s: 12.0 * s["n"],
    work_convention="n FLOPs; x and y read once (8n bytes), out written once (4n bytes)",
    tolerance=1e-6,
    tolerance_reason="one fp32 add rounds to 2^-24 relative; 1e-6 leaves a wide margin",
    shapes=[{"n": ADD_N}],
    headline={"n": ADD_N},
    roofline=Roofline(bandwidth="copy"),
    check_shapes=[{"n": 1_000_003}],
)


# --- sgemm ---------------------------------------------------------------------------------


def _sgemm_inputs(shape: Shape, rng: Any) -> Arrays:
    import cupy

    m, n, k = shape["m"], shape["n"], shape["k"]
    return {
        "a": rng.random((m, k), dtype=cupy.float32) * 2 - 1,
        "b": rng.random((k, n), dtype=cupy.float32) * 2 - 1,
    }


def _launch_sgemm(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    m, n, k = shape["m"], shape["n"], shape["k"]
    grid = ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE)
    args = (arrays["a"], arrays["b"], arrays["c"], numpy.int32(m), numpy.int32(n), numpy.int32(k))
    _kernel(module, "sgemm")(grid, (TILE, TILE), args)


SGEMM_SHAPE = {"m": 1024, "n": 1024, "k": 1024}

SGEMM = Benchmark(
    name="sgemm",
    match="*_sgemm_*",
    inputs=_sgemm_inputs,
    outputs={"c": OutputSpec(shape=lambda s: (s["m"], s["n"]), dtype="float32")},
    reference=lambda x64, s: {"c": x64["a"] @ x64["b"]},
    launch=_launch_sgemm,
    flops=lambda s: 2.0 * s["m"] * s["n"] * s["k"],
    bytes=lambda s: 4.0 * (s["m"] * s["k"] + s["k"] * s["n"] + s["m"] * s["n"]),
    work_convention="2mnk FLOPs; A and B read once, C written once",
    tolerance=1e-5,
    tolerance_reason=(
        "fp32 accumulation over k = 1024 terms of random sign lands near 1e-6 relative; "
        "bf16 inputs land near 2e-3"
    ),
    shapes=[SGEMM_SHAPE],
    headline=SGEMM_SHAPE,
    roofline=Roofline(bandwidth="copy", compute="sgemm_fp32"),
    check_shapes=[{"m": 1000, "n": 1000, "k": 1000}],
)

SUITE = Suite(
    topic="cheats",
    benchmarks=[ADD, SGEMM],
    description=(
        "Kernels that pass a careless harness without doing the work, one cheat each; "
        "every one is expected to be refused."
    ),
    expected_refusal=True,
)
