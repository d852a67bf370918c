"""FlashAttention-3-style forward on Hopper: TMA, wgmma, warp specialisation, ping-pong.

Two benchmarks over the attention topic's prefill inputs, sampled float64 reference,
comparison and SDPA candidates (taken from `kernels/attention/suite.py`, so a figure here and
one there rest on the same arrays and checks): `prefill` measures 01 at every shape;
`prefill_no_pingpong` measures 02 (01 compiled without the turns between its consumer
warpgroups) at the headline only, to show what the ping-pong buys. Two extra shape keys:

- `causal` (0 or 1): 1 masks key j for query i when j > i. The attention suite has no causal
  case, so the causal reference (the same sampled rows, the mask applied in float64) and the
  causal SDPA candidates (`is_causal=True`, every backend) are here;
- `d`: 128 (the headline) or 64 (a separate entry point of the same source).

Shapes: the headline B8 H16 S4096 D128, a sequence-length sweep at B*S = 32768 tokens (S =
1024 ... 8192: the same number of query rows, the work per row growing with S), the causal
mask on the same sweep, and D = 64 at B8 H32 S4096 (the same hidden size 2048), both masks.
`check_shapes`: one small shape of each entry point, checked untimed.

Work model: FLOPs 4*B*H*S^2*D for the full matrix; causal counts only the unmasked pairs,
4*B*H*D*S(S+1)/2, the convention FlashAttention's papers use (about half).

Kernel entry: `fa3_fwd_d<D>[_causal]`, grid (S/128, H, B) of 384 threads; Q, K and V go to the
kernel as TMA tensor maps over the [B*H*S, D] matrix with boxes of 128 rows x 64 columns and
128-byte swizzle (the gemm topic's `tensor_map_2d`); O is written as bf16 pairs.

CuPy, NumPy and PyTorch are imported inside functions only: this module is imported on machines
without a GPU.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
from curriculum.bench.suites import suite_module

HERE = Path(__file__).resolve().parent
ATTENTION = suite_module("attention", __file__)
GEMM = suite_module("gemm", __file__)

BM = 128  # query rows a CTA (two consumer warpgroups of 64); key tiles are also 128
THREADS = 384  # producer warpgroup + two consumer warpgroups
BOX_ROWS, BOX_COLS = 128, 64  # a TMA box: 128 rows x 64 bf16 (128 bytes, the swizzle span)
HEAD_DIMS = (64, 128)
STAGES_DEFINE = re.compile(r"^#define FA3_STAGES_D128 (\d+)", re.MULTILINE)
D64_STAGES = 4

# --- shapes -----------------------------------------------------------------------------

TOKENS = 32768  # B*S of the sweep
SWEEP = (1024, 2048, 4096, 8192)


def _shape(b: int, h: int, s: int, d: int, causal: int) -> dict[str, int]:
    return {"b": b, "h": h, "s": s, "d": d, "causal": causal}


HEADLINE = _shape(8, 16, 4096, 128, 0)
SHAPES: tuple[dict[str, int], ...] = (
    *(_shape(TOKENS // s, 16, s, 128, 0) for s in SWEEP),
    *(_shape(TOKENS // s, 16, s, 128, 1) for s in SWEEP),
    _shape(8, 32, 4096, 64, 0),
    _shape(8, 32, 4096, 64, 1),
)
CHECK_SHAPES: tuple[dict[str, int], ...] = tuple(
    _shape(1, 2, 384, d, c) for d in HEAD_DIMS for c in (0, 1)
)


def problems(shape: Shape) -> list[str]:
    """Why the kernel would refuse `shape`; empty when it fits."""
    out = []
    if shape["d"] not in HEAD_DIMS:
        out.append(f"head dim {shape['d']}: entry points exist for {HEAD_DIMS}")
    if shape["s"] % BM:
        out.append(f"S={shape['s']} is not a multiple of {BM}: full tiles, no tail masking")
    if shape["causal"] not in (0, 1):
        out.append(f"causal={shape['causal']}: 0 or 1")
    if shape["b"] * shape["h"] * shape["s"] >= 2**31:
        out.append("B*H*S rows do not fit the 32-bit TMA row coordinate")
    return out


# --- reference: the attention suite's, with the causal mask ----------------------------------


def causal_attention64(q: Any, k: Any, v: Any, rows: Any) -> Any:
    """softmax(q k^T / sqrt(D) + mask) v in float64, q holding the query rows `rows` (their
    positions in the sequence): key j is masked for the row at position i when j > i."""
    xp = ATTENTION.array_module(q)
    scores = (q @ xp.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
    keys = xp.arange(k.shape[-2])
    scores = xp.where(keys[None, :] > rows[:, None], -xp.inf, scores)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = xp.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v


def reference(inputs64: Arrays, shape: Shape) -> Arrays:
    """The sampled rows of O (the attention suite's sample), one batch at a time."""
    if not shape["causal"]:
        return ATTENTION.prefill_reference(inputs64, shape)
    xp = ATTENTION.array_module(inputs64["q"])
    sample = ATTENTION.sample_rows(shape["s"])
    rows = xp.arange(shape["s"])[sample]
    to64 = ATTENTION.bf16_bits_to_float64
    out = []
    for b in range(shape["b"]):
        q = to64(inputs64["q"][b, :, sample, :])
        out.append(causal_attention64(q, to64(inputs64["k"][b]), to64(inputs64["v"][b]), rows))
    return {"o": xp.stack(out)}


def flops(shape: Shape) -> float:
    """4 B H S^2 D, or 4 B H D S(S+1)/2 with the causal mask (unmasked pairs only)."""
    b, h, s, d = (shape[n] for n in ("b", "h", "s", "d"))
    pairs = s * (s + 1) / 2 if shape["causal"] else s * s
    return 4.0 * b * h * d * pairs


# --- launching ------------------------------------------------------------------------------

_raised: set[int] = set()
_maps: dict[tuple[int, ...], tuple[Any, ...]] = {}


def smem_bytes(d: int, stages_d128: int) -> int:
    """The kernel's Layout<D>::SMEM_BYTES: Q tile, STAGES K and V tiles, mbarriers, slack."""
    tile = (d // BOX_COLS) * BOX_ROWS * BOX_COLS * 2
    stages = stages_d128 if d == 128 else D64_STAGES
    return tile * (1 + 2 * stages) + 8 * (1 + 4 * stages) + 1024


def _tensor_maps(arrays: Arrays, shape: Shape) -> tuple[Any, ...]:
    rows = shape["b"] * shape["h"] * shape["s"]
    ptrs = tuple(arrays[n].data.ptr for n in ("q", "k", "v"))
    key = (*ptrs, rows, shape["d"])
    if key not in _maps:
        if len(_maps) > 16:
            _maps.clear()
        _maps[key] = tuple(
            GEMM.tensor_map_2d(p, inner=shape["d"], outer=rows, box_inner=BOX_COLS,
                               box_outer=BOX_ROWS)
            for p in ptrs
        )  # fmt: skip
    return _maps[key]


def launch(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    found = problems(shape)
    if found:
        raise ValueError(f"{version.id}: " + "; ".join(found))
    b, h, s, d = (shape[n] for n in ("b", "h", "s", "d"))
    m = STAGES_DEFINE.search(version.source)
    if m is None:
        raise ValueError(f"{version.id}: no '#define FA3_STAGES_D128 N' line")
    smem = smem_bytes(d, int(m[1]))
    fn = kit.kernel(module, f"fa3_fwd_d{d}" + ("_causal" if shape["causal"] else ""))
    if id(fn) not in _raised:
        fn.max_dynamic_shared_size_bytes = smem
        _raised.add(id(fn))
    tq, tk, tv = _tensor_maps(arrays, shape)
    fn(
        (s // BM, h, b), (THREADS,),
        (tq, tk, tv, arrays["o"], numpy.int32(s), numpy.float32(ATTENTION.LOG2E / math.sqrt(d))),
        shared_mem=smem,
    )  # fmt: skip


# --- the library: every SDPA backend, with the shape's mask ----------------------------------


def _sdpa(backend: str) -> Callable[[Arrays, Shape], Callable[[], None]]:
    def make(inputs: Arrays, shape: Shape) -> Callable[[], None]:
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        q, k, v = (kit.torch_view(inputs[n]) for n in ("q", "k", "v"))
        if not shape["causal"]:
            return kit.sdpa(backend, q, k, v)
        if (
            backend == "MATH"
            and q.shape[0] * q.shape[1] * q.shape[2] ** 2 > kit.MATH_SDPA_MAX_SCORES
        ):
            raise MemoryError("math SDPA would materialise more scores than the suite allows")
        member = getattr(SDPBackend, backend)

        def op() -> None:
            with sdpa_kernel(member):
                F.scaled_dot_product_attention(q, k, v, is_causal=True)

        return kit.warmed(kit.on_cupy_stream(op))

    return make


SDPA = tuple(LibraryBaseline(name=name, make=_sdpa(backend)) for name, backend in kit.SDPA_BACKENDS)

WORK = (
    "FLOPs 4*B*H*S^2*D (QK^T and PV; softmax not counted), with the causal mask "
    "4*B*H*D*S(S+1)/2 (unmasked pairs only); minimum bytes 4*B*H*S*D*2: bf16 Q, K, V read "
    "once and O written once"
)
TOL_REASON = (
    "as the attention suite's prefill: the reference works on the rounded bf16 inputs in "
    "float64, so what remains is the bf16 rounding of O and of P before the PV product (about "
    "1.6e-3 in all; ex2.approx adds about 1e-7 relative); 1e-2 leaves 6x margin and fails one "
    "128-row block wrong or one 128-key tile dropped; the causal reference masks in float64"
)

PREFILL = Benchmark(
    name="prefill",
    match="01_*",
    inputs=ATTENTION._prefill_inputs,
    outputs={"o": OutputSpec(lambda s: (s["b"], s["h"], s["s"], s["d"]), "uint16")},
    reference=reference,
    launch=launch,
    flops=flops,
    bytes=ATTENTION.prefill_bytes,
    work_convention=WORK,
    tolerance=ATTENTION.PREFILL_TOL,
    tolerance_reason=TOL_REASON,
    shapes=SHAPES,
    headline=HEADLINE,
    roofline=Roofline(bandwidth="copy", compute="gemm_bf16"),
    baselines=SDPA,
    compile_options=("--std=c++17", "-arch=sm_90a"),
    compare=ATTENTION.prefill_compare,
    check_shapes=CHECK_SHAPES,
)

# 02 includes 01's source (hence -I), and is measured at the headline only.
NO_PINGPONG = dataclasses.replace(
    PREFILL,
    name="prefill_no_pingpong",
    match="02_*",
    shapes=(HEADLINE,),
    check_shapes=tuple(s for s in CHECK_SHAPES if s["d"] == 128),
    version_options={"02_no_pingpong": ("-arch=sm_90a", f"-I{HERE}")},
)

SUITE = Suite(
    topic="fa3",
    description=(
        "The attention forward rebuilt for Hopper as FlashAttention-3 does it: TMA loads into a "
        "shared-memory ring fed by a producer warpgroup, wgmma for both products with P from "
        "registers, and two consumer warpgroups taking turns at the tensor cores."
    ),
    benchmarks=[PREFILL, NO_PINGPONG],
)
