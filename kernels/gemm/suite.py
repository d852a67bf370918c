"""GEMM ladder: C = A @ B, row-major, from a naive loop to Hopper's wgmma.

Three benchmarks share the folder:

- `sgemm` (versions 01-06, 08, 09): A, B and C in fp32, FMA units only,
  measured against cuBLAS SGEMM (cupy.matmul) and torch.matmul, TF32 off;
- `sgemm_tiles` (version 07): the same operation, inputs and baseline, with
  07's tile-shape sweep kept as cases. Besides the square sizes (the default
  tile), it declares one shape per candidate of `AUTOTUNE_CANDIDATES` at
  4096^3, whose extra keys bm, bn, bk, tm, tn name the tile shape; the
  launcher compiles 07 with that candidate's -D options, so each candidate is
  checked, timed and recorded like any other case;
- `bf16` (versions 10-12): A and B in bf16, products accumulated in fp32, C
  in fp32, on the tensor cores, measured against cuBLAS gemmEx with the same
  types and torch.matmul (whose C is bf16); the faster is the library figure.

bf16 has no NumPy dtype, so bf16 matrices travel as uint16 arrays holding the
bit patterns (rounded to nearest even from float32 by the input maker); the
kernels take them as `__nv_bfloat16*` or `unsigned short*`.

Every version names one kernel entry and its launch geometry in `GEOMETRY`,
keyed by file stem; 10 and 11 state theirs in their own constants (BM, BN,
BK, THREADS, SMEM_BYTES), which the suite reads from the source it launches. The size multiples there mirror the `static_assert`s and
full-tile assumptions in each .cu file; the tests check that every swept shape
satisfies them. `07_autotuned` takes its tile shape from -D options: the
candidates a sweep may try are `AUTOTUNE_CANDIDATES`, the default is
`AUTOTUNE_DEFAULT`, and the launcher reads the shape the module was compiled
with back out of the module, so any candidate launches correctly.
A shape's extra keys never change the work model: FLOPs and bytes read m, n
and k only.

CuPy (and NumPy) are imported inside functions only: this module is imported
on machines without a GPU.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import operator
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
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

SIZES = (256, 512, 1024, 2048, 4096, 8192)
SHAPES: tuple[Shape, ...] = tuple({"m": s, "n": s, "k": s} for s in SIZES)
HEADLINE: Shape = {"m": 4096, "n": 4096, "k": 4096}

# cudaDataType values from CUDA's library_types.h (a stable ABI).
CUDA_R_32F = 0
CUDA_R_16BF = 14
# CUtensorMap enums from cuda.h.
TENSOR_MAP_BFLOAT16 = 9
TENSOR_MAP_INTERLEAVE_NONE = 0
TENSOR_MAP_SWIZZLE_128B = 3
TENSOR_MAP_L2_PROMOTION_256B = 3
TENSOR_MAP_OOB_FILL_NONE = 0


@dataclass(frozen=True)
class Geometry:
    """How one version is launched, and which sizes it accepts.

    `tile` is the (rows, columns) of C one block computes; the grid covers C
    with blocks along x = columns and y = rows, unless `rows_on_x` (version 01
    puts rows on x on purpose). `multiple` is (M, N, K) divisors every shape
    must respect: the kernels assume full tiles and do not mask edges.
    """

    entry: str
    tile: tuple[int, int]
    block: tuple[int, ...]
    multiple: tuple[int, int, int]
    dynamic_smem: int = 0
    rows_on_x: bool = False
    persistent: bool = False  # one block per SM, each walking the tile list

    def grid(self, m: int, n: int, sms: int = 0) -> tuple[int, ...]:
        rows = -(-m // self.tile[0])
        cols = -(-n // self.tile[1])
        if self.persistent:
            if sms < 1:
                raise ValueError(f"{self.entry}: a persistent grid needs the SM count")
            return (min(rows * cols, sms),)
        return (rows, cols) if self.rows_on_x else (cols, rows)

    def accepts(self, shape: Shape) -> bool:
        return all(shape[d] % q == 0 for d, q in zip(("m", "n", "k"), self.multiple, strict=True))


@dataclass(frozen=True)
class TileConfig:
    """One tile shape of 07_autotuned: block tile BM x BN, K step BK, TM x TN per thread."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    @property
    def label(self) -> str:
        return f"bm{self.bm}_bn{self.bn}_bk{self.bk}_tm{self.tm}_tn{self.tn}"

    def options(self) -> tuple[str, ...]:
        """The NVRTC -D options that compile 07_autotuned.cu with this shape."""
        names = ("BM", "BN", "BK", "TM", "TN")
        return tuple(f"-D{k}={v}" for k, v in zip(names, self.shape(), strict=True))

    def shape(self) -> tuple[int, int, int, int, int]:
        return (self.bm, self.bn, self.bk, self.tm, self.tn)

    def problems(self) -> list[str]:
        """Why 07_autotuned.cu would refuse this shape: its static_asserts, mirrored."""
        out = []
        if self.bm % self.tm or self.bn % self.tn:
            out.append("thread tiles must cover the block tile exactly")
            return out
        t = self.threads
        if not 32 <= t <= 1024:
            out.append(f"{t} threads: between one warp and 1024")
        if self.bk % 4 or self.bn % 4 or self.tm % 4 or self.tn % 4:
            out.append("float4 copies and fragment reads need multiples of 4")
            return out
        a_step, b_step = t // (self.bk // 4), t // (self.bn // 4)
        if t % (self.bk // 4) or a_step == 0 or self.bm % a_step:
            out.append("threads cannot split the A tile evenly")
        if t % (self.bn // 4) or b_step == 0 or self.bk % b_step:
            out.append("threads cannot split the B tile evenly")
        if (self.bm + self.bn) * self.bk * 4 > 48 * 1024:
            out.append("static shared memory is capped at 48 KB")
        return out

    def fits_registers(self) -> bool:
        """A sweep filter, not a rule of the kernel: whether ~TM*TN + TM + TN + 24
        registers per thread fit the 64K register file with one block per SM;
        shapes that do not would spill under __launch_bounds__."""
        per_thread = self.tm * self.tn + self.tm + self.tn + 24
        return self.threads * per_thread <= 65536

    def geometry(self) -> Geometry:
        return Geometry(
            entry="sgemm_autotuned",
            tile=(self.bm, self.bn),
            block=(self.threads,),
            multiple=(self.bm, self.bn, self.bk),
        )


AUTOTUNE_DEFAULT = TileConfig(bm=128, bn=128, bk=16, tm=8, tn=8)
AUTOTUNE_CANDIDATES: tuple[TileConfig, ...] = tuple(
    c
    for c in (
        TileConfig(bm, bn, bk, tm, tn)
        for bm, bn, bk, tm, tn in itertools.product(
            (64, 128, 256), (64, 128, 256), (8, 16, 32), (4, 8), (4, 8)
        )
    )
    if not c.problems() and c.fits_registers()
)



def _toolkit_include() -> tuple[str, ...]:
    """`<mma.h>` includes `crt/mma.h`, which the CUDA headers that CuPy finds in
    its pip packages do not ship; point NVRTC at the toolkit's own headers when
    one is installed (checked by path, so importing the suite needs no GPU)."""
    for base in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if base and (Path(base) / "include" / "crt" / "mma.h").is_file():
            return (f"-I{Path(base) / 'include'}",)
    return ()

def autotune_variants() -> dict[str, tuple[str, ...]]:
    """Candidate label -> extra NVRTC options for 07_autotuned, for a sweep to compile."""
    return {c.label: c.options() for c in AUTOTUNE_CANDIDATES}


TILE_KEYS = ("bm", "bn", "bk", "tm", "tn")


def candidate_shape(config: TileConfig, size: Shape = HEADLINE) -> dict[str, int]:
    """The shape that names one sweep candidate: the problem size, then its tile."""
    return {**{d: size[d] for d in ("m", "n", "k")}, **dict(zip(TILE_KEYS, config.shape(), strict=True))}


def candidate_of(shape: Shape) -> TileConfig | None:
    """The tile candidate a shape names, or None for a plain size (the default tile)."""
    if not any(key in shape for key in TILE_KEYS):
        return None
    missing = [key for key in TILE_KEYS if key not in shape]
    if missing:
        raise ValueError(f"tile sweep shape {dict(shape)} lacks {missing}")
    config = TileConfig(*(shape[key] for key in TILE_KEYS))
    if config not in AUTOTUNE_CANDIDATES:
        raise ValueError(f"{config.label} is not one of AUTOTUNE_CANDIDATES")
    return config


TILE_SWEEP: tuple[Shape, ...] = tuple(candidate_shape(c) for c in AUTOTUNE_CANDIDATES)


_TOPIC_DIR = Path(__file__).resolve().parent
_CONSTEXPR = re.compile(r"^\s*constexpr int\s+([A-Z][A-Z0-9_]*)\s*=\s*([^;]+);", re.M)
# C++ integer arithmetic on the positive values these files use.
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
               ast.Div: operator.floordiv, ast.FloorDiv: operator.floordiv}


def _evaluate(node: ast.expr, names: dict[str, int]) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _evaluate(node.left, names), _evaluate(node.right, names)
        return int(_ARITHMETIC[type(node.op)](left, right))
    raise ValueError(f"not integer arithmetic: {ast.dump(node)}")


def source_constants(source: str) -> dict[str, int]:
    """The `constexpr int NAME = expr;` constants of a .cu file, evaluated in
    order; expressions that are not plain integer arithmetic are left out."""
    values: dict[str, int] = {}
    for name, expr in _CONSTEXPR.findall(source):
        try:
            values[name] = _evaluate(ast.parse(expr.strip(), mode="eval").body, values)
        except (SyntaxError, KeyError, ValueError, ZeroDivisionError):
            continue
    return values


def geometry_from_source(entry: str, source: str) -> Geometry:
    """The launch geometry a tensor-core version states in its own constants:
    tile BM x BN, K step BK, THREADS per block and SMEM_BYTES of dynamic shared
    memory. A candidate file with another tile therefore launches correctly."""
    c = source_constants(source)
    missing = [k for k in ("BM", "BN", "BK", "THREADS", "SMEM_BYTES") if k not in c]
    if missing:
        raise ValueError(f"{entry}: the source does not define {missing}")
    return Geometry(
        entry, (c["BM"], c["BN"]), (c["THREADS"],), (c["BM"], c["BN"], c["BK"]),
        dynamic_smem=c["SMEM_BYTES"],
    )


# Versions whose geometry is read from their source, at import and at every launch.
SOURCE_GEOMETRY = {"10_wmma": "gemm_bf16_wmma", "11_mma_swizzle": "gemm_bf16_mma_swizzle"}
_WGMMA_SMEM = 4 * (128 * 64 + 64 * 256) * 2 + 2 * 4 * 8 + 1024  # 12: 4 stages, barriers, alignment

GEOMETRY: dict[str, Geometry] = {
    "01_naive": Geometry("sgemm_naive", (32, 32), (32, 32), (1, 1, 1), rows_on_x=True),
    "02_coalescing": Geometry("sgemm_coalescing", (32, 32), (32, 32), (1, 1, 1)),
    "03_smem_tiling": Geometry("sgemm_smem_tiling", (32, 32), (32, 32), (32, 32, 32)),
    "04_blocktiling_1d": Geometry("sgemm_blocktiling_1d", (64, 64), (512,), (64, 64, 8)),
    "05_blocktiling_2d": Geometry("sgemm_blocktiling_2d", (128, 128), (256,), (128, 128, 8)),
    "06_vectorized": Geometry("sgemm_vectorized", (128, 128), (256,), (128, 128, 8)),
    "07_autotuned": AUTOTUNE_DEFAULT.geometry(),
    "08_warptiling": Geometry("sgemm_warptiling", (128, 128), (256,), (128, 128, 16)),
    "09_double_buffering": Geometry("sgemm_double_buffering", (128, 128), (256,), (128, 128, 16)),
    **{
        stem: geometry_from_source(entry, (_TOPIC_DIR / f"{stem}.cu").read_text(encoding="utf-8"))
        for stem, entry in SOURCE_GEOMETRY.items()
    },
    "12_wgmma_tma": Geometry(
        "gemm_bf16_wgmma_tma", (128, 256), (384,), (128, 256, 64), dynamic_smem=_WGMMA_SMEM
    ),
    "13_wgmma_persistent": Geometry(
        "gemm_bf16_wgmma_persistent", (128, 256), (384,), (128, 256, 64),
        dynamic_smem=_WGMMA_SMEM, persistent=True,
    ),
}

# Versions whose kernel takes TMA tensor maps for A and B instead of pointers.
TMA_VERSIONS = frozenset({"12_wgmma_tma", "13_wgmma_persistent"})


# ----------------------------------------------------------------------------
# Work model
# ----------------------------------------------------------------------------


def gemm_flops(shape: Shape) -> float:
    return 2.0 * shape["m"] * shape["n"] * shape["k"]


def _min_bytes(in_bytes: int) -> Callable[[Shape], float]:
    def count(shape: Shape) -> float:
        m, n, k = shape["m"], shape["n"], shape["k"]
        return float((m * k + k * n) * in_bytes + m * n * 4)

    return count


sgemm_bytes = _min_bytes(4)
bf16_gemm_bytes = _min_bytes(2)


def _bf16_out_bytes(shape: Shape) -> float:
    m, n, k = shape["m"], shape["n"], shape["k"]
    return float((m * k + k * n + m * n) * 2)


# ----------------------------------------------------------------------------
# Inputs and references
# ----------------------------------------------------------------------------


def _normal(rng: Any, rows: int, cols: int) -> Any:
    import cupy

    return cupy.asarray(rng.standard_normal((rows, cols), dtype=cupy.float32))


def to_bf16_bits(x: Any) -> Any:
    """float32 -> bf16 bit patterns (uint16), rounding to nearest, ties to even.

    Works on NumPy and CuPy arrays alike (finite inputs; NaN is not needed here).
    """
    import numpy

    bits = x.view("uint32")
    lsb = (bits >> numpy.uint32(16)) & numpy.uint32(1)
    return ((bits + numpy.uint32(0x7FFF) + lsb) >> numpy.uint32(16)).astype("uint16")


def bf16_bits_to_float64(bits: Any) -> Any:
    """bf16 bit patterns -> float64, on NumPy or CuPy arrays. Accepts the uint16
    array itself or its numeric upcast (the harness upcasts every input with
    astype(float64), which keeps the integers 0..65535 exact)."""
    import numpy

    wide = bits.astype("uint16").astype("uint32") << numpy.uint32(16)
    return wide.view("float32").astype("float64")


def _sgemm_inputs(shape: Shape, rng: Any) -> Arrays:
    return {"a": _normal(rng, shape["m"], shape["k"]), "b": _normal(rng, shape["k"], shape["n"])}


def _bf16_inputs(shape: Shape, rng: Any) -> Arrays:
    return {
        "a": to_bf16_bits(_normal(rng, shape["m"], shape["k"])),
        "b": to_bf16_bits(_normal(rng, shape["k"], shape["n"])),
    }


def _sgemm_reference(inputs64: Arrays, shape: Shape) -> Arrays:
    return {"c": inputs64["a"] @ inputs64["b"]}


def _bf16_reference(inputs64: Arrays, shape: Shape) -> Arrays:
    # The rounded bf16 values, exactly, in float64: only accumulation error remains.
    return {"c": bf16_bits_to_float64(inputs64["a"]) @ bf16_bits_to_float64(inputs64["b"])}


# ----------------------------------------------------------------------------
# Launching
# ----------------------------------------------------------------------------


@dataclass
class _Prepared:
    """A version's kernel in one compiled module, ready to launch."""

    module: Any  # held so that id(module) stays unique while cached
    kernel: Any
    geometry: Geometry


_PREPARED: dict[tuple[int, str], _Prepared] = {}
_CANDIDATE_MODULES: dict[tuple[str, TileConfig], Any] = {}
_TENSOR_MAPS: dict[tuple[int, int, int, int, int], tuple[Any, Any]] = {}


def _autotuned_config(module: Any) -> TileConfig:
    """The tile shape 07_autotuned.cu was compiled with, read from the module."""
    import cupy

    ptr = module.get_global("sgemm_autotuned_config")
    values = cupy.ndarray((5,), dtype=cupy.int32, memptr=ptr).get()
    return TileConfig(*(int(v) for v in values))


def _prepare(module: Any, version: Version) -> _Prepared:
    stem = version.stem
    key = (id(module), stem)
    prepared = _PREPARED.get(key)
    if prepared is None:
        if stem not in GEOMETRY:
            raise KeyError(f"gemm suite: no launch geometry for version {stem!r}")
        if stem == "07_autotuned":
            geometry = _autotuned_config(module).geometry()
        elif stem in SOURCE_GEOMETRY:
            geometry = geometry_from_source(SOURCE_GEOMETRY[stem], version.source)
        else:
            geometry = GEOMETRY[stem]
        kernel = module.get_function(geometry.entry)
        if geometry.dynamic_smem > 48 * 1024:
            kernel.max_dynamic_shared_size_bytes = geometry.dynamic_smem
        prepared = _Prepared(module, kernel, geometry)
        _PREPARED[key] = prepared
    return prepared


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


def tensor_map_2d(address: int, inner: int, outer: int, box_inner: int, box_outer: int) -> Any:
    """A CUtensorMap for a row-major bf16 matrix (outer rows of inner elements),
    loaded in boxes of box_outer rows x box_inner elements with 128-byte swizzle.

    Returned as a one-element NumPy array of 128 raw bytes, 64-byte aligned,
    which CuPy passes to a kernel by value (the __grid_constant__ parameter).
    """
    import ctypes

    import numpy

    holder = numpy.zeros(128 + 64, dtype=numpy.uint8)
    start = (-holder.ctypes.data) % 64
    tmap = holder[start : start + 128].view(numpy.dtype((numpy.void, 128)))
    c_u64, c_u32 = ctypes.c_uint64, ctypes.c_uint32
    rc = _libcuda().cuTensorMapEncodeTiled(
        tmap.ctypes.data,
        TENSOR_MAP_BFLOAT16,
        2,
        address,
        (c_u64 * 2)(inner, outer),
        (c_u64 * 1)(inner * 2),
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


def _wgmma_tensor_maps(a: Any, b: Any, m: int, n: int, k: int) -> tuple[Any, Any]:
    """Tensor maps for 12_wgmma_tma: A boxes of 128 rows x 64 k, B boxes of
    64 k-rows x 64 columns (the kernel's BM, BK and B_BOX)."""
    key = (a.data.ptr, b.data.ptr, m, n, k)
    maps = _TENSOR_MAPS.get(key)
    if maps is None:
        if len(_TENSOR_MAPS) > 16:
            _TENSOR_MAPS.clear()
        maps = (
            tensor_map_2d(a.data.ptr, inner=k, outer=m, box_inner=64, box_outer=128),
            tensor_map_2d(b.data.ptr, inner=n, outer=k, box_inner=64, box_outer=64),
        )
        _TENSOR_MAPS[key] = maps
    return maps


def _candidate_module(version: Version, config: TileConfig) -> Any:
    """07 compiled for one sweep candidate, with the options the harness would use."""
    import cupy

    key = (version.source, config)
    module = _CANDIDATE_MODULES.get(key)
    if module is None:
        options = (*SGEMM_COMPILE_OPTIONS, *config.options())
        module = cupy.RawModule(code=version.source, options=options, backend="nvrtc")
        compile_now = getattr(module, "compile", None)
        if compile_now is not None:  # compile here, not inside the first timed launch
            compile_now()
        _CANDIDATE_MODULES[key] = module
    return module


def launch(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    """Enqueue one version's kernel on the current stream. A tile-sweep shape
    (07 only) launches the module compiled for the candidate it names."""
    import numpy

    config = candidate_of(shape)
    if config is not None:
        if version.stem != "07_autotuned":
            raise ValueError(f"{version.id}: only 07_autotuned takes tile-sweep shapes")
        module = _candidate_module(version, config)
    prepared = _prepare(module, version)
    geometry = prepared.geometry
    m, n, k = shape["m"], shape["n"], shape["k"]
    if not geometry.accepts(shape):
        raise ValueError(
            f"{version.id} needs M, N, K multiples of {geometry.multiple}, got {m, n, k}"
        )
    a, b, c = arrays["a"], arrays["b"], arrays["c"]
    dims = (numpy.int32(m), numpy.int32(n), numpy.int32(k))
    if version.stem in TMA_VERSIONS:
        tmap_a, tmap_b = _wgmma_tensor_maps(a, b, m, n, k)
        args: tuple[Any, ...] = (tmap_a, tmap_b, c, *dims)
    else:
        args = (a, b, c, *dims)
    sms = _sm_count() if geometry.persistent else 0
    prepared.kernel(
        geometry.grid(m, n, sms), geometry.block, args, shared_mem=geometry.dynamic_smem
    )


def _sm_count() -> int:
    import cupy

    device = cupy.cuda.Device()
    return int(device.attributes["MultiProcessorCount"])


# ----------------------------------------------------------------------------
# Library baselines
# ----------------------------------------------------------------------------

TF32_SUSPECT = 1e-5  # fp32 products at these sizes land near 1e-6; TF32 near 3e-4


def _sgemm_baseline(arrays: Arrays, shape: Shape) -> Callable[[], None]:
    """cupy.matmul in true fp32: CUBLAS_COMPUTE_32F forced, then checked."""
    import cupy

    try:
        from cupy._core import _routines_linalg as linalg

        linalg.set_compute_type(cupy.float32, linalg.COMPUTE_TYPE_FP32)
    except (ImportError, AttributeError):  # older CuPy: rely on CUPY_TF32 unset or 0
        pass
    a, b = arrays["a"], arrays["b"]
    out = cupy.empty((shape["m"], shape["n"]), dtype=cupy.float32)
    rows = min(shape["m"], 256)
    probe = cupy.matmul(a[:rows], b)
    want = a[:rows].astype(cupy.float64) @ b.astype(cupy.float64)
    rel = float(cupy.linalg.norm(probe - want) / cupy.linalg.norm(want))
    if rel > TF32_SUSPECT:
        raise RuntimeError(f"cupy.matmul fp32 rel err {rel:.1e} vs float64: TF32 seems on")

    def run() -> None:
        cupy.matmul(a, b, out=out)

    return run


def _bf16_baseline(arrays: Arrays, shape: Shape) -> Callable[[], None]:
    """cuBLAS gemmEx: bf16 A and B, fp32 C, fp32 compute; the same types as 10-12.

    cuBLAS is column-major: the row-major C = A B is the column-major
    C^T = B^T A^T, so B goes first and the dimensions are (n, m, k).
    """
    import cupy
    import numpy
    from cupy_backends.cuda.libs import cublas

    a, b = arrays["a"], arrays["b"]
    m, n, k = shape["m"], shape["n"], shape["k"]
    out = cupy.empty((m, n), dtype=cupy.float32)
    handle = cupy.cuda.device.get_cublas_handle()
    one = numpy.ones(1, dtype=numpy.float32)
    zero = numpy.zeros(1, dtype=numpy.float32)

    def run() -> None:
        cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
        cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
        cublas.gemmEx(
            handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, n, m, k,
            one.ctypes.data, b.data.ptr, CUDA_R_16BF, n, a.data.ptr, CUDA_R_16BF, k,
            zero.ctypes.data, out.data.ptr, CUDA_R_32F, n,
            cublas.CUBLAS_COMPUTE_32F, cublas.CUBLAS_GEMM_DEFAULT,
        )  # fmt: skip

    run()
    corner = min(m, n, 128)
    want = bf16_bits_to_float64(a[:corner]) @ bf16_bits_to_float64(b[:, :corner])
    rel = float(cupy.linalg.norm(out[:corner, :corner] - want) / cupy.linalg.norm(want))
    if not rel < 1e-3:
        raise RuntimeError(f"cuBLAS bf16 baseline rel err {rel:.1e} on a corner: wrong call")
    return run


def _torch_sgemm(arrays: Arrays, shape: Shape) -> Callable[[], None]:
    """torch.matmul in true fp32 (TF32 off for matmul, checked like cupy.matmul)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = kit.torch_view(arrays["a"]), kit.torch_view(arrays["b"])
    out = torch.empty((shape["m"], shape["n"]), dtype=torch.float32, device=a.device)
    rows = min(shape["m"], 256)
    probe = torch.matmul(a[:rows], b).double()
    want = a[:rows].double() @ b.double()
    rel = float(torch.linalg.norm(probe - want) / torch.linalg.norm(want))
    if rel > TF32_SUSPECT:
        raise RuntimeError(f"torch.matmul fp32 rel err {rel:.1e} vs float64: TF32 seems on")
    return kit.warmed(kit.on_cupy_stream(lambda: torch.matmul(a, b, out=out)))


def _torch_bf16(arrays: Arrays, shape: Shape) -> Callable[[], None]:
    """torch.matmul on the bf16 A and B; its C is bf16 (half the output bytes of 10-12)."""
    import torch

    a, b = kit.torch_view(arrays["a"]), kit.torch_view(arrays["b"])
    out = torch.empty((shape["m"], shape["n"]), dtype=torch.bfloat16, device=a.device)
    return kit.warmed(kit.on_cupy_stream(lambda: torch.matmul(a, b, out=out)))


SGEMM_BASELINES = (
    LibraryBaseline(name="cuBLAS (cupy.matmul)", make=_sgemm_baseline),
    LibraryBaseline(name="torch.matmul", make=_torch_sgemm),
)
BF16_BASELINES = (
    LibraryBaseline(name="cuBLAS (gemmEx, fp32 C)", make=_bf16_baseline),
    LibraryBaseline(name="torch.matmul (bf16 C)", make=_torch_bf16),
)
# 13 writes bf16 C, the same types as torch.matmul: the fp32-C gemmEx would be
# charged for twice the output bytes, so it is not a candidate here.
BF16_OUT_BASELINES = (LibraryBaseline(name="torch.matmul (bf16 C)", make=_torch_bf16),)

# ----------------------------------------------------------------------------
# The suite
# ----------------------------------------------------------------------------

_C_OUT = {"c": OutputSpec(shape=lambda s: (s["m"], s["n"]), dtype="float32")}
SGEMM_COMPILE_OPTIONS = ("--std=c++17", "-arch=sm_90")

SGEMM = Benchmark(
    name="sgemm",
    match="0[1-689]_*",
    inputs=_sgemm_inputs,
    outputs=_C_OUT,
    reference=_sgemm_reference,
    launch=launch,
    flops=gemm_flops,
    bytes=sgemm_bytes,
    work_convention=(
        "2MNK FLOPs (a multiply and an add per term of every dot product); "
        "minimum bytes = (MK + KN) * 4 + MN * 4: A and B read once, C written once, all fp32"
    ),
    tolerance=1e-5,
    tolerance_reason=(
        "each element is an fp32 sum over K products, accumulated in one order; the rounding "
        "error grows like sqrt(K) and lands near 1e-6 at K = 4096-8192 for normal inputs, while "
        "TF32 (3e-4) or a wrong tile (1e-3 and up) lands above 1e-5"
    ),
    shapes=SHAPES,
    headline=HEADLINE,
    roofline=Roofline(bandwidth="copy", compute="sgemm_fp32"),
    baselines=SGEMM_BASELINES,
    compile_options=SGEMM_COMPILE_OPTIONS,
)

# 07 alone: the square sizes with the default tile, then every candidate at
# 4096^3, so the results file keeps the whole sweep next to the default.
SGEMM_TILES = dataclasses.replace(
    SGEMM,
    name="sgemm_tiles",
    match="07_*",
    shapes=(*SHAPES, *TILE_SWEEP),
    version_options={"07_autotuned": AUTOTUNE_DEFAULT.options()},
)

BF16 = Benchmark(
    name="bf16",
    match="1[0-2]_*",
    inputs=_bf16_inputs,
    outputs=_C_OUT,
    reference=_bf16_reference,
    launch=launch,
    flops=gemm_flops,
    bytes=bf16_gemm_bytes,
    work_convention=(
        "2MNK FLOPs; minimum bytes = (MK + KN) * 2 + MN * 4: bf16 A and B read once, "
        "fp32 C written once"
    ),
    tolerance=1e-3,
    tolerance_reason=(
        "the reference multiplies the rounded bf16 inputs exactly in float64, so only the fp32 "
        "accumulation inside and between tensor-core instructions remains (about 1e-6 to 1e-5 at "
        "K = 4096); 1e-3 leaves two orders of margin and still fails a kernel that gets one "
        "16x16 block of a 4096x4096 result wrong (about 4e-3)"
    ),
    shapes=SHAPES,
    headline=HEADLINE,
    roofline=Roofline(bandwidth="copy", compute="gemm_bf16"),
    baselines=BF16_BASELINES,
    version_options={"10_wmma": _toolkit_include(), "12_wgmma_tma": ("-arch=sm_90a",)},
)

_C_BF16_OUT = {"c": OutputSpec(shape=lambda s: (s["m"], s["n"]), dtype="uint16")}

BF16_OUT = dataclasses.replace(
    BF16,
    name="bf16_out",
    match="1[3-9]_*",
    outputs=_C_BF16_OUT,
    bytes=_bf16_out_bytes,
    compare=kit.compare_bf16,
    work_convention=(
        "2MNK FLOPs; minimum bytes = (MK + KN + MN) * 2: bf16 A and B read once, bf16 C "
        "written once"
    ),
    tolerance=3e-3,
    tolerance_reason=(
        "the reference is the exact float64 product of the bf16 inputs; rounding C to bf16's 8 "
        "significant bits adds a relative error of at most 2^-9 per element, about 1.1e-3 in the "
        "norm, on top of the fp32 accumulation (about 1e-5); 3e-3 keeps 2.7x headroom and still "
        "fails one wrong 16x16 block of a 4096x4096 result (about 5.6e-3 with the rounding)"
    ),
    baselines=BF16_OUT_BASELINES,
    version_options={"13_wgmma_persistent": ("-arch=sm_90a",)},
)

SUITE = Suite(
    topic="gemm",
    benchmarks=[SGEMM, SGEMM_TILES, BF16, BF16_OUT],
    description=(
        "Dense matrix multiply C = A @ B, row-major, square sizes 256-8192: an fp32 ladder on "
        "the FMA units (01-09, with 07's tile sweep at 4096^3) and a bf16 ladder on the tensor "
        "cores (10-12)."
    ),
)
