"""Block-scaled FP8 GEMM: D = A @ B^T with DeepSeek-V3's fine-grained scales, bf16 out.

A is M x K and B is N x K, both FP8 E4M3 codes stored K-major (row pitch K bytes), as the
fp8 wgmma reads them. Every code is multiplied by a scale to give its value:

- `scale_a`: one fp32 per row of A per 128 k, stored K/128 x M (the 128 scales of a tile's
  rows are contiguous; torch's 1x128 layout, an (M, K/128) tensor of strides (1, M));
- `scale_b`: one fp32 per 128 x 128 block of B, stored N/128 x K/128 (row-major).

The input maker draws A and B from a normal distribution in fp32, then quantises each
block: scale = max |x| / 448 over the block (448 is E4M3's largest value), code = the E4M3
value nearest to x / scale. The reference is the float64 product of the dequantised values
(code x scale), so it measures what the kernel adds: the rounding inside the fp8 tensor cores,
the fp32 promotion, and the final rounding to bf16.

Library candidates, timed in the same run at the same shape and types (e4m3 in, bf16 out):

- `torch._scaled_mm` with the same 1x128 / 128x128 scales (cuBLASLt's block-scaled mode),
  and the same recipe through `torch.nn.functional.scaled_mm` with its ScalingType enums;
  each is checked against the float64 product on a corner before it is timed, so a call
  that misreads the scale layout is recorded as unavailable, never as a time;
- at the shapes marked `cheaper_scales` only: `torch._scaled_mm` with one scale per row of
  A and per column of B (rowwise) and with one scale per tensor. These do less work per
  output (no per-block promotion with changing scales), so they bound from above what a
  block-scaled GEMM can reach; the figure at those shapes is against them, and says so.

A shape's `cheaper_scales` key never changes the work: FLOPs and bytes read m, n and k only.
CuPy and torch are imported inside the functions: this module is imported without a GPU.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

BLOCK = 128  # the recipe's scale block edge
E4M3_MAX = 448.0
HEADLINE: Shape = {"m": 4096, "n": 4096, "k": 4096}
SHAPES: tuple[Shape, ...] = (
    {"m": 2048, "n": 2048, "k": 2048},
    HEADLINE,
    {"m": 8192, "n": 8192, "k": 8192},
    # DeepSeek-V3 layer shapes at 4096 tokens (N, K from its attention and MLP projections)
    {"m": 4096, "n": 7168, "k": 2048},
    {"m": 4096, "n": 7168, "k": 16384},
    # the headline against the cheaper rowwise and per-tensor scaled calls (an upper bound)
    {**HEADLINE, "cheaper_scales": 1},
)
# Checked, never timed: a 2 x 3 tile grid with 5 k blocks (the ring wraps mid-tile); 144
# tiles on 132 SMs (some CTAs take a second tile, so the ring runs across tiles); and an N
# that no tile width above 128 divides (640 = 3 x 192 + 64 = 2 x 256 + 128), so a version
# with wider tiles clips its last tile column and its tiles straddle scale_b blocks.
CHECK_SHAPES: tuple[Shape, ...] = (
    {"m": 256, "n": 384, "k": 640},
    {"m": 1536, "n": 1536, "k": 384},
    {"m": 256, "n": 640, "k": 384},
)

# CUtensorMap enums from cuda.h.
TENSOR_MAP_UINT8 = 0
TENSOR_MAP_INTERLEAVE_NONE = 0
TENSOR_MAP_SWIZZLE_128B = 3
TENSOR_MAP_L2_PROMOTION_256B = 3
TENSOR_MAP_OOB_FILL_NONE = 0

_TOPIC_DIR = Path(__file__).resolve().parent
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
_ENTRY = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__\w+__\s*\([^)]*\)\s*)*(\w+)\s*\(')
_CONSTEXPR = re.compile(r"^\s*constexpr int\s+([A-Z][A-Z0-9_]*)\s*=\s*([^;]+);", re.M)
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
               ast.Div: operator.floordiv, ast.FloorDiv: operator.floordiv}


def _evaluate(node: ast.expr, names: dict[str, int]) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        return int(_ARITHMETIC[type(node.op)](_evaluate(node.left, names),
                                              _evaluate(node.right, names)))
    raise ValueError(f"not integer arithmetic: {ast.dump(node)}")


def with_includes(source: str) -> str:
    """The source with each `#include "file"` of this folder replaced by that file's text,
    recursively: a version that compiles another's source with a `#define` (03 is 01 with
    the turn code switched on) states its geometry and entry through the file it includes."""
    return _INCLUDE.sub(
        lambda m: with_includes((_TOPIC_DIR / m[1]).read_text(encoding="utf-8")), source
    )


def entry_of(stem: str, source: str) -> str:
    """The name of the version's kernel, read from its expanded source (one entry a file)."""
    names = _ENTRY.findall(source)
    if len(names) != 1:
        raise ValueError(f'fp8gemm/{stem}: expected one extern "C" kernel, found {names}')
    return names[0]


def source_constants(source: str) -> dict[str, int]:
    """The `constexpr int NAME = expr;` constants of a .cu file that are plain arithmetic."""
    values: dict[str, int] = {}
    for name, expr in _CONSTEXPR.findall(re.sub(r"//[^\n]*", "", source)):
        try:
            values[name] = _evaluate(ast.parse(expr.strip(), mode="eval").body, values)
        except (SyntaxError, KeyError, ValueError, ZeroDivisionError):
            continue
    return values


@dataclass(frozen=True)
class Geometry:
    """A version's launch, read from its own constants: tile BM x BN, k per stage BK,
    THREADS a block, SMEM_BYTES of dynamic shared memory, CLUSTER CTAs a cluster (1 if not
    stated; a cluster's CTAs take tile rows 2i and 2i + 1 and each loads 1/CLUSTER of the
    shared B tile), RAGGED_N 1 if the kernel clips a last tile column that N does not fill
    (N then need only be a multiple of the 128-wide scale block); one block per SM,
    persistent."""

    entry: str
    bm: int
    bn: int
    bk: int
    threads: int
    smem: int
    cluster: int = 1
    ragged_n: bool = False

    @classmethod
    def of(cls, stem: str, source: str) -> Geometry:
        """From a version's source with its includes expanded."""
        entry = entry_of(stem, source)
        c = source_constants(source)
        missing = [k for k in ("BM", "BN", "BK", "THREADS", "SMEM_BYTES") if k not in c]
        if missing:
            raise ValueError(f"{entry}: the source does not define {missing}")
        return cls(entry, c["BM"], c["BN"], c["BK"], c["THREADS"], c["SMEM_BYTES"],
                   c.get("CLUSTER", 1), bool(c.get("RAGGED_N", 0)))

    def problems(self, shape: Shape) -> list[str]:
        """Why the kernel would compute a wrong answer at this shape (its constraints)."""
        out = []
        n_step = BLOCK if self.ragged_n else self.bn
        for dim, q in (("m", self.bm * self.cluster), ("n", n_step), ("k", self.bk)):
            if shape[dim] % q:
                out.append(f"{dim} = {shape[dim]} is not a multiple of {q}")
        return out

    def grid(self, shape: Shape, sms: int, clusters_at_once: int | None = None) -> tuple[int]:
        """Persistent: one CTA per SM, or for clusters as many as the GPU holds at once
        (`clusters_at_once`, the driver's count): not every pair of SMs can host a cluster,
        and a cluster left over would start only after another finished its whole tile
        list, doubling the time."""
        tiles = (shape["m"] // self.bm) * -(-shape["n"] // self.bn)
        ctas = sms if clusters_at_once is None else min(sms, clusters_at_once * self.cluster)
        return (min(tiles, ctas) // self.cluster * self.cluster,)

    @property
    def b_box_rows(self) -> int:
        """Rows of B one CTA loads per stage: its share of the tile the cluster shares."""
        return self.bn // self.cluster


_SOURCES = {
    path.stem: path.read_text(encoding="utf-8")
    for path in sorted(_TOPIC_DIR.glob("[0-9][0-9]_*.cu"))
}
GEOMETRY = {stem: Geometry.of(stem, with_includes(text)) for stem, text in _SOURCES.items()}
# Versions that compile another's source with a `#define` (03 is 01 with the turn code
# switched on, 04 is 02 with it): NVRTC needs this folder on the include path for them.
INCLUDERS = tuple(stem for stem, text in _SOURCES.items() if _INCLUDE.search(text))


# --- work model -----------------------------------------------------------------------------


def flops(shape: Shape) -> float:
    return 2.0 * shape["m"] * shape["n"] * shape["k"]


def min_bytes(shape: Shape) -> float:
    """A and B codes once, their scales once, D in bf16 once."""
    m, n, k = shape["m"], shape["n"], shape["k"]
    scales = (m * (k // BLOCK) + (n // BLOCK) * (k // BLOCK)) * 4
    return float(m * k + n * k + scales + m * n * 2)


# --- E4M3 and quantisation ------------------------------------------------------------------


def e4m3_values() -> np.ndarray:
    """float64 value of every E4M3 byte (sign, 4 exponent bits of bias 7, 3 mantissa bits).

    Exponent field 0 is subnormal (m/8 * 2^-6); 0x7F and 0xFF are NaN; there is no infinity,
    so the largest value is 1.75 * 2^8 = 448.
    """
    codes = np.arange(256)
    exponent = (codes >> 3) & 0xF
    mantissa = (codes & 7).astype(np.float64)
    magnitude = np.where(
        exponent == 0,
        mantissa / 8.0 * 2.0**-6,
        (1.0 + mantissa / 8.0) * np.exp2(exponent.astype(np.float64) - 7.0),
    )
    values = np.where(codes & 0x80, -magnitude, magnitude)
    values[[0x7F, 0xFF]] = np.nan
    return values


def encode_e4m3(v: Any, xp: Any) -> Any:
    """Finite values with |v| <= 448 -> the byte of the nearest E4M3 value (uint8)."""
    positive = xp.asarray(e4m3_values()[:0x7F].astype(np.float32))  # codes 0..126, ascending
    midpoints = (positive[1:] + positive[:-1]) * np.float32(0.5)
    code = xp.searchsorted(midpoints, xp.abs(v).astype(xp.float32)).astype(xp.uint8)
    sign = (v < 0).astype(xp.uint8) << np.uint8(7)
    return (code | sign).astype(xp.uint8)


def quantise_rows(x: Any, xp: Any) -> tuple[Any, Any]:
    """(R, K) fp32 -> codes (R, K) and scales (K/128, R): one scale per row per 128 k."""
    r, k = x.shape
    blocks = x.reshape(r, k // BLOCK, BLOCK)
    scale = xp.maximum(xp.abs(blocks).max(axis=2), np.float32(1e-30)) / np.float32(E4M3_MAX)
    codes = encode_e4m3(blocks / scale[:, :, None], xp).reshape(r, k)
    return codes, xp.ascontiguousarray(scale.T.astype(xp.float32))


def quantise_blocks(x: Any, xp: Any) -> tuple[Any, Any]:
    """(R, K) fp32 -> codes (R, K) and scales (R/128, K/128): one scale per 128 x 128 block."""
    r, k = x.shape
    blocks = x.reshape(r // BLOCK, BLOCK, k // BLOCK, BLOCK)
    scale = xp.maximum(xp.abs(blocks).max(axis=(1, 3)), np.float32(1e-30)) / np.float32(E4M3_MAX)
    codes = encode_e4m3(blocks / scale[:, None, :, None], xp).reshape(r, k)
    return codes, xp.ascontiguousarray(scale.astype(xp.float32))


def dequantise_rows(codes: Any, scale: Any, xp: Any) -> Any:
    """codes (R, K) and scales (K/128, R) -> float64 values (R, K). Accepts the float64
    copies the harness hands to `reference` (codes as whole numbers 0..255)."""
    table = xp.asarray(e4m3_values())
    values = table[codes.astype(xp.int64)]
    return values * xp.repeat(scale.T.astype(xp.float64), BLOCK, axis=1)


def dequantise_blocks(codes: Any, scale: Any, xp: Any) -> Any:
    """codes (R, K) and scales (R/128, K/128) -> float64 values (R, K)."""
    table = xp.asarray(e4m3_values())
    values = table[codes.astype(xp.int64)]
    wide = xp.repeat(xp.repeat(scale.astype(xp.float64), BLOCK, axis=0), BLOCK, axis=1)
    return values * wide


def _inputs(shape: Shape, rng: Any) -> Arrays:
    import cupy

    m, n, k = shape["m"], shape["n"], shape["k"]
    a, scale_a = quantise_rows(rng.standard_normal((m, k), dtype=np.float32), cupy)
    b, scale_b = quantise_blocks(rng.standard_normal((n, k), dtype=np.float32), cupy)
    return {"a": a, "b": b, "scale_a": scale_a, "scale_b": scale_b}


def _reference(inputs64: Arrays, shape: Shape) -> Arrays:
    import cupy

    a = dequantise_rows(inputs64["a"], inputs64["scale_a"], cupy)
    b = dequantise_blocks(inputs64["b"], inputs64["scale_b"], cupy)
    return {"d": a @ b.T}


# --- launching ------------------------------------------------------------------------------

_KERNELS: dict[tuple[int, str], tuple[Any, Any, int | None]] = {}
_TENSOR_MAPS: dict[tuple[int, int, int, int], tuple[Any, Any]] = {}


def _libcuda() -> Any:
    import ctypes

    lib = ctypes.CDLL("libcuda.so.1")
    fn = lib.cuTensorMapEncodeTiled
    fn.restype = ctypes.c_int
    # (CUtensorMap*, dtype, rank, address, dims, byte strides, box, element strides,
    #  interleave, swizzle, L2 promotion, out-of-bounds fill), as in cuda.h.
    u64p, u32p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
    enums = [ctypes.c_int] * 4
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p]
    fn.argtypes = [*fn.argtypes, u64p, u64p, u32p, u32p, *enums]
    return lib


def tensor_map_u8(address: int, inner: int, outer: int, box_inner: int, box_outer: int) -> Any:
    """A CUtensorMap for a row-major byte matrix (outer rows of inner bytes), loaded in boxes
    of box_outer rows x box_inner bytes with the 128-byte swizzle; 128 raw bytes, 64-byte
    aligned, in a NumPy array that CuPy passes by value (the __grid_constant__ parameter)."""
    import ctypes

    holder = np.zeros(128 + 64, dtype=np.uint8)
    start = (-holder.ctypes.data) % 64
    tmap = holder[start : start + 128].view(np.dtype((np.void, 128)))
    c_u64, c_u32 = ctypes.c_uint64, ctypes.c_uint32
    rc = _libcuda().cuTensorMapEncodeTiled(
        tmap.ctypes.data,
        TENSOR_MAP_UINT8,
        2,
        address,
        (c_u64 * 2)(inner, outer),
        (c_u64 * 1)(inner),
        (c_u32 * 2)(box_inner, box_outer),
        (c_u32 * 2)(1, 1),
        TENSOR_MAP_INTERLEAVE_NONE,
        TENSOR_MAP_SWIZZLE_128B,
        TENSOR_MAP_L2_PROMOTION_256B,
        TENSOR_MAP_OOB_FILL_NONE,
    )
    if rc != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed with CUresult {rc}")
    return tmap


def _tensor_maps(a: Any, b: Any, g: Geometry, shape: Shape) -> tuple[Any, Any]:
    m, n, k = shape["m"], shape["n"], shape["k"]
    key = (a.data.ptr, b.data.ptr, m * 1_000_003 + n, k * 1_000_003 + g.b_box_rows)
    maps = _TENSOR_MAPS.get(key)
    if maps is None:
        if len(_TENSOR_MAPS) > 16:
            _TENSOR_MAPS.clear()
        maps = (
            tensor_map_u8(a.data.ptr, inner=k, outer=m, box_inner=g.bk, box_outer=g.bm),
            tensor_map_u8(b.data.ptr, inner=k, outer=n, box_inner=g.bk, box_outer=g.b_box_rows),
        )
        _TENSOR_MAPS[key] = maps
    return maps


def launch(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import cupy

    g = GEOMETRY[version.stem]
    problems = g.problems(shape)
    if problems:
        raise ValueError(f"{version.id}: {'; '.join(problems)}")
    key = (id(module), version.stem)
    prepared = _KERNELS.get(key)
    if prepared is None:
        kernel = module.get_function(g.entry)
        kernel.max_dynamic_shared_size_bytes = g.smem
        clusters = None
        if g.cluster > 1:
            clusters = kit.max_active_clusters(kernel, g.cluster, g.threads, g.smem)
        # the module is held so that id(module) stays unique while cached
        prepared = _KERNELS[key] = (module, kernel, clusters)
    _, kernel, clusters = prepared
    tmap_a, tmap_b = _tensor_maps(arrays["a"], arrays["b"], g, shape)
    sms = int(cupy.cuda.Device().attributes["MultiProcessorCount"])
    dims = (np.int32(shape["m"]), np.int32(shape["n"]), np.int32(shape["k"]))
    args = (tmap_a, tmap_b, arrays["scale_a"], arrays["scale_b"], arrays["d"], *dims)
    kernel(g.grid(shape, sms, clusters), (g.threads,), args, shared_mem=g.smem)


# --- library candidates ---------------------------------------------------------------------


def _operands(arrays: Arrays) -> tuple[Any, Any, Any, Any]:
    """A (M, K) and B^T (K, N, column-major) as float8_e4m3fn views, and the scales in the
    layouts torch's block-scaled checks ask for: scale_a (M, K/128) of strides (1, M) and
    scale_b (K/128, N/128) of strides (1, K/128), both views of the kernel's own arrays."""
    import torch

    a = kit.torch_view(arrays["a"]).view(torch.float8_e4m3fn)
    b = kit.torch_view(arrays["b"]).view(torch.float8_e4m3fn)
    scale_a = kit.torch_view(arrays["scale_a"]).t()
    scale_b = kit.torch_view(arrays["scale_b"]).t()
    return a, b.t(), scale_a, scale_b


def _check_corner(out: Any, arrays: Arrays, what: str) -> None:
    """A block-scaled candidate against the float64 product on a 256 x 256 corner: a call
    that misreads a scale layout is off by far more than bf16 rounding (4e-3 is ~3x it)."""
    import cupy

    rows = 256
    kit.synchronize()  # the candidate ran on torch's stream; the check reads on CuPy's
    a = dequantise_rows(arrays["a"][:rows], arrays["scale_a"][:, :rows], cupy)
    b = dequantise_blocks(arrays["b"][:rows], arrays["scale_b"][: rows // BLOCK], cupy)
    want = a @ b.T
    got = cupy.asarray(out[:rows, :rows].float().contiguous()).astype(cupy.float64)
    rel = float(cupy.linalg.norm(got - want) / cupy.linalg.norm(want))
    if not rel < 4e-3:
        raise RuntimeError(f"{what}: rel err {rel:.1e} on a 256 x 256 corner; wrong scale layout")


def _blockwise_only(shape: Shape) -> None:
    if shape.get("cheaper_scales"):
        raise ValueError("a block-scaled candidate: timed at the shapes without cheaper_scales")


def _cheaper_only(shape: Shape) -> None:
    if not shape.get("cheaper_scales"):
        raise ValueError("a cheaper-scaled candidate: timed only at the cheaper_scales shapes")


def _scaled_mm_blockwise(arrays: Arrays, shape: Shape) -> Callable[[], None]:
    """torch._scaled_mm with 1x128 scales on A and 128x128 on B (cuBLASLt block scaling)."""
    import torch

    _blockwise_only(shape)
    a, bt, scale_a, scale_b = _operands(arrays)

    def call() -> Any:
        return torch._scaled_mm(a, bt, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)

    kit.synchronize()  # the inputs were written on CuPy's stream
    _check_corner(call(), arrays, "torch._scaled_mm block-scaled")
    return kit.warmed(kit.on_cupy_stream(call))


def _functional_blockwise(arrays: Arrays, shape: Shape) -> Callable[[], None]:
    """torch.nn.functional.scaled_mm with ScalingType.BlockWise1x128 / BlockWise128x128."""
    import torch
    from torch.nn.functional import ScalingType, scaled_mm

    _blockwise_only(shape)
    a, bt, scale_a, scale_b = _operands(arrays)

    def call() -> Any:
        return scaled_mm(
            a, bt, scale_a, ScalingType.BlockWise1x128, scale_b, ScalingType.BlockWise128x128,
            output_dtype=torch.bfloat16,
        )

    kit.synchronize()
    _check_corner(call(), arrays, "F.scaled_mm block-scaled")
    return kit.warmed(kit.on_cupy_stream(call))


def _scaled_mm_rowwise(arrays: Arrays, shape: Shape) -> Callable[[], None]:
    """torch._scaled_mm with one fp32 scale per row of A and per column of B."""
    import torch

    _cheaper_only(shape)
    a, bt, _, _ = _operands(arrays)
    scale_a = torch.ones((shape["m"], 1), device=a.device, dtype=torch.float32)
    scale_b = torch.ones((1, shape["n"]), device=a.device, dtype=torch.float32)
    return kit.warmed(kit.on_cupy_stream(
        lambda: torch._scaled_mm(a, bt, scale_a=scale_a, scale_b=scale_b,
                                 out_dtype=torch.bfloat16)
    ))


def _scaled_mm_tensorwise(arrays: Arrays, shape: Shape) -> Callable[[], None]:
    """torch._scaled_mm with one fp32 scale per tensor."""
    import torch

    _cheaper_only(shape)
    a, bt, _, _ = _operands(arrays)
    one = torch.ones((), device=a.device, dtype=torch.float32)
    return kit.warmed(kit.on_cupy_stream(
        lambda: torch._scaled_mm(a, bt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    ))


BASELINES = (
    LibraryBaseline(name="torch._scaled_mm, 1x128/128x128 block scales", make=_scaled_mm_blockwise),
    LibraryBaseline(name="F.scaled_mm, BlockWise1x128/128x128", make=_functional_blockwise),
    LibraryBaseline(name="torch._scaled_mm, rowwise scales (cheaper)", make=_scaled_mm_rowwise),
    LibraryBaseline(name="torch._scaled_mm, per-tensor scale (cheaper)",
                    make=_scaled_mm_tensorwise),
)

BLOCK_SCALED = Benchmark(
    name="block_scaled",
    match="*",
    inputs=_inputs,
    outputs={"d": OutputSpec(shape=lambda s: (s["m"], s["n"]), dtype="uint16")},
    reference=_reference,
    launch=launch,
    flops=flops,
    bytes=min_bytes,
    work_convention=(
        "2MNK FLOPs; minimum bytes = MK + NK (e4m3 codes) + 4(M K/128 + N/128 K/128) (fp32 "
        "scales) + 2MN (bf16 D): every input read once, D written once"
    ),
    tolerance=3e-3,
    tolerance_reason=(
        "the reference is the exact float64 product of the dequantised inputs, so what remains "
        "is the kernel's own rounding: bf16 output (8 significant bits, at most 2^-8 relative "
        "per element, about 1.6e-3 in the norm for values spread over a binade), the fp8 tensor "
        "cores' short accumulator within each 128-term chunk (about 14 bits, ~1e-4) and the "
        "fp32 promotion (~1e-7); 3e-3 keeps ~1.8x headroom, while a missed promotion (one "
        "scale pair for all K) lands above 3e-2 and one wrong 128 x 128 tile of a 4096 x 4096 "
        "result near 3e-2"
    ),
    shapes=SHAPES,
    headline=HEADLINE,
    roofline=Roofline(bandwidth=None, compute=None),
    baselines=BASELINES,
    compile_options=("--std=c++17", "-arch=sm_90a"),
    version_options={stem: (f"-I{_TOPIC_DIR}",) for stem in INCLUDERS},
    compare=kit.compare_bf16,
    check_shapes=CHECK_SHAPES,
)

SUITE = Suite(
    topic="fp8gemm",
    benchmarks=[BLOCK_SCALED],
    description=(
        "Block-scaled FP8 E4M3 GEMM with DeepSeek-V3's 1x128 / 128x128 fp32 scales and fp32 "
        "promotion, bf16 out, against torch._scaled_mm's block-scaled call in the same run."
    ),
)
