"""Hopper GEMM past the library: bf16 A and B, fp32 accumulation, bf16 C, row-major.

One benchmark, gemm's `bf16_out` itself (inputs, float64 reference, bf16 comparison, tolerance,
work model and roofline are the same objects), changed where these versions need it:

- the launch: each version takes three TMA tensor maps (A, B and C; C leaves through shared
  memory and a TMA store), and its grid is persistent, one CTA an SM at most, counted in
  clusters of `CLUSTER` CTAs (02 pairs two CTAs that share B). How many clusters fit at once
  is the driver's answer (cuOccupancyMaxActiveClusters), not an assumption: a persistent grid
  larger than what fits would run a second, serial wave;
- the shapes: the squares from 1024^3 (below that a 128 x 256 tile leaves most SMs idle) and
  three projections of a Llama-3-8B-sized layer over 8192 tokens (QKV with grouped K/V heads,
  the fused gate/up projection's half, the down projection);
- the library candidates: torch.matmul (bf16 C, as gemm's bf16_out), cuBLAS gemmEx called
  directly with bf16 C, and torch.compile(torch.matmul) in max-autotune mode, which times
  Triton templates against cuBLAS when it compiles each shape.

Every version states its geometry in its own constants (BM, BN, BK, THREADS, SMEM_BYTES,
CLUSTER), which the launcher reads from the source it launches, with the name of its one
`extern "C"` kernel: a new version needs no entry here. CuPy, NumPy and PyTorch are
imported inside functions only: this module is imported on machines without a GPU.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curriculum.bench import kit
from curriculum.bench.api import Arrays, LibraryBaseline, Shape, Suite, Version
from curriculum.bench.suites import suite_module

GEMM = suite_module("gemm", __file__)

SQUARES: tuple[Shape, ...] = tuple({"m": s, "n": s, "k": s} for s in (1024, 2048, 4096, 8192))
# A Llama-3-8B-sized layer (hidden 4096, 32 query and 8 K/V heads of 128, MLP 14336) over a
# batch of 8192 tokens: C = X W with X tokens x hidden.
LLM_SHAPES: tuple[Shape, ...] = (
    {"m": 8192, "n": 6144, "k": 4096},  # QKV: 4096 + 2 x 1024 output columns
    {"m": 8192, "n": 14336, "k": 4096},  # gate (or up) projection
    {"m": 8192, "n": 4096, "k": 14336},  # down projection
)
SHAPES = (*SQUARES, *LLM_SHAPES)
# Checked, never timed: 9 x 9 cluster tiles (162 tiles, more than the 132 CTAs, in 9 tile
# columns that are no multiple of the 16-row groups) and 36 k-steps a tile, so 04's stream-K
# part covers every tile and its ranges (44-45 k-steps) cut most of them.
CHECK_SHAPES: tuple[Shape, ...] = ({"m": 2304, "n": 2304, "k": 2304},)

# The kernel entry: the one `extern "C" __global__` function of a version's source, after its
# attributes (`__cluster_dims__(...)`, `__launch_bounds__(...)`).
_ENTRY = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__\w+__\s*\([^)]*\)\s*)*(\w+)\s*\(')


def entry_of(stem: str, source: str) -> str:
    """The name of the version's kernel, read from its source (one entry a file)."""
    names = _ENTRY.findall(source)
    if len(names) != 1:
        raise ValueError(f'gemm_hopper/{stem}: expected one extern "C" kernel, found {names}')
    return names[0]


HERE = Path(__file__).resolve().parent
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def with_includes(source: str) -> str:
    """The source with each `#include "file"` of this folder replaced by that file's text,
    recursively: a version that compiles another's source with a `#define` (03 is 02 with
    one qualifier changed) states its geometry and entry through the file it includes."""
    return _INCLUDE.sub(lambda m: with_includes((HERE / m[1]).read_text(encoding="utf-8")), source)


@dataclass(frozen=True)
class Geometry:
    """A version's launch, from its constants: tile BM x BN, K step BK, THREADS a CTA,
    SMEM_BYTES of dynamic shared memory, CLUSTER CTAs a cluster (stacked along M)."""

    entry: str
    bm: int
    bn: int
    bk: int
    threads: int
    smem: int
    cluster: int

    def accepts(self, shape: Shape) -> bool:
        return (
            shape["m"] % (self.bm * self.cluster) == 0
            and shape["n"] % self.bn == 0
            and shape["k"] % self.bk == 0
        )

    def grid(self, m: int, n: int, clusters_at_once: int) -> int:
        """Persistent: every tile's cluster once, or as many clusters as fit at once."""
        tiles = (m // self.bm) * (n // self.bn)
        return min(tiles, clusters_at_once * self.cluster)


def geometry(stem: str, source: str) -> Geometry:
    c = GEMM.source_constants(source)
    missing = [k for k in ("BM", "BN", "BK", "THREADS", "SMEM_BYTES", "CLUSTER") if k not in c]
    if missing:
        raise ValueError(f"gemm_hopper/{stem}: the source does not define {missing}")
    return Geometry(
        entry_of(stem, source),
        c["BM"],
        c["BN"],
        c["BK"],
        c["THREADS"],
        c["SMEM_BYTES"],
        c["CLUSTER"],
    )


# ----------------------------------------------------------------------------
# Launching
# ----------------------------------------------------------------------------


@dataclass
class _Prepared:
    module: Any  # held so that id(module) stays unique while cached
    kernel: Any
    geometry: Geometry
    clusters_at_once: int


_PREPARED: dict[tuple[int, str], _Prepared] = {}
_MAPS: dict[tuple[int, ...], tuple[Any, Any, Any]] = {}


def _prepare(module: Any, version: Version) -> _Prepared:
    key = (id(module), version.stem)
    prepared = _PREPARED.get(key)
    if prepared is None:
        g = geometry(version.stem, with_includes(version.source))
        kernel = module.get_function(g.entry)
        kernel.max_dynamic_shared_size_bytes = g.smem
        clusters = kit.max_active_clusters(kernel, g.cluster, g.threads, g.smem)
        prepared = _Prepared(module, kernel, g, clusters)
        _PREPARED[key] = prepared
    return prepared


def tensor_maps(a: Any, b: Any, c: Any, m: int, n: int, k: int) -> tuple[Any, Any, Any]:
    """A in boxes of 128 rows x 64 k, B of 64 k-rows x 64 columns, C of 64 x 64 (128-byte
    swizzle each: a box row is exactly one 128-byte line)."""
    key = (a.data.ptr, b.data.ptr, c.data.ptr, m, n, k)
    maps = _MAPS.get(key)
    if maps is None:
        if len(_MAPS) > 16:
            _MAPS.clear()
        maps = (
            GEMM.tensor_map_2d(a.data.ptr, inner=k, outer=m, box_inner=64, box_outer=128),
            GEMM.tensor_map_2d(b.data.ptr, inner=n, outer=k, box_inner=64, box_outer=64),
            GEMM.tensor_map_2d(c.data.ptr, inner=n, outer=m, box_inner=64, box_outer=64),
        )
        _MAPS[key] = maps
    return maps


def launch(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    import numpy

    prepared = _prepare(module, version)
    g = prepared.geometry
    m, n, k = shape["m"], shape["n"], shape["k"]
    if not g.accepts(shape):
        raise ValueError(
            f"{version.id} needs M a multiple of {g.bm * g.cluster}, N of {g.bn}, K of {g.bk}; "
            f"got {m, n, k}"
        )
    maps = tensor_maps(arrays["a"], arrays["b"], arrays["c"], m, n, k)
    dims = (numpy.int32(m), numpy.int32(n), numpy.int32(k))
    prepared.kernel(
        (g.grid(m, n, prepared.clusters_at_once),), (g.threads,), (*maps, *dims), shared_mem=g.smem
    )


# ----------------------------------------------------------------------------
# Library candidates
# ----------------------------------------------------------------------------


def _cublas_bf16_out(arrays: Arrays, shape: Shape) -> Callable[[], None]:
    """cuBLAS gemmEx with bf16 A, B and C, fp32 compute: the versions' types exactly.
    Row-major C = A B is column-major C^T = B^T A^T: B first, dimensions (n, m, k)."""
    import cupy
    import numpy
    from cupy_backends.cuda.libs import cublas

    a, b = arrays["a"], arrays["b"]
    m, n, k = shape["m"], shape["n"], shape["k"]
    out = cupy.empty((m, n), dtype=cupy.uint16)
    handle = cupy.cuda.device.get_cublas_handle()
    one = numpy.ones(1, dtype=numpy.float32)
    zero = numpy.zeros(1, dtype=numpy.float32)

    def run() -> None:
        cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
        cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
        cublas.gemmEx(
            handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, n, m, k,
            one.ctypes.data, b.data.ptr, GEMM.CUDA_R_16BF, n, a.data.ptr, GEMM.CUDA_R_16BF, k,
            zero.ctypes.data, out.data.ptr, GEMM.CUDA_R_16BF, n,
            cublas.CUBLAS_COMPUTE_32F, cublas.CUBLAS_GEMM_DEFAULT,
        )  # fmt: skip

    run()
    corner = min(m, n, 128)
    want = GEMM.bf16_bits_to_float64(a[:corner]) @ GEMM.bf16_bits_to_float64(b[:, :corner])
    got = GEMM.bf16_bits_to_float64(out[:corner, :corner])
    rel = float(cupy.linalg.norm(got - want) / cupy.linalg.norm(want))
    if not rel < 3e-3:
        raise RuntimeError(f"cuBLAS bf16-C baseline rel err {rel:.1e} on a corner: wrong call")
    return run


_COMPILED: list[Any] = []  # one compiled torch.matmul for the run; each shape compiles once


def _torch_compiled(arrays: Arrays, shape: Shape) -> Callable[[], None]:
    """torch.compile(torch.matmul) in max-autotune mode (without CUDA graphs, which would
    replay on a stream of their own): each shape compiles and autotunes on its first call,
    inside `warmed`, never in a timed call."""
    import torch

    if not _COMPILED:
        _COMPILED.append(
            torch.compile(torch.matmul, mode="max-autotune-no-cudagraphs", dynamic=False)
        )
    compiled = _COMPILED[0]
    a, b = kit.torch_view(arrays["a"]), kit.torch_view(arrays["b"])
    return kit.warmed(kit.on_cupy_stream(lambda: compiled(a, b)))


BASELINES = (
    *GEMM.BF16_OUT_BASELINES,
    LibraryBaseline(name="cuBLAS (gemmEx, bf16 C)", make=_cublas_bf16_out),
    LibraryBaseline(name="torch.compile(torch.matmul, max-autotune)", make=_torch_compiled),
)

BF16_OUT = dataclasses.replace(
    GEMM.BF16_OUT,
    match="0[1-9]_*",
    launch=launch,
    shapes=SHAPES,
    check_shapes=CHECK_SHAPES,
    baselines=BASELINES,
    compile_options=("--std=c++17", "-arch=sm_90a"),
    # 03 compiles 02's source with one qualifier changed: it needs this folder on the path.
    version_options={"03_release_cluster": (f"-I{HERE}",)},
)

SUITE = Suite(
    topic="gemm_hopper",
    benchmarks=[BF16_OUT],
    description=(
        "A bf16 GEMM with bf16 C on Hopper against cuBLAS, torch.matmul and torch.compile: "
        "gemm/13's persistent warp-specialised kernel with its epilogue through shared memory "
        "and TMA stores (01), then pairs of CTAs sharing B by TMA multicast (02), and 02 with a "
        "cluster-scope release on each stage (03, a measured loss); squares 1024^3-8192^3 and "
        "three LLM projection shapes."
    ),
)
