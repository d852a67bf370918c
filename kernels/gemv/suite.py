"""Decode GEMV: y = x W^T for a batch of 1..16 tokens, W an N x K weight.

One benchmark per weight format, since each reads different bytes:

- `gemv_bf16`: W in bf16 (`01_bf16`);
- `gemv_w4a16`: W as 4-bit integers, 8 to a 32-bit word, one bf16 scale per row and per
  group of 128 along K (`02_w4a16`), the words tiled in the order the kernel streams them
  (`tile_w4a16`: a quantised model is packed offline once, so the layout is free to choose);
- `gemv_fp8`: W in FP8 E4M3, one fp32 scale a row (`03_fp8_e4m3`; `08_ksplit_fp8_e4m3`
  splits K four ways at batch 1);
- `gemv_nvfp4`: W in NVFP4, E2M1 codes two to a byte with one E4M3 scale per 16 values and one
  fp32 tensor scale (`04_nvfp4`), batch 1 only; the format is `curriculum.microscaling`'s.

x and y are bf16 throughout (carried as uint16). Each work model counts the bytes of its own
format (weights, scales, x once, y once); the floor is the same-run `read` ceiling, because
a GEMV writes almost nothing (y is 57 KB at the headline against 0.12-0.47 GB of weights), so
the copy ceiling, which splits the bus between reads and writes, would put the floor above
what the card can read. The library candidates of all three are torch's bf16 F.linear and
torch.matmul on the same (dequantised) weights: the same math with 2x (fp8) or 4x (int4) the
bytes; the faster of the two is the library figure.

The headline is one token through a 70B-class MLP up-projection, K = 8192, N = 28672.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

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

HEADLINE: dict[str, int] = {"batch": 1, "k": 8192, "n": 28672}
SHAPES: tuple[dict[str, int], ...] = (
    HEADLINE,
    {"batch": 4, "k": 8192, "n": 28672},
    {"batch": 16, "k": 8192, "n": 28672},
    {"batch": 1, "k": 4096, "n": 14336},  # an 8B-class up-projection
)
BATCHES = (1, 4, 16)  # the batch sizes each .cu instantiates (entry `<name>_b<batch>`)
ROWS_PER_BLOCK = 32  # 2 warps of 16 rows (a format's batch-1 launch may differ, see Format)
THREADS = 64
GROUP = 128  # int4 values sharing one scale along K
E4M3_MAX = 448.0


class Format(NamedTuple):
    weights: tuple[str, ...]  # input names after x, in kernel argument order
    # K per stage of a row (4 lanes x 2 pieces x values per 16 bytes), times the warps K is split
    # between
    k_multiple: int
    rows_at_batch_1: int = ROWS_PER_BLOCK  # 16: the warps of a block share one tile, K split
    threads_at_batch_1: int = THREADS
    # Batch 1, where the tiles exceed one wave of `wave_blocks_per_sm` blocks an SM: this many
    # blocks an SM lead the grid owning two tiles each (see `batch_1_doubles`); 0: none
    doubles_per_sm: int = 0
    wave_blocks_per_sm: int = 0
    # One CTA an SM for the whole launch, its rows an equal share of N, its ring in dynamic shared
    # memory; the geometry is read off the source's `#define` and `constexpr int` lines (09)
    persistent: bool = False


FORMATS: dict[str, Format] = {
    "01_bf16": Format(("w",), 64),
    # at batch 1 each of the 4 warps of a 16-row tile sums a quarter of K in whole 256-value stages
    "02_w4a16": Format(
        ("wq", "scales"),
        1024,
        rows_at_batch_1=16,
        threads_at_batch_1=128,
        doubles_per_sm=2,  # 1, 1.5, 2, 2.5 and 3 an SM all beat none at the headline; 2 the most
        wave_blocks_per_sm=7,  # 28 warps an SM at 72 registers (02's __launch_bounds__)
    ),
    "03_fp8_e4m3": Format(("w8", "scale"), 128),
    # 02 and 03 with an L2 prefetch ahead of the ring (06 also widens E4M3 with integer operations)
    "05_prefetch_w4a16": Format(
        ("wq", "scales"),
        1024,
        rows_at_batch_1=16,
        threads_at_batch_1=128,
        doubles_per_sm=2,
        wave_blocks_per_sm=7,
    ),
    "06_prefetch_fp8_e4m3": Format(("w8", "scale"), 128),
    # 03 with 02's batch-1 split: a 16-row tile a block, four warps over K (no two-tile blocks)
    "08_ksplit_fp8_e4m3": Format(
        ("w8", "scale"),
        512,
        rows_at_batch_1=16,
        threads_at_batch_1=128,
        wave_blocks_per_sm=7,  # 28 warps an SM at 72 registers (08's __launch_bounds__)
    ),
    # 03's format streamed by bulk copies into one persistent CTA an SM: at batch 1 two whole rows
    # a slot and the mma's diagonal, at batch 4 and 16 16-row tiles over 2048 values of K
    "09_bulk_fp8_e4m3": Format(("w8", "scale"), 512, persistent=True),
    # 02's batch-1 work layout and grid (a 16-row tile, four warps over K, two tiles a block first)
    "04_nvfp4": Format(
        ("wq", "scales", "tscale"),
        1024,
        rows_at_batch_1=16,
        threads_at_batch_1=128,
        doubles_per_sm=2,  # 0 to 3 an SM timed within 1% of each other
        wave_blocks_per_sm=6,  # 24 warps an SM at 80 registers (04's __launch_bounds__)
    ),
}


# 05 and 06 build variants `<name>_b<batch>_<suffix>`; each header names the one the suite
# measures at each batch ("// Measured variants: b1=p4 b4=p0 b16=p0"), the rest stay in the file
# for comparison. VARIANT overrides a header (side-by-side comparisons only).
VARIANTS_BUILT = ("05_prefetch_w4a16", "06_prefetch_fp8_e4m3")
VARIANT: dict[str, dict[int, str]] = {}
MEASURED = re.compile(r"^// Measured variants: (.+)$", re.MULTILINE)


def measured_variant(version: Version, batch: int) -> str:
    """The variant of `version` the suite times at `batch` (VARIANT's, else its header's)."""
    if version.stem in VARIANT:
        return VARIANT[version.stem][batch]
    m = MEASURED.search(version.source)
    if m is None:
        raise ValueError(f"{version.id}: no '// Measured variants:' line in its header")
    chosen = dict(item.split("=") for item in m[1].split())
    return chosen[f"b{batch}"]


GEOMETRY = re.compile(r"^(?:#define (\w+) (\d+)|constexpr int (\w+) = (\d+);)", re.MULTILINE)


def geometry(version: Version) -> dict[str, int]:
    """The integer constants a persistent version's source defines (`#define NAME value` and
    `constexpr int NAME = value;` at the start of a line), so the launcher and the kernel share one
    statement of the ring's shape. Parsed once per source: the launch runs between the timing
    events, and a regex over the whole file at every launch (~0.2 ms of host time) left the GPU
    idle longer than the kernel ran."""
    return _constants(version.source)


@functools.cache
def _constants(source: str) -> dict[str, int]:
    return {(m[1] or m[3]): int(m[2] or m[4]) for m in GEOMETRY.finditer(source)}


def persistent_launch(version: Version, shape: Shape, sm_count: int) -> tuple[int, int, int]:
    """(blocks, threads a block, bytes of dynamic shared memory) of a persistent version (09), or
    ValueError: one CTA an SM, PAIR_WARPS (batch 1) or TILE_WARPS consumer warps and one producer.

    Batch 1: min(MAX_SLOTS, PAIR_RING / 2K) slots of two rows of K, rounded down to a multiple of
    PAIR_WARPS, x as fp16 (2K bytes) and two mbarriers a slot. Batch 4 and 16: TILE_SLOTS slots of 16 rows x PITCH bytes, two mbarriers a
    slot and the consumer warps' sums of two tiles (fp32, 16 rows x batch each)."""
    geo = geometry(version)
    batch, k, n = shape["batch"], shape["k"], shape["n"]
    problems = []
    if batch == 1:
        warps = geo["PAIR_WARPS"]  # each owns slots s = w mod warps: a multiple of warps
        slots = min(geo["MAX_SLOTS"], geo["PAIR_RING"] // (2 * k)) // warps * warps
        threads = (warps + 1) * 32
        smem = slots * 2 * k + 2 * k + 16 * slots
        if slots < warps:
            problems.append(f"k={k} leaves fewer ring slots of two rows than the {warps} warps")
        if n < 2 * sm_count:
            problems.append(f"n={n} gives some CTA fewer than 2 rows")
    else:
        slots = geo["TILE_SLOTS"]
        threads = (geo["TILE_WARPS"] + 1) * 32
        smem = slots * 16 * geo["PITCH"] + 16 * slots + 2 * geo["TILE_WARPS"] * 16 * batch * 4
        if k % geo["TILE_K"]:
            problems.append(f"k={k} is not a multiple of {geo['TILE_K']}")
        if n < 16 * sm_count:
            problems.append(f"n={n} gives some CTA fewer than 16 rows")
    if smem > SMEM_PER_BLOCK:
        problems.append(f"k={k} needs {smem} bytes of shared memory, over {SMEM_PER_BLOCK}")
    if problems:
        raise ValueError(f"{version.id}: " + "; ".join(problems))
    return sm_count, threads, smem


SMEM_PER_BLOCK = 227 * 1024  # an sm_90 block's opt-in maximum of dynamic shared memory


def rows_per_block(stem: str, batch: int) -> int:
    """Rows of W a block covers, for `stem` at `batch`."""
    return FORMATS[stem].rows_at_batch_1 if batch == 1 else ROWS_PER_BLOCK


def threads_per_block(stem: str, batch: int) -> int:
    """Threads a block of `stem` has at `batch`."""
    return FORMATS[stem].threads_at_batch_1 if batch == 1 else THREADS


def batch_1_doubles(fmt: Format, tiles: int, sm_count: int) -> int:
    """Blocks of two tiles that lead a batch-1 grid of `tiles` 16-row tiles.

    Larger blocks first: the block scheduler was seen to start blocks in index order (CUDA does not
    promise it; any order is correct), so the first wave gets the long blocks and the short ones fill
    the slots that empty last. Only the tiles beyond the
    first wave are paired: a grid of one wave or less keeps every block to one tile, since pairing
    there only leaves slots empty.
    """
    beyond = max(0, tiles - fmt.wave_blocks_per_sm * sm_count)
    return min(fmt.doubles_per_sm * sm_count, beyond, tiles // 2)


def plan(version: Version, shape: Shape, sm_count: int) -> tuple[str, int, int]:
    """(entry point, blocks, threads a block) of `version` at `shape` on a GPU of `sm_count` SMs,
    or ValueError."""
    if version.stem not in FORMATS:
        raise KeyError(f"gemv: no format for {version.stem}; add one to FORMATS")
    fmt = FORMATS[version.stem]
    batch, k, n = shape["batch"], shape["k"], shape["n"]
    problems = []
    if batch not in BATCHES:
        problems.append(f"batch={batch} is not one of the instantiated {BATCHES}")
    if k % fmt.k_multiple:
        problems.append(f"k={k} is not a multiple of {fmt.k_multiple}")
    rows = rows_per_block(version.stem, batch)
    if n % rows and not fmt.persistent:
        problems.append(f"n={n} is not a multiple of {rows}")
    if problems:
        raise ValueError(f"{version.id}: " + "; ".join(problems))
    if fmt.persistent:
        blocks, threads, _ = persistent_launch(version, shape, sm_count)
        return f"{version.name}_b{batch}", blocks, threads
    blocks = n // rows
    if batch == 1:
        blocks -= batch_1_doubles(fmt, blocks, sm_count)
    entry = f"{version.name}_b{batch}"
    if version.stem in VARIANTS_BUILT:
        entry += "_" + measured_variant(version, batch)
    return entry, blocks, threads_per_block(version.stem, batch)


_functions: dict[tuple[int, str], tuple[Any, Any]] = {}
_opted_in: dict[int, int] = {}  # id of a kernel in _functions -> dynamic shared memory allowed


def _kernel(module: Any, entry: str) -> Any:
    """The entry point, looked up once per module (kept alive with it, so ids are not reused)."""
    key = (id(module), entry)
    if key not in _functions:
        _functions[key] = (module, module.get_function(entry))
    return _functions[key][1]


def _sms() -> int:
    import cupy

    from curriculum.bench import kit

    return kit.device_limits(cupy.cuda.Device().id)[0]


def _launch(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    entry, blocks, threads = plan(version, shape, _sms())
    weights = [arrays[name] for name in FORMATS[version.stem].weights]
    args = (arrays["x"], *weights, arrays["y"], np.int32(shape["k"]), np.int32(shape["n"]))
    kernel = _kernel(module, entry)
    if FORMATS[version.stem].persistent:
        smem = persistent_launch(version, shape, _sms())[2]
        if _opted_in.get(id(kernel), 0) < smem:  # above 48 KB a kernel must opt in, once
            kernel.max_dynamic_shared_size_bytes = smem
            _opted_in[id(kernel)] = smem
        kernel((blocks,), (threads,), args, shared_mem=smem)
        return
    kernel((blocks,), (threads,), args)


# --- number formats, written against the array API so NumPy (tests) and CuPy share them --------


def to_bf16_bits(a: Any, xp: Any) -> Any:
    """float32 array -> uint16 bf16 bit patterns, rounded to nearest even."""
    u = a.astype(xp.float32).view(xp.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(xp.uint16)


def bf16_bits_to_float64(a: Any, xp: Any) -> Any:
    """bf16 patterns (uint16, or their float64 upcast as whole numbers) as float64 values."""
    bits = a.astype(xp.uint32) << np.uint32(16)
    return bits.view(xp.float32).astype(xp.float64)


def pack_int4(codes: Any, xp: Any) -> Any:
    """(..., K) codes 0..15 -> (..., K/8) uint32 words, in the order 02 unpacks.

    Values 8i..8i+7 go to word i: value 8i + 2j to nibble j (bits 4j..4j+3) and value
    8i + 2j + 1 to nibble j + 4 (bits 16+4j..), so that (word >> 4j) & 0x000F000F holds values
    2j and 2j + 1 in its two 16-bit halves.
    """
    c = codes.astype(xp.uint32).reshape(*codes.shape[:-1], -1, 8)
    word = xp.zeros(c.shape[:-1], dtype=xp.uint32)
    for j in range(4):
        word |= c[..., 2 * j] << (4 * j)
        word |= c[..., 2 * j + 1] << (16 + 4 * j)
    return word


def unpack_int4(words: Any, xp: Any) -> Any:
    """The inverse of `pack_int4`: (..., K/8) words -> (..., K) uint32 codes 0..15."""
    w = words.astype(xp.uint32)
    out = xp.empty((*w.shape, 8), dtype=xp.uint32)
    for j in range(4):
        out[..., 2 * j] = (w >> (4 * j)) & 0xF
        out[..., 2 * j + 1] = (w >> (16 + 4 * j)) & 0xF
    return out.reshape(*w.shape[:-1], -1)


# One warp-stage of 02: 16 rows x 2 pieces x 4 lanes of 16 bytes (4 words), 256 values a row.
TILE_ROWS, TILE_PIECES, TILE_LANES, PIECE_WORDS = 16, 2, 4, 4


def tile_w4a16(words: Any, xp: Any) -> Any:
    """(N, K/8) packed words -> the order 02 streams them: one 2 KB block per warp and stage.

    Block (s, w) holds what warp w (rows 16w..16w+15) reads in stage s (values 256s..256s+255 of
    each row), and the blocks of stage s lie side by side for w = 0..N/16-1, so the whole grid
    reads one contiguous window at a time. Inside a block, uint4 32j + L is what lane L copies
    j-th: j = 2 * piece + half, for row 16w + L/4 + 8 * half and piece 8s + 4 * piece + L % 4.
    """
    n, kw = words.shape
    t = words.reshape(n // TILE_ROWS, 2, 8, kw // 32, TILE_PIECES, TILE_LANES, PIECE_WORDS)
    # axes: warp, half, g, stage, piece, t, word -> stage, warp, piece, half, g, t, word
    return xp.ascontiguousarray(t.transpose(3, 0, 4, 1, 2, 5, 6)).reshape(n, kw)


def untile_w4a16(tiled: Any, xp: Any) -> Any:
    """The inverse of `tile_w4a16`: the (N, K/8) words in row order again."""
    n, kw = tiled.shape
    t = tiled.reshape(kw // 32, n // TILE_ROWS, TILE_PIECES, 2, 8, TILE_LANES, PIECE_WORDS)
    return xp.ascontiguousarray(t.transpose(1, 3, 4, 0, 2, 5, 6)).reshape(n, kw)


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
    """Finite values with |v| <= 448 -> the E4M3 byte of the nearest value (uint8)."""
    positive = xp.asarray(e4m3_values()[:0x7F].astype(np.float32))  # codes 0..126, ascending
    midpoints = (positive[1:] + positive[:-1]) * np.float32(0.5)
    code = xp.searchsorted(midpoints, xp.abs(v).astype(xp.float32)).astype(xp.uint8)
    sign = (v < 0).astype(xp.uint8) << np.uint8(7)
    return (code | sign).astype(xp.uint8)


# --- inputs and the float64 references ------------------------------------------------------


def _x(shape: Shape, rng: Any) -> Any:
    import cupy

    return to_bf16_bits(rng.standard_normal((shape["batch"], shape["k"]), dtype=np.float32), cupy)


def _inputs_bf16(shape: Shape, rng: Any) -> Arrays:
    import cupy

    w = rng.standard_normal((shape["n"], shape["k"]), dtype=np.float32)
    return {"x": _x(shape, rng), "w": to_bf16_bits(w, cupy)}


def _inputs_w4a16(shape: Shape, rng: Any) -> Arrays:
    import cupy

    n, k = shape["n"], shape["k"]
    codes = (rng.random((n, k), dtype=np.float32) * 16).astype(cupy.uint32)  # uniform 0..15
    scales = np.float32(0.01) + np.float32(0.02) * rng.random((n, k // GROUP), dtype=np.float32)
    wq = tile_w4a16(pack_int4(codes, cupy), cupy)
    return {"x": _x(shape, rng), "wq": wq, "scales": to_bf16_bits(scales, cupy)}


def _inputs_fp8(shape: Shape, rng: Any) -> Arrays:
    """Gaussian weights quantised a row at a time: scale = max |w| / 448, codes nearest."""
    import cupy

    w = rng.standard_normal((shape["n"], shape["k"]), dtype=np.float32)
    scale = (cupy.abs(w).max(axis=1) / np.float32(E4M3_MAX)).astype(cupy.float32)
    w /= scale[:, None]
    return {"x": _x(shape, rng), "w8": encode_e4m3(w, cupy), "scale": scale}


def _weights_bf16(inputs: Arrays) -> Any:
    import cupy

    return bf16_bits_to_float64(inputs["w"], cupy)


def _weights_w4a16(inputs: Arrays) -> Any:
    """(q - 8) * s as float64, from the packed words and the bf16 scales."""
    import cupy

    codes = unpack_int4(untile_w4a16(inputs["wq"], cupy), cupy).astype(cupy.float64) - 8.0
    n, k = codes.shape
    scales = bf16_bits_to_float64(inputs["scales"], cupy)
    return (codes.reshape(n, k // GROUP, GROUP) * scales[:, :, None]).reshape(n, k)


def _weights_fp8(inputs: Arrays) -> Any:
    import cupy

    table = cupy.asarray(e4m3_values())
    return table[inputs["w8"].astype(cupy.int64)] * inputs["scale"].astype(cupy.float64)[:, None]


WeightDecoder = Callable[[Arrays], Any]


def _reference(decode: WeightDecoder) -> Callable[[Arrays, Shape], Arrays]:
    """y = x W^T in float64 from the upcast inputs (each format's values, decoded exactly)."""

    def reference(inputs64: Arrays, shape: Shape) -> Arrays:
        import cupy

        x = bf16_bits_to_float64(inputs64["x"], cupy)
        return {"y": x @ decode(inputs64).T}

    return reference


def _compare_bf16(outputs: Arrays) -> Arrays:
    import cupy

    return {name: bf16_bits_to_float64(a, cupy) for name, a in outputs.items()}


# --- the library baselines: torch's bf16 F.linear and matmul on the same weights -----------


def torch_view(a: Any) -> Any:
    """A zero-copy torch tensor over a CuPy array; uint16 arrays are read as bfloat16."""
    import cupy
    import torch

    if a.dtype == cupy.uint16:
        return torch.as_tensor(a.view(cupy.int16), device="cuda").view(torch.bfloat16)
    return torch.as_tensor(a, device="cuda")


def on_cupy_stream(op: Callable[[], object]) -> Callable[[], None]:
    """`op` enqueued on the CuPy stream that is current when this is called (the timed one)."""
    import cupy
    import torch

    ptr = cupy.cuda.get_current_stream().ptr

    def run_here() -> None:
        op()

    if torch.cuda.current_stream().cuda_stream == ptr:  # both on the default stream already
        return run_here
    stream = torch.cuda.ExternalStream(ptr)

    def run_on_stream() -> None:
        with torch.cuda.stream(stream):
            op()

    return run_on_stream


def _linear_baseline(
    decode: WeightDecoder | None, op: str = "linear"
) -> Callable[[Arrays, Shape], Callable[[], None]]:
    """F.linear(x, W) or torch.matmul(x, W^T) in bf16; W is the bf16 input itself, or the
    quantised weights decoded and rounded to bf16 once, before timing (a model served in
    bf16 holds them so)."""

    def make(arrays: Arrays, shape: Shape) -> Callable[[], None]:
        import cupy
        import torch
        import torch.nn.functional as F

        w_bits = arrays["w"] if decode is None else to_bf16_bits(decode(arrays), cupy)
        x, w = torch_view(arrays["x"]), torch_view(w_bits)
        if op == "linear":
            run = on_cupy_stream(lambda: F.linear(x, w))
        else:
            wt = w.t()
            run = on_cupy_stream(lambda: torch.matmul(x, wt))
        run()
        cupy.cuda.runtime.deviceSynchronize()
        return run

    return make


def _baselines(decode: WeightDecoder | None) -> tuple[LibraryBaseline, ...]:
    """F.linear and torch.matmul on bf16 weights (the dequantised ones for W4A16 and FP8:
    the same math with 4x or 2x the weight bytes)."""
    suffix = "" if decode is None else " (bf16 weights)"
    return (
        LibraryBaseline(name="F.linear" + suffix, make=_linear_baseline(decode, "linear")),
        LibraryBaseline(name="torch.matmul" + suffix, make=_linear_baseline(decode, "matmul")),
    )


# --- the work model -----------------------------------------------------------------------


def flops(shape: Shape) -> float:
    return float(2 * shape["batch"] * shape["n"] * shape["k"])


def _activation_bytes(shape: Shape) -> int:
    return 2 * shape["batch"] * (shape["k"] + shape["n"])  # x read once, y written once, bf16


def bytes_bf16(shape: Shape) -> float:
    return float(2 * shape["n"] * shape["k"] + _activation_bytes(shape))


def bytes_w4a16(shape: Shape) -> float:
    n, k = shape["n"], shape["k"]
    return float(n * k // 2 + 2 * n * (k // GROUP) + _activation_bytes(shape))


def bytes_fp8(shape: Shape) -> float:
    n, k = shape["n"], shape["k"]
    return float(n * k + 4 * n + _activation_bytes(shape))


WORK = (
    "FLOPs: 2 * batch * N * K (dequantisation not counted); bytes: the weights in the "
    "benchmark's own format read once ({weights}), x read once and y written once in bf16; "
    "about 2 * batch / {per_weight} FLOP a byte, so the bound is bandwidth at every batch here"
)

TOLERANCE = 1e-2
TOLERANCE_REASON = (
    "the reference is computed in float64 from the exact values the kernel reads (bf16 x, the "
    "format's decoded weights), and the kernel accumulates in fp32, so the error is y's rounding "
    "to bf16, about 1.6e-3 relative; 1e-2 leaves 6x headroom and fails a misplaced piece or a "
    "wrong scale, which move the result by O(1)"
)


def _benchmark(
    name: str,
    match: str,
    inputs: Callable[[Shape, Any], Arrays],
    decode: WeightDecoder,
    nbytes: Callable[[Shape], float],
    weights: str,
    per_weight: str,
    baseline_decode: WeightDecoder | None,
    compile_options: Sequence[str] = (),
) -> Benchmark:
    return Benchmark(
        name=name,
        match=match,
        inputs=inputs,
        outputs={"y": OutputSpec(shape=lambda s: (s["batch"], s["n"]), dtype="uint16")},
        reference=_reference(decode),
        launch=_launch,
        flops=flops,
        bytes=nbytes,
        work_convention=WORK.format(weights=weights, per_weight=per_weight),
        tolerance=TOLERANCE,
        tolerance_reason=TOLERANCE_REASON,
        shapes=SHAPES,
        headline=HEADLINE,
        roofline=Roofline(bandwidth="read"),
        baselines=_baselines(baseline_decode),
        compile_options=("--std=c++17", "-arch=sm_90", *compile_options),
        compare=_compare_bf16,
    )


def toolkit_include() -> tuple[str, ...]:
    """`-I` for a folder holding cuda_fp8.h, which 03 includes and NVRTC does not carry:
    the CUDA toolkit's, else the one pip's NVIDIA runtime wheels install (found by path, so
    importing the suite needs no GPU); none found gives no option and 03 fails to compile."""
    bases = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    candidates = [Path(b) / "include" for b in bases if b]
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        candidates += sorted(Path(root).glob("*/include"))
    for folder in candidates:
        if (folder / "cuda_fp8.h").is_file():
            return (f"-I{folder}",)
    return ()


# --- NVFP4 (04): the format's logic (rounding, codes, packing, decoding) is
# curriculum.microscaling's, the one that computes the quantisation-error artifact; here only the
# layouts 04 streams ---------------------------------------------------------------------------

NVFP4_SHAPES = tuple(s for s in SHAPES if s["batch"] == 1)  # 04 instantiates batch 1 only


def swizzle_nvfp4_scales(scale_codes: Any, xp: Any) -> Any:
    """(N, K/16) E4M3 bytes -> (N, K/64) uint32 words in the order 04 loads them.

    Within each stage of 256 values (16 scale bytes a row), the byte of block h of piece 4p + t
    (stage-relative block 2 * (4p + t) + h) moves to byte 4t + 2p + h, so lane t's four are one
    word: pieces 0 and 1 of the stage, two blocks each.
    """
    n, blocks = scale_codes.shape
    s = scale_codes.astype(xp.uint8).reshape(n, blocks // 16, 2, 4, 2).transpose(0, 1, 3, 2, 4)
    return xp.ascontiguousarray(s).reshape(n, blocks).view(xp.uint32)


def unswizzle_nvfp4_scales(words: Any, xp: Any) -> Any:
    """The inverse of `swizzle_nvfp4_scales` (also from the float64 upcast): (N, K/16) bytes."""
    w = xp.ascontiguousarray(words.astype(xp.uint32))
    n = w.shape[0]
    s = w.view(xp.uint8).reshape(n, -1, 4, 2, 2).transpose(0, 1, 3, 2, 4)
    return xp.ascontiguousarray(s).reshape(n, -1)


def _inputs_nvfp4(shape: Shape, rng: Any) -> Arrays:
    """Gaussian weights quantised by `microscaling.nvfp4_encode`, packed and tiled for 04."""
    import cupy

    from curriculum.microscaling import nvfp4_encode, pack_e2m1

    w = rng.standard_normal((shape["n"], shape["k"]), dtype=np.float32)
    codes, scale_codes, tensor_scale = nvfp4_encode(w, cupy)
    del w
    return {
        "x": _x(shape, rng),
        "wq": tile_w4a16(pack_e2m1(codes, cupy), cupy),
        "scales": swizzle_nvfp4_scales(scale_codes, cupy),
        "tscale": cupy.full((1,), tensor_scale, dtype=cupy.float32),
    }


def _weights_nvfp4(inputs: Arrays) -> Any:
    """e2m1 x E4M3 block scale x tensor scale as float64, from the stored codes and bytes."""
    import cupy

    from curriculum.microscaling import nvfp4_decode, unpack_e2m1

    codes = unpack_e2m1(untile_w4a16(inputs["wq"], cupy), cupy)
    scale_codes = unswizzle_nvfp4_scales(inputs["scales"], cupy)
    return nvfp4_decode(codes, scale_codes, float(inputs["tscale"][0]), cupy)


def bytes_nvfp4(shape: Shape) -> float:
    n, k = shape["n"], shape["k"]
    return float(n * k // 2 + n * (k // 16) + 4 + _activation_bytes(shape))


SUITE = Suite(
    topic="gemv",
    description=(
        "Decode GEMV y = x W^T, batch 1 to 16, the weights streamed once through the tensor "
        "cores: bf16 weights, then W4A16 (int4 with a bf16 scale per 128 values, dequantised "
        "in registers), then FP8 E4M3 with a scale a row, then NVFP4 (E2M1 with an E4M3 "
        "scale per 16 values) at batch 1."
    ),
    benchmarks=[
        _benchmark(
            name="gemv_bf16",
            match="*_bf16",
            inputs=_inputs_bf16,
            decode=_weights_bf16,
            nbytes=bytes_bf16,
            weights="2NK",
            per_weight="2",
            baseline_decode=None,
        ),
        _benchmark(
            name="gemv_w4a16",
            match="*_w4a16",
            inputs=_inputs_w4a16,
            decode=_weights_w4a16,
            nbytes=bytes_w4a16,
            weights="NK/2 packed + 2NK/128 of bf16 scales",
            per_weight="0.52",
            baseline_decode=_weights_w4a16,
        ),
        _benchmark(
            name="gemv_fp8",
            match="*_fp8_e4m3",
            inputs=_inputs_fp8,
            decode=_weights_fp8,
            nbytes=bytes_fp8,
            weights="NK + 4N of fp32 row scales",
            per_weight="1",
            baseline_decode=_weights_fp8,
            compile_options=toolkit_include(),
        ),
        replace(
            _benchmark(
                name="gemv_nvfp4",
                match="*_nvfp4",
                inputs=_inputs_nvfp4,
                decode=_weights_nvfp4,
                nbytes=bytes_nvfp4,
                weights="NK/2 of E2M1 codes + NK/16 E4M3 block scales + 4 B of tensor scale",
                per_weight="0.56",
                baseline_decode=_weights_nvfp4,
            ),
            shapes=NVFP4_SHAPES,
        ),
    ],
)
