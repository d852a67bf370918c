"""Memory-bound kernels: copy, reduce, transpose, each against the card's bandwidth.

Three benchmarks share this topic. The versions are the `.cu` files beside
this one; each benchmark claims its files by a glob on the file stem, and
the kernel entry point of `NN_name.cu` is the `extern "C"` function `name`.
CuPy is imported inside the functions: this module is imported on machines
without a GPU (`bench --list`, the build's staleness check).
"""

from __future__ import annotations

from typing import Any

from curriculum.bench.api import (
    Arrays,
    Benchmark,
    LibraryBaseline,
    OutputSpec,
    Roofline,
    Shape,
    Suite,
    Version,
)

BLOCK = 256  # threads per block of the 1-D kernels; matches BLOCK in the .cu files
REDUCE_FLOATS_PER_BLOCK = BLOCK * 16  # 256 threads x 4 float4 loads, as in 03-05
TILE = 32  # transpose tile edge, as in 06-08
ROWS_PER_PASS = 8  # transpose block is TILE x ROWS_PER_PASS threads

SIZES = [1 << 20, 1 << 24, 1 << 26, 1 << 28]  # 4 MiB (fits L2) .. 1 GiB of float32
HEADLINE_N = 1 << 28

_functions: dict[tuple[int, str], tuple[Any, Any]] = {}


def _kernel(module: Any, version: Version) -> Any:
    """The entry point named after the file stem, looked up once per module."""
    key = (id(module), version.name)
    if key not in _functions:
        # Keep the module alive with its function, so its id is never reused.
        _functions[key] = (module, module.get_function(version.name))
    return _functions[key][1]


def _random_vector(shape: Shape, rng: Any) -> Arrays:
    import cupy

    return {"x": rng.random(shape["n"], dtype=cupy.float32)}


def _random_matrix(shape: Shape, rng: Any) -> Arrays:
    import cupy

    return {"x": rng.random((shape["rows"], shape["cols"]), dtype=cupy.float32)}


def _blocks(count: int, per_block: int) -> int:
    return (count + per_block - 1) // per_block


# --- copy --------------------------------------------------------------------

# Floats each thread moves, per version: the only thing the launch needs to know.
_COPY_FLOATS_PER_THREAD = {"copy_scalar": 1, "copy_vec4": 4}


def _launch_copy(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    n = shape["n"]
    per_thread = _COPY_FLOATS_PER_THREAD[version.name]
    if n % per_thread:
        raise ValueError(f"{version.stem} needs n divisible by {per_thread}, got {n}")
    count = n // per_thread
    _kernel(module, version)(
        (_blocks(count, BLOCK),), (BLOCK,), (arrays["x"], arrays["out"], numpy.int64(count))
    )


def _copy_baseline(arrays: Arrays, shape: Shape) -> Any:
    import cupy

    x = arrays["x"]
    y = cupy.empty_like(x)
    return lambda: cupy.copyto(y, x)


COPY = Benchmark(
    name="copy",
    match="*_copy_*",
    inputs=_random_vector,
    outputs={"out": OutputSpec(shape=lambda s: (s["n"],), dtype="float32")},
    reference=lambda x64, s: {"out": x64["x"]},
    launch=_launch_copy,
    flops=lambda s: 0.0,
    bytes=lambda s: 8.0 * s["n"],
    work_convention="no FLOPs; x read once (4n bytes) and out written once (4n bytes)",
    tolerance=0.0,
    tolerance_reason="a copy moves bits: any difference at all is a bug",
    shapes=[{"n": n} for n in SIZES],
    headline={"n": HEADLINE_N},
    roofline=Roofline(bandwidth="copy"),
    baselines=(LibraryBaseline(name="cupy.copyto", make=_copy_baseline),),
)


# --- reduce ------------------------------------------------------------------


def _launch_reduce(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    n = shape["n"]
    if n % REDUCE_FLOATS_PER_BLOCK:
        raise ValueError(f"{version.stem} needs n divisible by {REDUCE_FLOATS_PER_BLOCK}, got {n}")
    out = arrays["out"]
    out.fill(0)  # every version accumulates into out with atomics
    _kernel(module, version)((n // REDUCE_FLOATS_PER_BLOCK,), (BLOCK,), (arrays["x"], out))


def _sum_baseline(arrays: Arrays, shape: Shape) -> Any:
    import cupy

    x = arrays["x"]
    return lambda: cupy.sum(x)


REDUCE = Benchmark(
    name="reduce",
    match="*_reduce_*",
    inputs=_random_vector,
    outputs={"out": OutputSpec(shape=lambda s: (1,), dtype="float32")},
    reference=lambda x64, s: {"out": x64["x"].sum().reshape(1)},
    launch=_launch_reduce,
    flops=lambda s: float(s["n"]),
    bytes=lambda s: 4.0 * s["n"] + 4.0,
    work_convention="n additions (n - 1, counted as n); x read once (4n bytes), one float written",
    tolerance=1e-3,
    tolerance_reason=(
        "fp32 sum of up to 2^28 values in [0, 1), all positive so no cancellation. The loosest "
        "order is 03's: 2^24 sequential atomic adds into a total near 2^27, each rounded by up "
        "to half an ulp (4 to 8), a random walk of about 1e4 = 1e-4 of the sum 1.3e8. 1e-3 is "
        "about ten of those standard deviations; tree orders (04, 05) land near 1e-6. A lost or "
        "doubled block of 4096 values moves the sum by 2048, 4e-3 at n = 2^20: caught there."
    ),
    shapes=[{"n": n} for n in SIZES],
    headline={"n": HEADLINE_N},
    roofline=Roofline(bandwidth="read"),
    baselines=(LibraryBaseline(name="cupy.sum", make=_sum_baseline),),
)


# --- transpose ---------------------------------------------------------------

# Rows of the matrix one block covers, per version: naive blocks cover 8, tiled ones 32.
_TRANSPOSE_ROWS_PER_BLOCK = {
    "transpose_naive": ROWS_PER_PASS,
    "transpose_smem": TILE,
    "transpose_padded": TILE,
}


def _launch_transpose(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    rows, cols = shape["rows"], shape["cols"]
    if rows % TILE or cols % TILE:
        raise ValueError(f"{version.stem} needs rows and cols divisible by {TILE}")
    grid = (cols // TILE, rows // _TRANSPOSE_ROWS_PER_BLOCK[version.name])
    _kernel(module, version)(
        grid,
        (TILE, ROWS_PER_PASS),
        (arrays["x"], arrays["out"], numpy.int32(rows), numpy.int32(cols)),
    )


def _transpose_baseline(arrays: Arrays, shape: Shape) -> Any:
    import cupy

    x = arrays["x"]
    return lambda: cupy.ascontiguousarray(x.T)


TRANSPOSE = Benchmark(
    name="transpose",
    match="*_transpose_*",
    inputs=_random_matrix,
    outputs={"out": OutputSpec(shape=lambda s: (s["cols"], s["rows"]), dtype="float32")},
    reference=lambda x64, s: {"out": x64["x"].T},
    launch=_launch_transpose,
    flops=lambda s: 0.0,
    bytes=lambda s: 8.0 * s["rows"] * s["cols"],
    work_convention="no FLOPs; x read once and out written once (4 * rows * cols bytes each)",
    tolerance=0.0,
    tolerance_reason="a transpose moves bits: any difference at all is a bug",
    shapes=[
        {"rows": 1024, "cols": 1024},
        {"rows": 2048, "cols": 4096},
        {"rows": 4096, "cols": 4096},
        {"rows": 8192, "cols": 8192},
    ],
    headline={"rows": 8192, "cols": 8192},
    roofline=Roofline(bandwidth="copy"),
    baselines=(
        LibraryBaseline(name="cupy.ascontiguousarray(x.T)", make=_transpose_baseline),
    ),
)


SUITE = Suite(
    topic="memory",
    benchmarks=[COPY, REDUCE, TRANSPOSE],
    description="Copy, reduce and transpose: how close plain CUDA gets to the card's bandwidth.",
)
