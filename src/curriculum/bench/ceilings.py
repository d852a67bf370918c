"""The card's ceilings, measured at the start of every run.

Every "% of roofline" is a kernel's time against a floor computed from these,
taken minutes apart on the same card, never from a datasheet:

- `copy`: device-to-device copy of a 2 GiB buffer; bytes = read + write. The
  better of CuPy's copy (a device memcpy) and a plain 16-byte-vector copy
  kernel, because a ceiling is the best this card was seen to do.
- `read`: a 2 GiB buffer read once and summed; bytes = read. The better of
  `cupy.sum` and a vectorised one-pass sum kernel.
- `sgemm_fp32`: cuBLAS SGEMM through `cupy.matmul` at 4096^3 with TF32 off,
  verified by the error against a float64 product (TF32 would show ~1e-4).
- `gemm_bf16`: `torch.matmul` in bf16 at 8192^3 when PyTorch is present.

All of it goes through the project's one timing function.
"""

from __future__ import annotations

import logging
from typing import Any

from curriculum.bench.timing import CudaEventTimer, TimingPolicy, time_call
from curriculum.results import Ceiling, Stat

log = logging.getLogger("curriculum.bench")

STREAM_BYTES = 2 << 30  # 2 GiB: about 40x the 50 MB L2 of an H100/H200
SGEMM_N = 4096
BF16_N = 8192
TF32_SUSPECT = 1e-5  # fp32 SGEMM at 4096 lands near 1e-6; TF32 near 1e-4

_CEILING_KERNELS = r"""
extern "C" __global__ void __launch_bounds__(256)
ceiling_copy(const float4* __restrict__ src, float4* __restrict__ dst) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    dst[i] = src[i];
}

extern "C" __global__ void __launch_bounds__(256)
ceiling_read(const float4* __restrict__ src, float* __restrict__ out) {
    __shared__ float warp_sums[8];
    long long base = (long long)blockIdx.x * 1024 + threadIdx.x;
    float4 v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = src[base + k * 256];
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) acc += (v[k].x + v[k].y) + (v[k].z + v[k].w);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < 8 ? warp_sums[threadIdx.x] : 0.0f;
#pragma unroll
        for (int off = 4; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
        if (threadIdx.x == 0) atomicAdd(out, acc);
    }
}
"""


def _stat_rate(stat: Stat, amount: float, scale: float) -> float:
    return amount / (stat.median_ms * 1e-3) / scale


def measure_ceilings(timer: CudaEventTimer, policy: TimingPolicy) -> dict[str, Ceiling]:
    """Measure every ceiling this machine supports; a missing one is logged, not fatal."""
    import cupy

    ceilings: dict[str, Ceiling] = {}
    module = _ceiling_module(cupy)
    # The GEMMs first: they heat the card most, and the bandwidth ceilings that
    # most cases are compared with are then measured nearest to those cases.
    for name in ("gemm_bf16", "sgemm_fp32", "read", "copy"):
        try:
            ceiling = measure_ceiling(name, timer, policy, module)
        except Exception as exc:  # a missing ceiling leaves its rooflines unset
            log.warning("ceiling %s not measured: %s: %s", name, type(exc).__name__, exc)
            continue
        if ceiling is not None:
            ceilings[name] = ceiling
    return ceilings


def measure_ceiling(
    name: str, timer: CudaEventTimer, policy: TimingPolicy, module: Any = None
) -> Ceiling:
    """One ceiling by name ("gemm_bf16", "sgemm_fp32", "read" or "copy"), measured as a run
    measures it; scratch comparisons call this to judge variants against the same ceiling."""
    import cupy

    measure = {"gemm_bf16": _gemm_bf16, "sgemm_fp32": _sgemm, "read": _read, "copy": _copy}[name]
    try:
        return measure(cupy, module if module is not None else _ceiling_module(cupy), timer, policy)
    finally:
        cupy.get_default_memory_pool().free_all_blocks()


def _ceiling_module(cupy: Any) -> Any:
    return cupy.RawModule(code=_CEILING_KERNELS, options=("--std=c++17",), backend="nvrtc")


def _best(candidates: list[tuple[str, Stat]]) -> tuple[str, Stat]:
    return min(candidates, key=lambda item: item[1].median_ms)


def _copy(cupy: Any, module: Any, timer: CudaEventTimer, policy: TimingPolicy) -> Ceiling:
    n = STREAM_BYTES // 4
    src = cupy.random.default_rng().random(n, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    kernel = module.get_function("ceiling_copy")
    grid = (n // 4 // 256,)

    def run_kernel() -> None:
        kernel(grid, (256,), (src, dst))

    tried = [
        ("cupy.copyto (device memcpy)", time_call(lambda: cupy.copyto(dst, src), timer, policy)),
        ("float4 copy kernel", time_call(run_kernel, timer, policy)),
    ]
    if not bool((dst == src).all()):
        raise RuntimeError("copy ceiling kernel produced a wrong copy")
    label, stat = _best(tried)
    moved = 2.0 * STREAM_BYTES
    others = "; ".join(f"{lab} {_stat_rate(s, moved, 1e9):.0f} GB/s" for lab, s in tried)
    return Ceiling(
        name="copy",
        description=f"{label}, 2 GiB float32 to 2 GiB, bytes = read + write (tried: {others})",
        stat=stat,
        gbps=_stat_rate(stat, moved, 1e9),
    )


def _read(cupy: Any, module: Any, timer: CudaEventTimer, policy: TimingPolicy) -> Ceiling:
    n = STREAM_BYTES // 4
    src = cupy.random.default_rng().random(n, dtype=cupy.float32)
    out = cupy.zeros(1, dtype=cupy.float32)
    kernel = module.get_function("ceiling_read")
    grid = (n // 4 // 1024,)

    def run_kernel() -> None:
        out.fill(0)
        kernel(grid, (256,), (src, out))

    tried = [
        ("cupy.sum", time_call(lambda: cupy.sum(src), timer, policy)),
        ("float4 one-pass sum kernel", time_call(run_kernel, timer, policy)),
    ]
    want = float(cupy.sum(src, dtype=cupy.float64))
    if abs(float(out[0]) - want) > 1e-3 * want:
        raise RuntimeError(f"read ceiling kernel summed {float(out[0])}, want {want}")
    label, stat = _best(tried)
    others = "; ".join(f"{lab} {_stat_rate(s, STREAM_BYTES, 1e9):.0f} GB/s" for lab, s in tried)
    return Ceiling(
        name="read",
        description=f"{label}, 2 GiB float32 read once, bytes = read (tried: {others})",
        stat=stat,
        gbps=_stat_rate(stat, STREAM_BYTES, 1e9),
    )


def _sgemm(cupy: Any, module: Any, timer: CudaEventTimer, policy: TimingPolicy) -> Ceiling:
    n = SGEMM_N
    _tf32_off(cupy)
    rng = cupy.random.default_rng()
    a = rng.standard_normal((n, n), dtype=cupy.float32)
    b = rng.standard_normal((n, n), dtype=cupy.float32)
    c = cupy.empty((n, n), dtype=cupy.float32)
    stat = time_call(lambda: cupy.matmul(a, b, out=c), timer, policy)
    ref = cupy.matmul(a.astype(cupy.float64), b.astype(cupy.float64))
    rel = float(cupy.linalg.norm(c - ref) / cupy.linalg.norm(ref))
    mode = "TF32 off" if rel < TF32_SUSPECT else "TF32 apparently ON"
    if rel >= TF32_SUSPECT:
        log.warning("SGEMM rel err %.2e vs float64 suggests TF32 was used", rel)
    flops = 2.0 * n**3
    return Ceiling(
        name="sgemm_fp32",
        description=(
            f"cuBLAS SGEMM via cupy.matmul, {n}x{n}x{n} float32, {mode} "
            f"(rel err {rel:.1e} vs float64), FLOPs = 2n^3"
        ),
        stat=stat,
        tflops=_stat_rate(stat, flops, 1e12),
    )


def _tf32_off(cupy: Any) -> None:
    """Ask cuBLAS for true fp32 even if CUPY_TF32 was set before import."""
    try:
        from cupy._core import _routines_linalg as linalg

        linalg.set_compute_type(cupy.float32, linalg.COMPUTE_TYPE_FP32)
    except (ImportError, AttributeError):  # older CuPy: CUPY_TF32=0 set before import
        return


def _gemm_bf16(cupy: Any, module: Any, timer: CudaEventTimer, policy: TimingPolicy) -> Ceiling:
    try:
        import torch
    except ImportError as exc:
        raise RuntimeError("PyTorch is not installed; no bf16 GEMM path") from exc
    n = BF16_N
    device = torch.device("cuda", cupy.cuda.Device().id)
    try:
        stat = _time_bf16(torch, device, n, timer, policy)
    finally:
        torch.cuda.empty_cache()
    flops = 2.0 * n**3
    return Ceiling(
        name="gemm_bf16",
        description=(
            f"torch.matmul bf16 {n}x{n}x{n}, fp32 accumulate, random normal inputs "
            f"(torch {torch.__version__}), FLOPs = 2n^3"
        ),
        stat=stat,
        tflops=_stat_rate(stat, flops, 1e12),
    )


def _time_bf16(
    torch: Any, device: Any, n: int, timer: CudaEventTimer, policy: TimingPolicy
) -> Stat:
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=device, dtype=torch.bfloat16)
    # torch and CuPy both launch on the legacy default stream here, so CuPy's
    # events bracket the torch launch.
    stat = time_call(lambda: torch.matmul(a, b, out=c), timer, policy)
    if not bool(torch.isfinite(c).all()):
        raise RuntimeError("bf16 GEMM produced non-finite values")
    return stat
