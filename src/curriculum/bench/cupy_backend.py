"""The real backend: CuPy on one CUDA device, NVRTC for kernels, NVML for clocks.

`open_cupy_backend` is the only way in, and it refuses clearly (NoGpuError)
when there is no usable device, before anything is measured or written.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from curriculum.bench.api import Arrays, OutputSpec, Shape
from curriculum.bench.backend import (
    Comparison,
    DeviceInfo,
    compare_arrays,
    gpu_slug,
    poison_array,
)
from curriculum.bench.errors import NoGpuError
from curriculum.bench.nvml import Nvml
from curriculum.bench.timing import CudaEventTimer, TimingPolicy, time_call
from curriculum.results import Ceiling, Clocks, Stat


def gpu_refusal_reason() -> str | None:
    """Why no GPU can be used here, checked without touching CuPy."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1", "none", "NoDevFiles"):
        return f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU"
    return None


def import_cupy() -> Any:
    """Import CuPy with TF32 off, so a float32 matmul is true fp32."""
    os.environ["CUPY_TF32"] = "0"
    try:
        import cupy
    except ImportError as exc:
        raise NoGpuError(
            f"CuPy cannot be imported ({exc}); install cupy-cuda12x or cupy-cuda13x"
        ) from exc
    return cupy


def open_cupy_backend(device: int = 0, pool: bool = True) -> CupyBackend:
    """A backend on `device` (an index among the visible devices), or NoGpuError."""
    reason = gpu_refusal_reason()
    if reason:
        raise NoGpuError(reason)
    cupy = import_cupy()
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA raises its own error types when no driver answers
        raise NoGpuError(f"no CUDA device answers: {exc}") from exc
    if count < 1:
        raise NoGpuError("CUDA reports no device")
    if not 0 <= device < count:
        raise NoGpuError(f"device {device} requested, {count} visible")
    return CupyBackend(cupy, device, pool)


class CupyBackend:
    """The harness's device operations on CuPy arrays."""

    def __init__(self, cupy: Any, device: int, pool: bool) -> None:
        self._cupy = cupy
        self._device_id = device
        cupy.cuda.Device(device).use()
        if not pool:
            # Every buffer its own cudaMalloc, so a memory checker sees its bounds.
            cupy.cuda.set_allocator(None)
        props = cupy.cuda.runtime.getDeviceProperties(device)
        self._props = props
        try:
            bus_id = cupy.cuda.runtime.deviceGetPCIBusId(device)
        except Exception:  # older CuPy: let NVML fall back to index 0
            bus_id = None
        self._nvml = Nvml(bus_id)
        self._timer: CudaEventTimer | None = None

    @property
    def timer(self) -> CudaEventTimer:
        if self._timer is None:
            self._timer = CudaEventTimer(
                int(self._props["l2CacheSize"]), int(self._props["multiProcessorCount"])
            )
        return self._timer

    def device(self) -> DeviceInfo:
        cupy = self._cupy
        name = self._props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        sm_max, mem_max = self._nvml.max_clocks()
        driver = self._nvml.driver() or _cuda_version(cupy.cuda.runtime.driverGetVersion())
        return DeviceInfo(
            name=name,
            slug=gpu_slug(name),
            sm_count=int(self._props["multiProcessorCount"]),
            l2_bytes=int(self._props["l2CacheSize"]),
            memory_bytes=int(self._props["totalGlobalMem"]),
            sm_clock_max_mhz=sm_max,
            mem_clock_max_mhz=mem_max,
            driver=driver,
            cuda_runtime=_cuda_version(cupy.cuda.runtime.runtimeGetVersion()),
            cupy=str(cupy.__version__),
            torch=_torch_version(),
        )

    def compile(self, source: str, options: tuple[str, ...]) -> Any:
        module = self._cupy.RawModule(code=source, options=options, backend="nvrtc")
        compile_now = getattr(module, "compile", None)
        if compile_now is not None:
            compile_now()
        return module

    def rng(self, seed: int) -> Any:
        return self._cupy.random.default_rng(seed)

    def alloc_output(self, spec: OutputSpec, shape: Shape) -> Any:
        out = self._cupy.empty(spec.shape(shape), dtype=spec.dtype)
        self.poison(out)
        return out

    def poison(self, array: Any) -> None:
        poison_array(array, self._cupy)

    def upcast(self, arrays: Arrays) -> Arrays:
        return {name: a.astype(self._cupy.float64) for name, a in arrays.items()}

    def compare(self, out: Any, ref: Any, tolerance: float) -> Comparison:
        return compare_arrays(out, ref, tolerance, self._cupy)

    def synchronize(self) -> None:
        self._cupy.cuda.get_current_stream().synchronize()
        self._cupy.cuda.runtime.deviceSynchronize()

    def time(self, fn: Callable[[], None], policy: TimingPolicy, flush_l2: bool = True) -> Stat:
        return time_call(fn, self.timer, policy, flush_l2=flush_l2)

    def clocks(self) -> Clocks:
        return self._nvml.clocks()

    def ceilings(self, policy: TimingPolicy) -> dict[str, Ceiling]:
        from curriculum.bench.ceilings import measure_ceilings

        return measure_ceilings(self.timer, policy)

    def release(self) -> None:
        self._cupy.get_default_memory_pool().free_all_blocks()
        torch = sys.modules.get("torch")  # library candidates allocate through PyTorch's cache
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.empty_cache()


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return str(torch.__version__)
