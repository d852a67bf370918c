"""Copy/compute overlap: 64 MiB copied from pinned host memory and computed, in chunks.

Both versions copy x (2^24 floats) from pinned host memory to a device buffer
with cudaMemcpyAsync and run the same kernel (2048 FMAs an element) on it,
chunk by chunk. `01_serial` queues everything on the harness's stream;
`02_overlapped` puts chunk c on side stream c mod 4, joined to the harness's
stream with events at both ends so the harness's timing covers all of it.
x itself lives in pinned host memory: the input maker returns it as a NumPy
array over a pinned buffer, so the harness's re-check, which writes fresh values
into the same input buffers, changes what the next launch copies. No launch keeps
a host copy of its own; the device buffer the copies fill is scratch, made once
per run and NaN-filled, and every launch overwrites all of it before reading it.
CuPy is imported inside functions only.
"""

from __future__ import annotations

from typing import Any

from curriculum.bench.api import Arrays, Benchmark, OutputSpec, Roofline, Shape, Suite, Version
from curriculum.bench.kit import kernel

BLOCK = 256  # matches BLOCK in the .cu files
UNROLL = 8  # iters must be a multiple of it
ITERS = 2048
N = 1 << 24  # 64 MiB of float32: the pinned host buffer and the device buffer
STREAMS = 4  # side streams of 02
A = 1.0 - 1.0 / 2048.0  # matches A and B in the .cu files (exact in fp32)
B = 1.0 / 2048.0

CUDA_MEMCPY_HOST_TO_DEVICE = 1  # cudaMemcpyKind, should the runtime module not name it

CHUNKS = (1, 2, 4, 8, 16)
HEADLINE_CHUNKS = 8


def expected(x: Any, iters: int = ITERS) -> Any:
    """y after `iters` steps of y = y * A + B from y = x, in closed form (float64)."""
    a_k = A**iters
    return a_k * x + B * (1.0 - a_k) / (1.0 - A)


def chunk_bounds(n: int, chunks: int) -> list[tuple[int, int]]:
    """[begin, end) of each chunk; n must be a multiple of `chunks`."""
    if chunks < 1 or n % chunks:
        raise ValueError(f"n={n} is not a multiple of chunks={chunks}")
    size = n // chunks
    return [(c * size, (c + 1) * size) for c in range(chunks)]


def pinned_like(x: Any) -> Any:
    """A NumPy float32 array over page-locked host memory holding x's values (x on the device)."""
    import cupy
    import numpy

    n = int(x.size)
    host = numpy.frombuffer(cupy.cuda.alloc_pinned_memory(4 * n), dtype=numpy.float32, count=n)
    host[...] = x.get()  # the array keeps its pinned buffer alive
    return host


def _inputs(shape: Shape, rng: Any) -> Arrays:
    import numpy

    return {"x": pinned_like(rng.random(N, dtype=numpy.float32))}


def _reference(x64: Arrays, shape: Shape) -> Arrays:
    import cupy

    return {"out": cupy.asarray(expected(x64["x"]))}  # x64 is on the host, like x


class _Staged:
    """The host address of x and the device buffer the copies fill."""

    def __init__(self, host_ptr: int, dev: Any) -> None:
        self.host_ptr = host_ptr
        self.dev = dev


_scratch: list[Any] = []  # the device buffer, made once


def _staging(x: Any) -> _Staged:
    """x's own pinned buffer as the source, nothing copied from it ahead of time."""
    import cupy

    if x.dtype != "float32" or int(x.size) != N or not x.flags.c_contiguous:
        raise ValueError(f"x must be {N} contiguous float32 values in host memory")
    if not _scratch:
        dev = cupy.empty(N, dtype=cupy.float32)
        dev.fill(float("nan"))  # a chunk never copied computes NaN on the first launch
        _scratch.append(dev)
    return _Staged(int(x.ctypes.data), _scratch[0])


def _copy(st: _Staged, begin: int, end: int, stream: Any) -> None:
    import cupy

    runtime = cupy.cuda.runtime
    runtime.memcpyAsync(
        st.dev.data.ptr + 4 * begin,
        st.host_ptr + 4 * begin,
        4 * (end - begin),
        getattr(runtime, "memcpyHostToDevice", CUDA_MEMCPY_HOST_TO_DEVICE),
        stream.ptr,
    )


def _compute(fn: Any, st: _Staged, out: Any, begin: int, end: int) -> None:
    import numpy

    blocks = (end - begin + BLOCK - 1) // BLOCK
    fn(
        (blocks,),
        (BLOCK,),
        (st.dev, out, numpy.int64(begin), numpy.int64(end), numpy.int32(ITERS)),
    )


def _launch_serial(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import cupy

    fn = kernel(module, version.name)
    st = _staging(arrays["x"])
    stream = cupy.cuda.get_current_stream()
    for begin, end in chunk_bounds(N, shape["chunks"]):
        _copy(st, begin, end, stream)
        _compute(fn, st, arrays["out"], begin, end)


_side: list[tuple[Any, Any]] = []  # (stream, join event), made once
_fork: list[Any] = []  # the event the side streams wait on, made once


def _side_streams() -> tuple[Any, list[tuple[Any, Any]]]:
    import cupy

    if not _side:
        _fork.append(cupy.cuda.Event(disable_timing=True))
        for _ in range(STREAMS):
            _side.append(
                (cupy.cuda.Stream(non_blocking=True), cupy.cuda.Event(disable_timing=True))
            )
    return _fork[0], _side


def _launch_overlapped(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import cupy

    fn = kernel(module, version.name)
    st = _staging(arrays["x"])
    current = cupy.cuda.get_current_stream()
    fork, side = _side_streams()
    chunks = chunk_bounds(N, shape["chunks"])
    used = side[: min(STREAMS, len(chunks))]
    # Fork: nothing on a side stream starts before what the harness queued so far
    # (its start event included).
    fork.record(current)
    for stream, _ in used:
        stream.wait_event(fork)
    for c, (begin, end) in enumerate(chunks):
        stream = used[c % len(used)][0]
        _copy(st, begin, end, stream)
        with stream:
            _compute(fn, st, arrays["out"], begin, end)
    # Join: the harness's stream (and its end event) waits for every side stream.
    for stream, done in used:
        done.record(stream)
        current.wait_event(done)


def _benchmark(name: str, match: str, launch: Any, convention: str) -> Benchmark:
    return Benchmark(
        name=name,
        match=match,
        inputs=_inputs,
        outputs={"out": OutputSpec(shape=lambda s: (N,), dtype="float32")},
        reference=_reference,
        launch=launch,
        flops=lambda s: 2.0 * ITERS * N,
        bytes=lambda s: 4.0 * N,
        work_convention=convention,
        tolerance=1e-5,
        tolerance_reason=(
            "fp32 recurrence y = fma(y, A, B), 2048 steps, against its float64 closed form: "
            "one rounding a step (2^-24 relative), damped by A < 1, leaves some 1e-7 "
            "norm-wise; a chunk never copied computes NaN (the device buffer starts as NaN) "
            "and a chunk never computed keeps the output's NaN poison"
        ),
        shapes=[{"chunks": c} for c in CHUNKS],
        headline={"chunks": HEADLINE_CHUNKS},
        roofline=Roofline(bandwidth=None, compute=None),
        flush_l2=False,
    )


_CONVENTION = (
    "bytes are the host-to-device copy only (4n, 64 MiB from pinned memory), so GB/s is the "
    "copy's rate over the whole time; FLOPs are 2 x 2048 FMAs an element; the kernel's own "
    "8n device bytes are not counted"
)

SERIAL = _benchmark(
    "serial", "*_serial", _launch_serial, _CONVENTION + "; every chunk on the harness's stream"
)
OVERLAPPED = _benchmark(
    "overlapped",
    "*_overlapped",
    _launch_overlapped,
    _CONVENTION + "; chunk c on side stream c mod 4, forked and joined with events",
)

SUITE = Suite(
    topic="streams",
    benchmarks=[SERIAL, OVERLAPPED],
    description=(
        "Copy/compute overlap: host-to-device copies and a compute kernel in chunks, on one "
        "stream against four."
    ),
)
