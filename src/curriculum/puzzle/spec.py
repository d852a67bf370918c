"""What a puzzle's `spec.py` declares: the kernel's parameters, its launch, its
inputs and the float64 reference its output is compared with.

Nothing here needs a GPU: inputs are NumPy arrays made on the host (the check
copies them to the device), and the reference is NumPy in float64, so the CPU
tests run every reference on small shapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Shape = Mapping[str, int]
Dim = tuple[int, ...]
Arrays = dict[str, Any]  # name -> numpy.ndarray

Role = Literal["in", "out", "size"]


@dataclass(frozen=True)
class Param:
    """One kernel parameter, in the order the kernel declares them.

    `in` and `out` are device arrays (`dtype`, `shape(sizes)`); `size` is an
    `int` taken from the sizes by its name. An output marked `zeroed` starts
    at zero (for kernels that accumulate into it with atomics); every other
    output starts poisoned (NaN, or all bits set for integers).
    """

    name: str
    role: Role
    doc: str
    dtype: str = "int32"
    shape: Callable[[Shape], Dim] | None = None
    zeroed: bool = False

    def dims(self, sizes: Shape) -> Dim:
        assert self.shape is not None, f"{self.name} is a size, not an array"
        return tuple(int(d) for d in self.shape(sizes))


def In(name: str, dtype: str, shape: Callable[[Shape], Dim], doc: str) -> Param:
    return Param(name, "in", doc, dtype, shape)


def Out(name: str, dtype: str, shape: Callable[[Shape], Dim], doc: str,
        zeroed: bool = False) -> Param:
    return Param(name, "out", doc, dtype, shape, zeroed)


def Size(name: str, doc: str) -> Param:
    return Param(name, "size", doc)


@dataclass(frozen=True)
class Spec:
    """A puzzle's contract.

    - `entry`: the `extern "C" __global__` function the reader completes;
    - `params`: its parameters in order;
    - `grid(sizes)`, `block`: the launch the check makes (the reader does not
      choose it: the page states it);
    - `inputs(sizes, rng)`: fresh random host arrays, one per `in` parameter;
    - `reference(inputs64, sizes)`: every output in float64, from the inputs
      upcast to float64;
    - `sizes`: the sizes `check` runs at; `small`: sizes for quick tests;
    - an element passes when `|got - want| <= atol + rtol * |want|`.
    """

    entry: str
    params: tuple[Param, ...]
    grid: Callable[[Shape], Dim]
    block: Dim
    inputs: Callable[[Shape, Any], Arrays]
    reference: Callable[[Arrays, Shape], Arrays]
    sizes: Shape
    small: Shape
    atol: float
    rtol: float
    tolerance_reason: str

    @property
    def arrays(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.role != "size")

    @property
    def outputs(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.role == "out")

    def launch(self, sizes: Shape) -> tuple[Dim, Dim]:
        """(grid, block) at `sizes`, each padded to three dimensions."""
        grid = tuple(int(g) for g in self.grid(sizes))
        return _dim3(grid), _dim3(self.block)


def stars(difficulty: int) -> str:
    return "*" * difficulty + "." * (5 - difficulty)


def argument_rows(spec: Spec) -> list[tuple[str, str, str, str, str]]:
    """(name, role, type, shape or value at the checked sizes, meaning) per parameter."""
    rows = []
    for p in spec.params:
        if p.role == "size":
            rows.append((p.name, "size", "int", str(spec.sizes[p.name]), p.doc))
        else:
            role = "output" if p.role == "out" else "input"
            if p.zeroed:
                role += ", starts at zero"
            shape = " × ".join(str(d) for d in p.dims(spec.sizes))
            rows.append((p.name, role, p.dtype, f"({shape})", p.doc))
    return rows


def launch_text(spec: Spec) -> str:
    grid, block = spec.launch(spec.sizes)
    return f"grid ({', '.join(map(str, grid))}), block ({', '.join(map(str, block))})"


def _dim3(d: Dim) -> Dim:
    return tuple(d) + (1,) * (3 - len(d))


def cdiv(a: int, b: int) -> int:
    """Blocks of `b` that cover `a` items."""
    return math.ceil(a / b)
