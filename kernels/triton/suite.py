"""Triton versions of four kernels the CUDA topics build: softmax, LayerNorm, a bf16 GEMM (with
fp32 and with bf16 C) and the FlashAttention forward.

Each version is a `.py` file: a Triton kernel and a `launch(shape, tensors, ...)` that sizes
its grid. Each benchmark is the matching CUDA benchmark itself, taken from that topic's suite
and changed only where a Triton version needs it, so the inputs, the float64 reference, the
tolerance, the work model, the roofline and the library candidates are the same objects:

- `softmax` is softmax's `softmax` (fp32, against softmax/03_block_row);
- `layernorm` is layernorm's `layernorm` (fp32, against layernorm/06_stable_variance);
- `bf16` is gemm's `bf16` (bf16 A and B, fp32 C, against gemm/12_wgmma_tma);
- `bf16_out` is gemm's `bf16_out` (the same with bf16 C, against gemm/13_wgmma_persistent),
  for a plain Triton GEMM and one with TMA descriptors and persistent programs;
- `prefill` is attention's `prefill` (bf16 FlashAttention forward, against attention/02).

The names are kept too: the harness times the library candidates once per benchmark name and
shape in a run, so a run that measures a Triton version and its CUDA counterpart (one `--only`
with both ids, comma-separated) holds one library figure for both.

What changes: `match` (the Triton file), `launch` (below), the shapes (the headline only: the
CUDA suites sweep sizes, the comparison needs one) and `check_shapes`, one ragged shape each,
where no size is a multiple of a tile: every Triton version masks its tails and is checked
there, untimed, before any figure of it is recorded.

The launcher hands a version torch tensors over the harness's CuPy arrays (zero-copy; bf16,
carried as uint16, viewed as bfloat16), and runs it on CuPy's current stream, the one the
harness times. CuPy, PyTorch and Triton are imported inside functions only: this module is
imported on machines without a GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

from curriculum.bench.api import Arrays, Benchmark, Shape, Suite, Version
from curriculum.bench.suites import suite_module

SOFTMAX = suite_module("softmax", __file__)
LAYERNORM = suite_module("layernorm", __file__)
GEMM = suite_module("gemm", __file__)
ATTENTION = suite_module("attention", __file__)


def benchmark_of(module: Any, name: str) -> Benchmark:
    """A topic suite's benchmark by name."""
    for bench in module.SUITE.benchmarks:
        if bench.name == name:
            return bench
    raise KeyError(f"{module.SUITE.topic}: no benchmark {name!r}")


# --- launching: torch tensors over the harness's arrays, on its stream ---------------------

_streams: dict[int, Any] = {}
_last: list[dict[str, Any]] = [{}, {}]  # the arrays last launched on, and their torch views


def tensors(arrays: Arrays) -> dict[str, Any]:
    """Torch views of the harness's CuPy arrays, made again only when the arrays change (the
    timed launches reuse one set, so they pay for no conversion); one set is held at a time."""
    held, views = _last
    if held.keys() != arrays.keys() or any(held[k] is not a for k, a in arrays.items()):
        from curriculum.bench.kit import torch_view

        _last[0] = dict(arrays)
        _last[1] = views = {name: torch_view(a) for name, a in arrays.items()}
    return views


def cupy_stream() -> Any:
    """A context that makes CuPy's current stream torch's (Triton launches on torch's)."""
    import cupy
    import torch

    ptr = cupy.cuda.get_current_stream().ptr
    if torch.cuda.current_stream().cuda_stream == ptr:
        return contextlib.nullcontext()
    if ptr not in _streams:
        _streams[ptr] = torch.cuda.ExternalStream(ptr)
    return torch.cuda.stream(_streams[ptr])


def launcher(**params: Any) -> Callable[[Any, Version, Shape, Arrays], None]:
    """A Benchmark's `launch` for Python versions: `module.launch(shape, tensors, **params)`."""

    def launch(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
        views = tensors(arrays)
        with cupy_stream():
            module.launch(dict(shape), views, **params)

    return launch


# --- the benchmarks: the CUDA ones, at their headline, with one ragged check shape ----------


def triton_benchmark(module: Any, name: str, match: str, ragged: Shape, **params: Any) -> Benchmark:
    bench = benchmark_of(module, name)
    return dataclasses.replace(
        bench,
        match=match,
        launch=launcher(**params),
        shapes=(dict(bench.headline),),
        check_shapes=(dict(ragged),),
        compile_options=(),
        version_options={},
    )


# No size a multiple of its tile (128, 256, 64), yet every row a multiple of 16 bytes, which
# TMA requires of 06's descriptors; 712 and 1496 are not multiples of 16 elements, so 03 and 04
# are compiled without the 16-byte specialisation here.
GEMM_RAGGED = {"m": 1000, "n": 1496, "k": 712}

SUITE = Suite(
    topic="triton",
    description=(
        "The same four kernels written in Triton, one program a block of the output: softmax "
        "and LayerNorm with a row in registers, a bf16 GEMM on the tensor cores and the "
        "FlashAttention forward; measured on the CUDA suites' inputs, references and "
        "library candidates."
    ),
    benchmarks=[
        triton_benchmark(SOFTMAX, "softmax", "*_softmax", {"rows": 1000, "cols": 3000}),
        triton_benchmark(
            LAYERNORM, "layernorm", "*_layernorm", {"rows": 1000, "cols": 3000}, eps=LAYERNORM.EPS
        ),
        triton_benchmark(GEMM, "bf16", "*_gemm_bf16", GEMM_RAGGED),
        triton_benchmark(GEMM, "bf16_out", "*_gemm_bf16_out*", GEMM_RAGGED),
        triton_benchmark(
            ATTENTION, "prefill", "*_flash_attention", {"b": 1, "h": 2, "s": 1000, "d": 128}
        ),
    ],
)
