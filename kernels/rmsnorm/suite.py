"""RMSNorm over the last dimension of a row-major (rows, cols) tensor, eps = 1e-5.

y = x / sqrt(mean(x^2) + eps) * gamma. The kernels start from the tuned LayerNorm
(layernorm/07): one read into registers, a persistent grid, gamma held in registers.

- `rmsnorm`: fp32;
- `rmsnorm_bf16`: bf16 x, gamma and y, fp32 inside.

Every shape keeps rows * cols = 2**27 (512 MiB a tensor in fp32).
"""

from __future__ import annotations

import re
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
    resident_grid,
    to_bf16_bits,
    torch_view,
)

EPS = 1e-5
ELEMENTS = 1 << 27
SWEEP_COLS = (1024, 2048, 4096, 8192, 16384)
HEADLINE: dict[str, int] = {"rows": 32768, "cols": 4096}
SHAPES: tuple[dict[str, int], ...] = tuple({"rows": ELEMENTS // c, "cols": c} for c in SWEEP_COLS)
GAMMA_SPREAD = 0.25  # gamma = 1 + 0.25 N(0, 1)
FLOPS_PER_ELEMENT = 4  # fma (sum of squares), two multiplies (output)


class Launch(NamedTuple):
    suffix: str  # appended to the file's name to give the entry point, e.g. "_vpt8"
    block: int  # threads a block
    grid: int | None = None  # blocks; None: as many as are resident at once (persistent kernels)


def row_block(cols: int, per_thread: int, max_threads: int) -> int:
    """Threads for a kernel whose threads each hold `per_thread` values of one row."""
    threads, rest = divmod(cols, per_thread)
    if rest or threads % 32 or not 32 <= threads <= max_threads:
        raise ValueError(
            f"cols={cols} must be a multiple of {per_thread * 32} and give "
            f"32..{max_threads} threads of {per_thread} values; got {cols / per_thread:g}"
        )
    return threads


def persistent(per_vector: int, small_vpt: int, large_vpt: int) -> Callable[[Shape], Launch]:
    """`small_vpt` 16-byte vectors a thread up to 2048 columns (at most 128 threads),
    `large_vpt` above (at most 512 threads)."""

    def plan(shape: Shape) -> Launch:
        cols = shape["cols"]
        vpt, cap = (small_vpt, 128) if cols <= 2048 else (large_vpt, 512)
        return Launch(f"_vpt{vpt}", row_block(cols, per_vector * vpt, cap))

    return plan


# One CTA a row (03_block_row): the file builds several variants `block_row_v<VPT><flags>`, VPT the
# 16-byte vectors a thread, flag h the streaming cache hints (l on the loads only, s the stores), flag o a 32-register cap for
# full occupancy; a suffix `_r<R>` does R rows a CTA. The header names the one the suite measures;
# the rest stay for comparison.
BLOCK_ROW_ENTRIES: tuple[str, ...] = (
    "v4",
    "v4h",
    "v4l",
    "v4s",
    "v4ho",
    "v2h",
    "v2ho",
    "v8h",
    "v1h",
    "v4h_r2",
    "v2h_r2",
    "v2h_r4",
)
VARIANT: dict[str, str] = {}  # stem -> variant, overriding the header (comparisons only)


MEASURED = re.compile(r"^// Measured variant: (\S+)", re.MULTILINE)


def measured_variant(version: Version) -> str:
    """The variant the suite times: VARIANT's entry if one is set (side-by-side comparisons set
    it), else the one the .cu file names in its header ("// Measured variant: NAME"), so that
    choosing another variant changes that version's figures and no other."""
    if version.stem in VARIANT:
        return VARIANT[version.stem]
    m = MEASURED.search(version.source)
    if m is None:
        raise ValueError(f"{version.id}: no '// Measured variant:' line in its header")
    return m[1]


def block_row_variant(variant: str, shape: Shape) -> tuple[str, int, int]:
    """(entry suffix, threads, blocks) of a one-CTA-a-row variant at `shape`: VPT doubles until
    the block is at most 1024 threads; a flag set not built at that VPT falls back to `h` (one
    row a CTA)."""
    m = re.fullmatch(r"v(\d+)([a-z]*)(?:_r(\d+))?", variant)
    if m is None or variant not in BLOCK_ROW_ENTRIES:
        raise ValueError(f"unknown block-row variant {variant!r}")
    vpt, flags, per_cta = int(m[1]), m[2], int(m[3] or 1)
    cols, rows = shape["cols"], shape["rows"]
    while cols // (4 * vpt) > 1024:
        vpt *= 2
    name = f"v{vpt}{flags}" + (f"_r{per_cta}" if per_cta > 1 else "")
    if name not in BLOCK_ROW_ENTRIES:
        name, per_cta = f"v{vpt}h", 1
    if rows % per_cta:
        raise ValueError(f"rows={rows} is not a multiple of the {per_cta} rows a CTA")
    return "_" + name, row_block(cols, 4 * vpt, 1024), rows // per_cta


# One entry per version: how its block follows the shape.
PLANS: dict[str, Callable[[Shape], Launch]] = {
    "01_persistent": persistent(4, 4, 8),
    "02_persistent_bf16": persistent(8, 2, 4),
}
BLOCK_ROW = ("03_block_row",)  # one CTA a row; the variant comes from `measured_variant`


def plan(version: Version, shape: Shape) -> tuple[str, int, int | None]:
    """(entry point, threads a block, blocks or None) of `version` at `shape`: `name_vptK`
    for the persistent `NN_name.cu`, where K is the 16-byte vectors each thread holds;
    `name_vK<flags>` for one CTA a row (see `block_row_variant`)."""
    if version.stem not in PLANS and version.stem not in BLOCK_ROW:
        raise KeyError(f"rmsnorm: no launch plan for {version.stem}; add one to PLANS")
    try:
        if version.stem in BLOCK_ROW:
            suffix, block, blocks = block_row_variant(measured_variant(version), shape)
            grid: int | None = blocks
        else:
            suffix, block, grid = PLANS[version.stem](shape)
    except ValueError as exc:
        raise ValueError(f"{version.id}: {exc}") from exc
    return version.name + suffix, block, grid


def _launch(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    entry, block, grid = plan(version, shape)
    function = kernel(module, entry)
    if grid is None:
        grid = resident_grid(function, block, shape["rows"])
    args = (arrays["x"], arrays["gamma"], arrays["y"])
    scalars = (np.int32(shape["rows"]), np.int32(shape["cols"]), np.float32(EPS))
    function((grid,), (block,), (*args, *scalars))


# --- bf16 carried as uint16 -------------------------------------------------------------


# --- inputs and reference ---------------------------------------------------------------


def _normal(rng: Any, size: tuple[int, ...]) -> Any:
    import cupy

    return cupy.asarray(rng.standard_normal(size, dtype=np.float32))


def _inputs_f32(shape: Shape, rng: Any) -> Arrays:
    rows, cols = shape["rows"], shape["cols"]
    x = _normal(rng, (rows, cols))
    gamma = _normal(rng, (cols,)) * np.float32(GAMMA_SPREAD) + np.float32(1)
    return {"x": x, "gamma": gamma}


def _inputs_bf16(shape: Shape, rng: Any) -> Arrays:
    return {name: to_bf16_bits(a) for name, a in _inputs_f32(shape, rng).items()}


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


def _out(dtype: str) -> dict[str, OutputSpec]:
    return {"y": OutputSpec(shape=lambda s: (s["rows"], s["cols"]), dtype=dtype)}


# --- the library baselines: eager and compiled PyTorch ------------------------------------


def _torch_rms_norm(compiled: bool) -> Callable[[Arrays, Shape], Callable[[], None]]:
    def make(inputs: Arrays, shape: Shape) -> Callable[[], None]:
        import torch.nn.functional as F

        def rms_norm(x: Any, cols: int, gamma: Any) -> Any:
            return F.rms_norm(x, (cols,), weight=gamma, eps=EPS)

        # One compiled function for the run (the first closure: it holds only F); each
        # shape and dtype compiles once, statically, on its first call in `warmed`.
        op = kit.compiled("rmsnorm", rms_norm) if compiled else rms_norm
        x, gamma = torch_view(inputs["x"]), torch_view(inputs["gamma"])
        cols = shape["cols"]
        return kit.warmed(on_cupy_stream(lambda: op(x, cols, gamma)))

    return make


TORCH_RMS_NORM = (
    LibraryBaseline(name="F.rms_norm", make=_torch_rms_norm(compiled=False)),
    LibraryBaseline(name="torch.compile(F.rms_norm)", make=_torch_rms_norm(compiled=True)),
)


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
            match="0[13]_*",
            inputs=_inputs_f32,
            outputs=_out("float32"),
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
            outputs=_out("uint16"),
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
