"""Launch overhead: an empty kernel launched back to back, and the same kernels as a CUDA graph.

Both versions run the same one-warp kernel that writes out[k] = seed + k and
nothing else. `01_empty` launches it `launches` times from Python on the
harness's stream; `02_graph_replay` captures those launches once per shape
into a CUDA graph (stream capture on a side stream) and each timed launch
replays the graph on the harness's stream. `items` is the number of kernels
a launch of the case runs, so `ns_per_item` is the cost of one kernel.
CuPy is imported inside functions only.
"""

from __future__ import annotations

from typing import Any

from curriculum.bench.api import Arrays, Benchmark, OutputSpec, Roofline, Shape, Suite, Version
from curriculum.bench.kit import kernel

BLOCK = 32  # one warp; matches BLOCK in the .cu files
LAUNCHES = (1, 16, 256)
HEADLINE_LAUNCHES = 256


def _xp(a: Any) -> Any:
    """The array module of `a`: CuPy on the device, NumPy in the CPU-side tests."""
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    import numpy

    return numpy


def kernels_per_launch(shape: Shape) -> int:
    return shape["launches"]


def _inputs(shape: Shape, rng: Any) -> Arrays:
    import cupy

    return {"seed": rng.integers(1, 1 << 20, size=1).astype(cupy.int32)}


def _reference(x64: Arrays, shape: Shape) -> Arrays:
    seed = x64["seed"]
    xp = _xp(seed)
    return {"out": seed[0] + xp.arange(shape["launches"], dtype=xp.float64)}


def _args(arrays: Arrays, k: int, n: int) -> tuple[Any, ...]:
    import numpy

    return (arrays["seed"], arrays["out"], numpy.int32(k), numpy.int32(n))


def _launch_back_to_back(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    fn = kernel(module, version.name)
    n = shape["launches"]
    for k in range(n):
        fn((1,), (BLOCK,), _args(arrays, k, n))


# (function id, launches, seed pointer, out pointer) -> (graph, capture stream, seed, out).
# The arrays are kept alive with their graph, so no later buffer can reuse their memory
# while a graph still writes there; one graph a case, a few kilobytes each.
_graphs: dict[tuple[int, int, int, int], tuple[Any, Any, Any, Any]] = {}


def graph_key(fn: Any, shape: Shape, arrays: Arrays) -> tuple[int, int, int, int]:
    return (id(fn), shape["launches"], arrays["seed"].data.ptr, arrays["out"].data.ptr)


def _launch_graph(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import cupy

    fn = kernel(module, version.name)
    key = graph_key(fn, shape, arrays)
    if key not in _graphs:
        n = shape["launches"]
        # Capture cannot run on the legacy default stream: a non-blocking side stream
        # records the launches, and the graph is then launched on the harness's stream.
        capture = cupy.cuda.Stream(non_blocking=True)
        with capture:
            capture.begin_capture()
            try:
                for k in range(n):
                    fn((1,), (BLOCK,), _args(arrays, k, n))
            finally:
                graph = capture.end_capture()
        _graphs[key] = (graph, capture, arrays["seed"], arrays["out"])
    _graphs[key][0].launch(stream=cupy.cuda.get_current_stream())


def _benchmark(name: str, match: str, launch: Any, convention: str) -> Benchmark:
    return Benchmark(
        name=name,
        match=match,
        inputs=_inputs,
        outputs={"out": OutputSpec(shape=lambda s: (s["launches"],), dtype="int32")},
        reference=_reference,
        launch=launch,
        flops=lambda s: 0.0,
        bytes=lambda s: 0.0,
        work_convention=convention,
        tolerance=0.0,
        tolerance_reason=(
            "each kernel stores one integer, seed + k: any difference means a launch was "
            "lost, repeated with the wrong k, or wrote the wrong slot"
        ),
        shapes=[{"launches": n} for n in LAUNCHES],
        headline={"launches": HEADLINE_LAUNCHES},
        roofline=Roofline(bandwidth=None, compute=None),
        items=kernels_per_launch,
        items_label="kernel launches",
        flush_l2=False,
    )


EMPTY = _benchmark(
    "empty_launch",
    "*_empty",
    _launch_back_to_back,
    "no FLOPs, no bytes counted (one 4-byte store a kernel); `launches` kernels launched "
    "back to back from Python on one stream, timed as a whole",
)
GRAPH = _benchmark(
    "graph_replay",
    "*_graph_replay",
    _launch_graph,
    "no FLOPs, no bytes counted (one 4-byte store a kernel); the same `launches` kernels "
    "captured once into a CUDA graph, one graph launch timed",
)

SUITE = Suite(
    topic="launch",
    benchmarks=[EMPTY, GRAPH],
    description=(
        "Launch overhead: an empty kernel launched back to back from Python, and the same "
        "kernels replayed from a CUDA graph."
    ),
)
