"""RMSNorm over the last dimension of a row-major (rows, cols) tensor, eps = 1e-5.

y = x / sqrt(mean(x^2) + eps) * gamma. The kernels start from the tuned LayerNorm
(layernorm/07): one read into registers, a persistent grid, gamma held in registers;
then one CTA a row (03, 04). Launch plans, inputs and the library candidates' shape are
layernorm's (`suite_module("layernorm", __file__)`).

- `rmsnorm`: fp32;
- `rmsnorm_bf16`: bf16 x, gamma and y, fp32 inside.

Every shape keeps rows * cols = 2**27 (512 MiB a tensor in fp32).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from curriculum.bench.api import (
    Arrays,
    Benchmark,
    Roofline,
    Shape,
    Suite,
)
from curriculum.bench.kit import bf16_bits_to_float64, compare_bf16
from curriculum.bench.suites import suite_module

ln = suite_module("layernorm", __file__)

EPS = ln.EPS
ELEMENTS = ln.ELEMENTS
HEADLINE: dict[str, int] = ln.HEADLINE
SHAPES: tuple[dict[str, int], ...] = ln.SWEEP
FLOPS_PER_ELEMENT = 4  # fma (sum of squares), two multiplies (output)

# One entry per fixed version: how its block follows the shape (the grid is sized at launch).
PLANS: dict[str, Callable[[Shape], Any]] = {
    "01_persistent": ln.persistent(4, 4, 8),
    "02_persistent_bf16": ln.persistent(8, 2, 4),
}
# 03 builds layernorm/09's variants (and `v4ho`); 04 only the vectors a thread.
BLOCK_ROW_ENTRIES: tuple[str, ...] = (*ln.BLOCK_ROW_ENTRIES[:4], "v4ho", *ln.BLOCK_ROW_ENTRIES[4:])
LAUNCHES = ln.LaunchPlans(
    "rmsnorm",
    PLANS,
    {"03_block_row": BLOCK_ROW_ENTRIES, "04_full_occupancy": ln.VPT_ENTRIES},
    ("x", "gamma", "y"),
)
plan = LAUNCHES.plan
_launch = LAUNCHES.launch
measured_variant = ln.measured_variant


def block_row_variant(
    variant: str, shape: Shape, entries: tuple[str, ...] = BLOCK_ROW_ENTRIES
) -> tuple[str, int, int]:
    return ln.block_row_variant(variant, shape, entries)


# --- inputs and reference ---------------------------------------------------------------

_inputs_f32 = ln.x_and_gamma
_inputs_bf16 = ln.in_bf16(_inputs_f32)


def rms_norm64(x: Any, gamma: Any) -> Any:
    """Float64 RMSNorm over the last axis."""
    import cupy

    y = x / cupy.sqrt((x * x).mean(axis=1, keepdims=True) + EPS)
    y *= gamma
    return y


def _reference_f32(inputs64: Arrays, shape: Shape) -> Arrays:
    return {"y": rms_norm64(inputs64["x"], inputs64["gamma"])}


def _reference_bf16(inputs64: Arrays, shape: Shape) -> Arrays:
    x, gamma = (bf16_bits_to_float64(inputs64[k]) for k in ("x", "gamma"))
    return {"y": rms_norm64(x, gamma)}


# --- the library baselines: eager and compiled PyTorch ------------------------------------


def _rms_norm() -> Callable[..., Any]:
    import torch.nn.functional as F

    def rms_norm(x: Any, cols: int, gamma: Any) -> Any:
        return F.rms_norm(x, (cols,), weight=gamma, eps=EPS)

    return rms_norm


TORCH_RMS_NORM = ln.torch_candidates("rmsnorm", "F.rms_norm", _rms_norm, ("x", "gamma"))


# --- the work model ---------------------------------------------------------------------


def bytes_moved(shape: Shape, element_bytes: int) -> float:
    """x read once, y written once, gamma read once."""
    rows, cols = shape["rows"], shape["cols"]
    return float((2 * rows * cols + cols) * element_bytes)


def flops(shape: Shape) -> float:
    return float(FLOPS_PER_ELEMENT * shape["rows"] * shape["cols"])


WORK = (
    "bytes: x read once and y written once, plus gamma read once (cols elements, 0.0015% at "
    "32768x4096); FLOPs: 4 an element (fma for the sum of squares, two multiplies for the "
    "output), under 1 FLOP/byte, so the bound is bandwidth"
)

SUITE = Suite(
    topic="rmsnorm",
    description=(
        "RMSNorm: LayerNorm's tuned kernel without the centring or the bias; fp32 and bf16 I/O."
    ),
    benchmarks=[
        Benchmark(
            name="rmsnorm",
            match="0[134]_*",
            inputs=_inputs_f32,
            outputs=ln.out_y("float32"),
            reference=_reference_f32,
            launch=_launch,
            flops=flops,
            bytes=lambda s: bytes_moved(s, 4),
            work_convention=WORK,
            tolerance=1e-5,
            tolerance_reason=(
                "fp32 sum of squares of up to 16384 terms in a tree, no cancellation (every "
                "term is non-negative): expected ||err||/||ref|| near 1e-7; 1e-5 leaves two "
                "orders of headroom and fails a wrong scale or a dropped gamma"
            ),
            shapes=SHAPES,
            headline=HEADLINE,
            roofline=Roofline(bandwidth="copy"),
            baselines=TORCH_RMS_NORM,
        ),
        Benchmark(
            name="rmsnorm_bf16",
            match="*_bf16",
            inputs=_inputs_bf16,
            outputs=ln.out_y("uint16"),
            reference=_reference_bf16,
            launch=_launch,
            flops=flops,
            bytes=lambda s: bytes_moved(s, 2),
            work_convention=WORK,
            tolerance=1e-2,
            tolerance_reason=(
                "the reference is computed from the bf16 inputs, so only the output rounding "
                "counts: rounding to bf16's 8 significant bits gives a relative error near "
                "1.6e-3; 1e-2 leaves 6x headroom and still fails a dropped gamma"
            ),
            shapes=SHAPES,
            headline=HEADLINE,
            roofline=Roofline(bandwidth="copy"),
            baselines=TORCH_RMS_NORM,
            compare=compare_bf16,
        ),
    ],
)
