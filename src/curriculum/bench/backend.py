"""The seam between the harness and the device.

`runner` drives cases through a `Backend`: compile, allocate and poison
outputs, upcast inputs, compare, synchronize, time, read clocks and measure
the ceilings. `CupyBackend` (in `cupy_backend`) is the real one; the tests
drive the same harness with a NumPy backend, so every rule the harness
enforces is checked on machines without a GPU.

`compare_arrays` is shared: CuPy and NumPy have the same array API, so the
same code measures the error on the device and in the tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from curriculum.bench.api import Arrays, OutputSpec, Shape
from curriculum.bench.timing import TimingPolicy
from curriculum.results import Ceiling, Clocks, Stat

MISMATCHES_SHOWN = 5


@dataclass(frozen=True)
class DeviceInfo:
    """What the backend knows of its device, for the run's provenance."""

    name: str
    slug: str
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    sm_clock_max_mhz: int | None
    mem_clock_max_mhz: int | None
    driver: str
    cuda_runtime: str
    cupy: str
    torch: str | None


@dataclass(frozen=True)
class Comparison:
    """One output against its float64 reference."""

    rel_err: float
    passed: bool
    mismatches: list[str] = field(default_factory=list)


class Backend(Protocol):
    """What the harness needs from a device."""

    def device(self) -> DeviceInfo: ...

    def compile(self, source: str, options: tuple[str, ...]) -> Any: ...

    def rng(self, seed: int) -> Any: ...

    def alloc_output(self, spec: OutputSpec, shape: Shape) -> Any: ...

    def poison(self, array: Any) -> None: ...

    def upcast(self, arrays: Arrays) -> Arrays: ...

    def compare(self, out: Any, ref: Any, tolerance: float) -> Comparison: ...

    def synchronize(self) -> None: ...

    def time(
        self, fn: Callable[[], None], policy: TimingPolicy, flush_l2: bool = True
    ) -> Stat: ...

    def clocks(self) -> Clocks: ...

    def ceilings(self, policy: TimingPolicy) -> dict[str, Ceiling]: ...

    def release(self) -> None: ...


def gpu_slug(name: str) -> str:
    """File-name form of a device name: 'NVIDIA H200' -> 'nvidia-h200'."""
    out = []
    for ch in name.lower():
        out.append(ch if ch.isascii() and ch.isalnum() else "-")
    slug = "-".join(part for part in "".join(out).split("-") if part)
    return slug or "unknown-gpu"


def poison_array(array: Any, xp: Any) -> None:
    """Fill floats with NaN and integers with all bits set."""
    import numpy

    if numpy.issubdtype(array.dtype, numpy.floating):
        array.fill(numpy.nan)
    else:
        array.view(xp.uint8).fill(0xFF)


def compare_arrays(out: Any, ref: Any, tolerance: float, xp: Any) -> Comparison:
    """||out - ref|| / ||ref|| in float64; NaN or inf anywhere never passes.

    When the check fails, the first few elements that are not finite or that
    differ by more than `tolerance * (|ref| + rms(ref))` are listed, in index
    order, as 'index: got X, want Y'.
    """
    if tuple(out.shape) != tuple(ref.shape):
        return Comparison(
            rel_err=float("inf"),
            passed=False,
            mismatches=[f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"],
        )
    got = out.astype(xp.float64, copy=False)
    want = ref.astype(xp.float64, copy=False)
    finite = bool(xp.isfinite(got).all())
    diff_norm = float(xp.linalg.norm((got - want).ravel()))
    ref_norm = float(xp.linalg.norm(want.ravel()))
    rel_err = diff_norm / ref_norm if ref_norm > 0.0 else diff_norm
    if not finite:
        rel_err = float("nan")
    passed = finite and rel_err <= tolerance
    if passed:
        return Comparison(rel_err=rel_err, passed=True)
    size = max(int(want.size), 1)
    rms = ref_norm / size**0.5
    bad = ~xp.isfinite(got) | (xp.abs(got - want) > tolerance * (xp.abs(want) + rms))
    flat = xp.nonzero(bad.ravel())[0][:MISMATCHES_SHOWN]
    lines = []
    got_flat, want_flat = got.ravel(), want.ravel()
    for i in [int(v) for v in flat.tolist()]:
        index = tuple(int(v) for v in _unravel(i, tuple(out.shape)))
        lines.append(f"{index}: got {float(got_flat[i])!r}, want {float(want_flat[i])!r}")
    if not lines:
        lines.append("no single element stands out: the error is spread over many elements")
    return Comparison(rel_err=rel_err, passed=False, mismatches=lines)


def _unravel(flat_index: int, shape: tuple[int, ...]) -> list[int]:
    index = []
    for dim in reversed(shape):
        index.append(flat_index % dim if dim else 0)
        flat_index = flat_index // dim if dim else 0
    return list(reversed(index))
