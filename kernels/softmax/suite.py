"""Softmax over the last dimension of a row-major (rows, cols) tensor.

Three benchmarks share one input maker and one float64 reference:

- `softmax`: the fp32 ladder (three passes, online, one block per row in registers);
- `softmax_bf16`: the final kernel with bf16 input and output, fp32 inside;
- `softmax_lse_merge`: softmax assembled from two half-row states, checked against
  the dense softmax of the whole row.

Every shape keeps rows * cols = 2**27 (512 MiB a tensor in fp32, 256 MiB in bf16),
several times the L2, so that each case streams from DRAM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from curriculum.bench import kit
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
from curriculum.bench.kit import (
    bf16_bits_to_float64,
    compare_bf16,
    kernel,
    on_cupy_stream,
    to_bf16_bits,
    torch_view,
)

ELEMENTS = 1 << 27
SWEEP_COLS = (1024, 2048, 4096, 8192, 16384, 32768)
SHAPES: tuple[dict[str, int], ...] = tuple({"rows": ELEMENTS // c, "cols": c} for c in SWEEP_COLS)
HEADLINE: dict[str, int] = {"rows": 32768, "cols": 4096}
LOGIT_SCALE = 2.0  # inputs are 2 * N(0, 1): a 4096-value row peaks about 7 above its mean
FLOPS_PER_ELEMENT = 5  # max, subtract, exp (counted as one), add, scale


class Launch(NamedTuple):
    suffix: str  # appended to the file's name to give the entry point: "" or "_vpt4"
    block: int  # threads; the grid is one block a row


def _fixed_block(threads: int) -> Callable[[Shape], Launch]:
    return lambda shape: Launch("", threads)


def _row_in_registers(
    per_vector: int, small_vpt: int, large_vpt: int, whole: int
) -> Callable[[Shape], Launch]:
    """Plan for a kernel whose threads each hold `vpt` 16-byte vectors of one row.

    The block is cols / (per_vector * vpt) threads, a multiple of `whole` (32: whole
    warps; 64: two halves of whole warps) and at most 1024. The larger VPT is taken
    above 8192 columns, so the block stays at or under 512 threads where it can.
    """

    def plan(shape: Shape) -> Launch:
        cols = shape["cols"]
        vpt = small_vpt if cols <= 8192 else large_vpt
        per_block = per_vector * vpt * whole
        threads = cols // (per_vector * vpt)
        if cols % per_block or not whole <= threads <= 1024:
            raise ValueError(
                f"cols={cols} must be a multiple of {per_block} and give "
                f"{whole}..1024 threads at VPT={vpt}; got {cols / (per_vector * vpt):g}"
            )
        return Launch(f"_vpt{vpt}", threads)

    return plan


# One entry per version: how its block follows the shape.
PLANS: dict[str, Callable[[Shape], Launch]] = {
    "01_three_pass": _fixed_block(256),
    "02_online": _fixed_block(256),
    "03_block_row": _row_in_registers(4, 4, 8, 32),
    "04_block_row_bf16": _row_in_registers(8, 2, 4, 32),
    "05_lse_merge": _row_in_registers(4, 4, 8, 64),
}


def plan(version: Version, shape: Shape) -> tuple[str, int]:
    """(entry point, threads a block) of `version` at `shape`; the grid is `rows`.

    The entry point of `NN_name.cu` is `name`, or `name_vptK` where the file
    instantiates its kernel for several vector counts a thread.
    """
    if version.stem not in PLANS:
        raise KeyError(f"softmax: no launch plan for {version.stem}; add one to PLANS")
    try:
        suffix, block = PLANS[version.stem](shape)
    except ValueError as exc:
        raise ValueError(f"{version.id}: {exc}") from exc
    return version.name + suffix, block




def _launch(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    entry, block = plan(version, shape)
    function = kernel(module, entry)
    function((shape["rows"],), (block,), (arrays["x"], arrays["y"], np.int32(shape["cols"])))


# --- bf16 carried as uint16 -------------------------------------------------------------


# --- inputs and reference ---------------------------------------------------------------


def _logits(shape: Shape, rng: Any) -> Any:
    import cupy

    size = (shape["rows"], shape["cols"])
    x = cupy.asarray(rng.standard_normal(size, dtype=np.float32))
    x *= np.float32(LOGIT_SCALE)
    return x


def _inputs_f32(shape: Shape, rng: Any) -> Arrays:
    return {"x": _logits(shape, rng)}


def _inputs_bf16(shape: Shape, rng: Any) -> Arrays:
    return {"x": to_bf16_bits(_logits(shape, rng))}


def softmax64(x: Any) -> Any:
    """Dense float64 softmax over the last axis."""
    import cupy

    e = cupy.exp(x - x.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def _reference_f32(inputs64: Arrays, shape: Shape) -> Arrays:
    return {"y": softmax64(inputs64["x"])}


def _reference_bf16(inputs64: Arrays, shape: Shape) -> Arrays:
    return {"y": softmax64(bf16_bits_to_float64(inputs64["x"]))}


def _out(dtype: str) -> dict[str, OutputSpec]:
    return {"y": OutputSpec(shape=lambda s: (s["rows"], s["cols"]), dtype=dtype)}


# --- the library baselines: eager and compiled PyTorch ------------------------------------


def _torch_softmax(compiled: bool) -> Callable[[Arrays, Shape], Callable[[], None]]:
    def make(inputs: Arrays, shape: Shape) -> Callable[[], None]:
        import torch

        def softmax(x: Any) -> Any:
            return torch.softmax(x, dim=-1)

        # One compiled function for the run (the first closure: it holds only torch); each
        # shape compiles once, statically, on its first call in `warmed`.
        op = kit.compiled("softmax", softmax) if compiled else softmax
        x = torch_view(inputs["x"])
        return kit.warmed(on_cupy_stream(lambda: op(x)))

    return make


TORCH_SOFTMAX = (
    LibraryBaseline(name="torch.softmax", make=_torch_softmax(compiled=False)),
    LibraryBaseline(name="torch.compile(torch.softmax)", make=_torch_softmax(compiled=True)),
)


# --- the work model ---------------------------------------------------------------------


def bytes_moved(shape: Shape, element_bytes: int) -> float:
    """Each element read once and written once; nothing else touches memory."""
    return float(2 * shape["rows"] * shape["cols"] * element_bytes)


def flops(shape: Shape) -> float:
    return float(FLOPS_PER_ELEMENT * shape["rows"] * shape["cols"])


WORK = (
    "bytes: the input read once and the output written once, rows*cols*(4+4) in fp32, "
    "rows*cols*(2+2) in bf16; FLOPs: 5 an element (max, subtract, exp counted as one, add, "
    "scale), about 0.6 FLOP/byte in fp32, so the bound is bandwidth"
)

TOL_F32 = 1e-5
TOL_F32_REASON = (
    "fp32 arithmetic with __expf (2 ulp near the max, a few more far below it) and sums of "
    "up to 32768 terms in a tree; expected ||err||/||ref|| is around 1e-7, so 1e-5 leaves two "
    "orders of headroom while a wrong max, a dropped term or a misplaced vector (1e-3 and up) fails"
)
TOL_BF16 = 1e-2
TOL_BF16_REASON = (
    "the reference is computed from the bf16 inputs, so only the output rounding counts: "
    "rounding to bf16's 8 significant bits gives a relative error of about 1.6e-3; 1e-2 leaves "
    "6x headroom and still fails a dropped or misplaced vector"
)

SUITE = Suite(
    topic="softmax",
    description=(
        "Softmax over rows: from three passes over memory, to one online pass for the "
        "statistics, to one read and one write with the row held in registers; bf16 I/O; "
        "and the log-sum-exp merge of partial states that attention kernels rely on."
    ),
    benchmarks=[
        Benchmark(
            name="softmax",
            match="0[1-3]_*",
            inputs=_inputs_f32,
            outputs=_out("float32"),
            reference=_reference_f32,
            launch=_launch,
            flops=flops,
            bytes=lambda s: bytes_moved(s, 4),
            work_convention=WORK,
            tolerance=TOL_F32,
            tolerance_reason=TOL_F32_REASON,
            shapes=SHAPES,
            headline=HEADLINE,
            roofline=Roofline(bandwidth="copy"),
            baselines=TORCH_SOFTMAX,
        ),
        Benchmark(
            name="softmax_bf16",
            match="*_bf16",
            inputs=_inputs_bf16,
            outputs=_out("uint16"),
            reference=_reference_bf16,
            launch=_launch,
            flops=flops,
            bytes=lambda s: bytes_moved(s, 2),
            work_convention=WORK,
            tolerance=TOL_BF16,
            tolerance_reason=TOL_BF16_REASON,
            shapes=SHAPES,
            headline=HEADLINE,
            roofline=Roofline(bandwidth="copy"),
            baselines=TORCH_SOFTMAX,
            compare=compare_bf16,
        ),
        Benchmark(
            name="softmax_lse_merge",
            match="*_lse_merge",
            inputs=_inputs_f32,
            outputs=_out("float32"),
            reference=_reference_f32,
            launch=_launch,
            flops=flops,
            bytes=lambda s: bytes_moved(s, 4),
            work_convention=WORK,
            tolerance=TOL_F32,
            tolerance_reason=TOL_F32_REASON
            + "; the merge itself is exact up to two more roundings",
            shapes=SHAPES,
            headline=HEADLINE,
            roofline=Roofline(bandwidth="copy"),
            baselines=TORCH_SOFTMAX,
        ),
    ],
)
