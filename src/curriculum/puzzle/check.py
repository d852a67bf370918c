"""`curriculum puzzle check N FILE`: compile a reader's kernel, run it on fresh
random inputs with its outputs poisoned, compare with the float64 reference,
then time it against the reference solution.

The device work goes through the bench's CuPy backend (NVRTC compile, poison,
the project's one timing function); the comparison is NumPy on the host, so it
is tested without a GPU. Each output is allocated with `CANARY` poisoned
elements after its end: a kernel that writes past the end of an output (a
missing bounds guard) is caught even when every element inside is right.
"""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from curriculum.puzzle.content import Puzzle, has_entry
from curriculum.puzzle.spec import Arrays, Param, Shape, Spec

MISMATCHES_SHOWN = 10
CANARY = 1024  # poisoned elements after each output


class PuzzleError(Exception):
    """A check that cannot go on; `exit_code` is what the CLI returns."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Mismatch:
    index: tuple[int, ...]
    want: float
    got: float


@dataclass(frozen=True)
class Comparison:
    """One output against its reference."""

    name: str
    total: int
    bad: int
    mismatches: list[Mismatch] = field(default_factory=list)
    overrun: int | None = None  # first element past the end that the kernel changed

    @property
    def passed(self) -> bool:
        return self.bad == 0 and self.overrun is None


def compare(name: str, got: Any, want: Any, atol: float, rtol: float,
            shown: int = MISMATCHES_SHOWN) -> Comparison:
    """Element by element: `|got - want| <= atol + rtol * |want|`; NaN or inf never
    passes. The first `shown` failing elements are listed in index order."""
    got = np.asarray(got)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise PuzzleError(f"output {name}: shape {got.shape}, reference {want.shape}")
    g = got.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        bad = ~np.isfinite(g) | (np.abs(g - want) > atol + rtol * np.abs(want))
    flat = np.flatnonzero(bad)
    mismatches = [Mismatch(tuple(int(i) for i in np.unravel_index(int(k), want.shape)),
                           float(want.flat[k]), float(g.flat[k])) for k in flat[:shown]]
    return Comparison(name, int(want.size), int(flat.size), mismatches)


def overrun(tail: Any) -> int | None:
    """Index (from the end of the output) of the first canary element changed."""
    tail = np.asarray(tail)
    if np.issubdtype(tail.dtype, np.floating):
        changed = ~np.isnan(tail)
    else:
        changed = (tail.view(np.uint8).reshape(tail.size, -1) != 0xFF).any(axis=1)
    hits = np.flatnonzero(changed)
    return int(hits[0]) if hits.size else None


_LOG_LINE = re.compile(r"^[^\s(]*\((\d+)\): ", re.MULTILINE)


def compiler_log(log: str, file: str) -> str:
    """NVRTC's log with its temporary file name replaced by the reader's: `FILE:LINE: ...`."""
    return _LOG_LINE.sub(lambda m: f"{file}:{m.group(1)}: ", log.strip())


def upcast(arrays: Arrays) -> Arrays:
    return {k: np.asarray(v).astype(np.float64) for k, v in arrays.items()}


@dataclass
class Outcome:
    sizes: Shape
    seed: int
    comparisons: list[Comparison]
    yours_ms: tuple[float, float, float] | None = None  # median, p20, p80
    reference_ms: tuple[float, float, float] | None = None
    reference_note: str = ""

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.comparisons)


def run_check(puzzle: Puzzle, file: Path, sizes: Shape | None = None, seed: int | None = None,
              timed: bool = True) -> Outcome:
    """Check `file` against `puzzle`; raises PuzzleError (or the bench's NoGpuError)."""
    spec = puzzle.spec
    sizes = dict(sizes or spec.sizes)
    source = _read(file)
    if not has_entry(source, spec.entry):
        raise PuzzleError(f'{file}: no kernel `extern "C" __global__ void {spec.entry}(...)`; '
                          f"start from {puzzle.starter}")
    from curriculum.bench.cupy_backend import import_cupy, open_cupy_backend

    backend = open_cupy_backend()
    cupy = import_cupy()
    try:
        options = ("--std=c++17", f"-arch=sm_{cupy.cuda.Device().compute_capability}")
        yours = _kernel(backend, source, options, spec.entry, str(file))
        seed = secrets.randbits(32) if seed is None else seed
        host_in = spec.inputs(sizes, np.random.default_rng(seed))
        device_in = {k: cupy.asarray(v) for k, v in host_in.items()}
        outputs, tails, launch = _prepare(cupy, spec, sizes, device_in, yours)
        _run(cupy, launch, "your kernel")
        want = spec.reference(upcast(host_in), sizes)
        outcome = Outcome(sizes, seed, [])
        for p in spec.outputs:
            c = compare(p.name, cupy.asnumpy(outputs[p.name]), want[p.name], spec.atol, spec.rtol)
            outcome.comparisons.append(
                Comparison(c.name, c.total, c.bad, c.mismatches, overrun(cupy.asnumpy(tails[p.name]))))
        if not outcome.passed or not timed:
            return outcome
        outcome.yours_ms = _time(backend, launch)
        if not puzzle.solution.is_file():
            outcome.reference_note = "the reference solution is not in this checkout"
            return outcome
        ref = _kernel(backend, puzzle.solution.read_text(encoding="utf-8"), options, spec.entry,
                      str(puzzle.solution))
        _, _, ref_launch = _prepare(cupy, spec, sizes, device_in, ref)
        outcome.reference_ms = _time(backend, ref_launch)
        return outcome
    finally:
        backend.release()


def _read(file: Path) -> str:
    if not file.is_file():
        raise PuzzleError(f"no file {file}", exit_code=2)
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PuzzleError(f"cannot read {file}: {exc}", exit_code=2) from exc


def _kernel(backend: Any, source: str, options: tuple[str, ...], entry: str, name: str) -> Any:
    try:
        module = backend.compile(source, options)
        return module.get_function(entry)
    except Exception as exc:  # noqa: BLE001 - CuPy's CompileException and driver errors
        get_message = getattr(exc, "get_message", None)
        log = get_message() if callable(get_message) else str(exc)
        raise PuzzleError(f"{name} does not compile:\n{compiler_log(str(log), name)}") from exc


def _prepare(cupy: Any, spec: Spec, sizes: Shape, device_in: Arrays, function: Any
             ) -> tuple[Arrays, Arrays, Callable[[], None]]:
    """Fresh poisoned outputs (zeroed where the spec says), each with its canary tail,
    and the launch of `function` on them."""
    from curriculum.bench.backend import poison_array

    outputs: Arrays = {}
    tails: Arrays = {}
    for p in spec.outputs:
        dims = p.dims(sizes)
        n = math.prod(dims)
        buf = cupy.empty(n + CANARY, dtype=p.dtype)
        poison_array(buf, cupy)
        outputs[p.name] = buf[:n].reshape(dims)
        tails[p.name] = buf[n:]
        if p.zeroed:
            outputs[p.name].fill(0)
    args = tuple(_arg(p, sizes, device_in, outputs) for p in spec.params)
    grid, block = spec.launch(sizes)

    def launch() -> None:
        function(grid, block, args)

    return outputs, tails, launch


def _arg(p: Param, sizes: Shape, device_in: Arrays, outputs: Arrays) -> Any:
    if p.role == "size":
        return np.int32(sizes[p.name])
    return device_in[p.name] if p.role == "in" else outputs[p.name]


def _run(cupy: Any, launch: Callable[[], None], what: str) -> None:
    try:
        launch()
        cupy.cuda.runtime.deviceSynchronize()
    except Exception as exc:  # noqa: BLE001 - launch and device errors of every kind
        raise PuzzleError(f"{what} failed on the device: {exc} (an out-of-bounds access "
                          "shows as an illegal address; compute-sanitizer names the line)") from exc


def _time(backend: Any, launch: Callable[[], None]) -> tuple[float, float, float]:
    from curriculum.bench.timing import TimingPolicy

    policy = TimingPolicy(warmup_ms=10.0, min_samples=20, batch=10, rel_tol=0.01,
                          max_samples=200, time_cap_s=5.0)
    stat = backend.time(launch, policy)
    return stat.median_ms, stat.p20_ms, stat.p80_ms
