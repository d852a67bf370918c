"""Helpers that kernel suites share: bf16 carried as uint16, entry-point
lookup, resident grids, and PyTorch baselines on the harness's stream.

Like the rest of a suite, nothing here imports CuPy or PyTorch at module
level: suites are imported on machines without a GPU.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

Arrays = dict[str, Any]

# --- entry points -------------------------------------------------------------------------

_functions: dict[tuple[int, str], tuple[Any, Any]] = {}


def kernel(module: Any, entry: str) -> Any:
    """The entry point, looked up once per module (the module is kept alive with
    it, so its id is never reused)."""
    key = (id(module), entry)
    if key not in _functions:
        _functions[key] = (module, module.get_function(entry))
    return _functions[key][1]


# --- bf16 carried as uint16 ---------------------------------------------------------------


def to_bf16_bits(a: Any) -> Any:
    """float32 device array -> uint16 bf16 bit patterns, rounded to nearest even."""
    import cupy

    u = a.view(cupy.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(cupy.uint16)


def bf16_bits_to_float64(a: Any) -> Any:
    """bf16 bit patterns as float64 values.

    Takes the uint16 array itself, or the float64 copy of it that the harness's
    upcast hands to `reference` (the patterns as whole numbers 0..65535).
    """
    import cupy

    bits = a.astype(cupy.uint32)
    return (bits << 16).view(cupy.float32).astype(cupy.float64)


def compare_bf16(outputs: Arrays) -> Arrays:
    """A Benchmark's `compare` for bf16 outputs: decode every output to float64."""
    return {name: bf16_bits_to_float64(a) for name, a in outputs.items()}


# --- occupancy ----------------------------------------------------------------------------


def blocks_per_sm(
    regs_per_thread: int,
    threads: int,
    regs_per_sm: int = 65536,
    threads_per_sm: int = 2048,
    max_blocks: int = 32,
) -> int:
    """Resident blocks of one kernel on one SM, limited by registers and threads
    (registers are granted per warp in units of 256; shared memory is assumed tiny)."""
    warps = math.ceil(threads / 32)
    regs_per_warp = math.ceil(regs_per_thread * 32 / 256) * 256
    by_regs = regs_per_sm // (regs_per_warp * warps)
    return max(1, min(max_blocks, threads_per_sm // threads, by_regs))


@functools.cache
def device_limits(device_id: int) -> tuple[int, int, int, int]:
    """(SMs, registers per SM, threads per SM, blocks per SM) of a device."""
    import cupy

    p = cupy.cuda.runtime.getDeviceProperties(device_id)
    return (
        int(p["multiProcessorCount"]),
        int(p.get("regsPerMultiprocessor", 65536)),
        int(p.get("maxThreadsPerMultiProcessor", 2048)),
        int(p.get("maxBlocksPerMultiProcessor", 32)),
    )


_grids: dict[tuple[int, int, int], int] = {}


def resident_grid(function: Any, threads: int, rows: int) -> int:
    """Blocks of `function` that fit on the current GPU at once, at most one a
    row (computed once per kernel, block and rows; `function` must come from
    `kernel`, which keeps it alive)."""
    key = (id(function), threads, rows)
    if key not in _grids:
        import cupy

        sms, regs, max_threads, max_blocks = device_limits(cupy.cuda.Device().id)
        regs_per_thread = int(function.attributes["num_regs"])
        per_sm = blocks_per_sm(regs_per_thread, threads, regs, max_threads, max_blocks)
        _grids[key] = min(rows, sms * per_sm)
    return _grids[key]


_clusters: dict[tuple[int, int, int, int], int] = {}


def max_active_clusters(function: Any, cluster: int, threads: int, smem: int) -> int:
    """Clusters of `cluster` CTAs of `function` (its cluster shape compiled in with
    `__cluster_dims__`) that the current GPU holds at once, as the driver's
    cuOccupancyMaxActiveClusters answers for this block and dynamic shared memory. Not every
    group of SMs can host a cluster, so a persistent grid sized by SMs alone may not fit:
    the clusters left over would start only after others finished their whole tile list.
    Asked once per kernel and launch shape; `function` must be kept alive by the caller."""
    key = (id(function), cluster, threads, smem)
    if key not in _clusters:
        import ctypes

        class LaunchConfig(ctypes.Structure):  # CUlaunchConfig, cuda.h
            _fields_ = [
                *((name, ctypes.c_uint) for name in ("gx", "gy", "gz", "bx", "by", "bz", "smem")),
                ("stream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p),
                ("num_attrs", ctypes.c_uint),
            ]

        # A RawModule's get_function gives a RawKernel; the driver's handle is its .kernel's.
        handle = getattr(function, "kernel", function).ptr
        count = ctypes.c_int(0)
        config = LaunchConfig(cluster, 1, 1, threads, 1, 1, smem, None, None, 0)
        rc = ctypes.CDLL("libcuda.so.1").cuOccupancyMaxActiveClusters(
            ctypes.byref(count), ctypes.c_void_p(handle), ctypes.byref(config)
        )
        if rc != 0 or count.value < 1:
            raise RuntimeError(f"cuOccupancyMaxActiveClusters gave {count.value} (CUresult {rc})")
        _clusters[key] = count.value
    return _clusters[key]


# --- PyTorch baselines ----------------------------------------------------------------------


def torch_view(a: Any) -> Any:
    """A zero-copy torch tensor over a CuPy array; uint16 arrays become bfloat16."""
    import cupy
    import torch

    if a.dtype == cupy.uint16:
        return torch.as_tensor(a.view(cupy.int16), device="cuda").view(torch.bfloat16)
    return torch.as_tensor(a, device="cuda")


def on_cupy_stream(op: Callable[[], object]) -> Callable[[], None]:
    """Run a torch operation on CuPy's current stream (the one the harness
    times), as it is when the baseline is made."""
    import cupy
    import torch

    ptr = cupy.cuda.get_current_stream().ptr
    if torch.cuda.current_stream().cuda_stream == ptr:

        def run() -> None:
            op()

        return run
    stream = torch.cuda.ExternalStream(ptr)

    def run_on_stream() -> None:
        with torch.cuda.stream(stream):
            op()

    return run_on_stream


def synchronize() -> None:
    """Wait for the device (CuPy's view of it, which also covers PyTorch's work)."""
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


def warmed(run: Callable[[], None], calls: int = 2) -> Callable[[], None]:
    """Call `run` a few times and wait, before it is timed: a torch.compile
    candidate compiles on its first call, and an unavailable backend raises
    here, where the harness records it as unavailable, instead of in the timing."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SDPA explains each refused backend as a warning
        for _ in range(calls):
            run()
    synchronize()
    return run


_compiled: dict[str, Any] = {}

# Enough compiled variants of one function for every shape and dtype of a suite;
# past Dynamo's default (8) it would silently fall back to eager PyTorch.
COMPILE_VARIANTS = 64


def compiled(key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`torch.compile(fn, dynamic=False)`, made once per key for the whole run.

    Each new shape compiles once, on its first call (see `warmed`), with static
    shapes (the kernel a deployment at that shape would get); the compiled
    code is reused by every later case at the same shape.
    """
    if key not in _compiled:
        import torch

        config: Any = torch._dynamo.config
        for name in ("cache_size_limit", "recompile_limit"):
            if hasattr(config, name) and getattr(config, name) < COMPILE_VARIANTS:
                setattr(config, name, COMPILE_VARIANTS)
        if hasattr(config, "accumulated_cache_size_limit"):
            config.accumulated_cache_size_limit = max(
                config.accumulated_cache_size_limit, 4 * COMPILE_VARIANTS
            )
        _compiled[key] = torch.compile(fn, dynamic=False)
    return _compiled[key]


# --- attention: every SDPA backend -------------------------------------------------------

# (short name a page prints, torch.nn.attention.SDPBackend member)
SDPA_BACKENDS: tuple[tuple[str, str], ...] = (
    ("cuDNN SDPA", "CUDNN_ATTENTION"),
    ("FlashAttention SDPA", "FLASH_ATTENTION"),
    ("efficient SDPA", "EFFICIENT_ATTENTION"),
    ("math SDPA", "MATH"),
)
# The math backend materialises B*H*Sq*Sk scores (and more in fp32); above this many
# elements it is recorded as unavailable rather than run.
MATH_SDPA_MAX_SCORES = 1 << 28


def sdpa(
    backend: str,
    q: Any,
    k: Any,
    v: Any,
    enable_gqa: bool = False,
) -> Callable[[], None]:
    """F.scaled_dot_product_attention(q, k, v) restricted to one backend, on the
    harness's stream, warmed up; raises if the backend refuses the inputs."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if backend == "MATH":
        scores = q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2]
        if scores > MATH_SDPA_MAX_SCORES:
            raise MemoryError(
                f"math SDPA would materialise {scores:,} scores (limit {MATH_SDPA_MAX_SCORES:,})"
            )
    member = getattr(SDPBackend, backend)
    kwargs = {"enable_gqa": True} if enable_gqa else {}

    def op() -> None:
        with sdpa_kernel(member):
            F.scaled_dot_product_attention(q, k, v, **kwargs)

    return warmed(on_cupy_stream(op))
