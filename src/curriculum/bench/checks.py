"""The checks of one case: the verdict of a launch, at its shape, at other shapes, and
again on fresh inputs after timing.

`Checker.check` runs one launch on fresh random inputs and poisoned outputs and
gives its verdict: the refusals of `refusals` first (a constant output, an
input returned, inputs rewritten), then the tolerance against the float64
reference. `other_shapes` repeats it, untimed, at the benchmark's smallest
shape and its `check_shapes`; `fresh_recheck` writes fresh inputs into the
same buffers after timing and checks once more. The harness (`runner`)
decides when each runs.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any, Literal

from curriculum.bench import refusals
from curriculum.bench.api import Arrays, Benchmark
from curriculum.bench.backend import Backend
from curriculum.bench.suites import Case
from curriculum.results import shape_label

VersionKey = tuple[str, tuple[str, ...]]


def version_key(case: Case) -> VersionKey:
    """A version as compiled: its id and its NVRTC options."""
    bench = case.benchmark
    options = tuple(bench.compile_options) + tuple(
        bench.version_options.get(case.version.stem, ())
    )
    return (case.id, options)


@dataclass
class Checked:
    passed: bool
    rel_err: float
    messages: list[str]
    arrays: Arrays
    outputs: Arrays
    reference: Arrays
    inputs: Arrays = field(default_factory=dict)
    refused: bool = False  # failed by a check in `refusals`, not by the tolerance alone

    @property
    def status(self) -> Literal["refused", "failed"]:
        return "refused" if self.refused else "failed"


def array_module(a: Any) -> Any:
    """cupy for a CuPy array, numpy otherwise (the harness's checks run on both)."""
    if type(a).__module__.split(".", 1)[0] == "cupy":
        import cupy

        return cupy
    import numpy

    return numpy


def _is_array(a: Any) -> bool:
    return hasattr(a, "shape") and hasattr(a, "dtype")


def _size(shape: dict[str, int]) -> int:
    total = 1
    for v in shape.values():
        total *= v
    return total


class Checker:
    """The checks, with what a run remembers of them (the shapes each version passed)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        # (version, shape label) checked and passed this run; version -> its refusal, if any
        self._passed_shapes: set[tuple[VersionKey, str]] = set()
        self._other_shape_refusals: dict[VersionKey, list[str]] = {}

    def check(self, case: Case, module: Any, shape: dict[str, int] | None = None) -> Checked:
        """Fresh random inputs, poisoned outputs, one launch, then the verdict.

        The reference is computed only after the launch has synchronised, from
        float64 copies of the inputs taken before the launch: while the kernel
        runs there is no reference anywhere for it to read, and rewriting its
        inputs cannot move the answer it is checked against.
        """
        bench = case.benchmark
        shape = dict(case.shape if shape is None else shape)
        seed = secrets.randbits(63)
        inputs = bench.inputs(shape, self.backend.rng(seed))
        clash = set(inputs) & set(bench.outputs)
        if clash:
            raise RuntimeError(f"names used for both inputs and outputs: {sorted(clash)}")
        outputs = {n: self.backend.alloc_output(spec, shape) for n, spec in bench.outputs.items()}
        arrays = {**inputs, **outputs}
        kept = self.backend.upcast(inputs)
        self.backend.synchronize()  # inputs and poison in place, whatever stream the kernel uses
        bench.launch(module, case.version, shape, arrays)
        self.backend.synchronize()
        reference = bench.reference(kept, shape)
        checked = self._verdict(bench, inputs, kept, outputs, reference)
        checked.arrays = arrays
        if not checked.passed:
            checked.messages.append(f"input seed {seed}")
        return checked

    def _verdict(
        self, bench: Benchmark, inputs: Arrays, kept: Arrays, outputs: Arrays, reference: Arrays
    ) -> Checked:
        """The tolerance check, and before it the refusals of `refusals`."""
        passed, rel_err, messages = self._compare(bench, outputs, reference)
        refusal = None
        got = bench.compare(outputs) if bench.compare is not None else outputs
        for name in bench.outputs:
            ref = reference.get(name)
            if ref is None or refusal is not None:
                continue
            xp = array_module(ref)
            dtype = str(outputs[name].dtype)
            echo = refusals.echoed_input(outputs[name], inputs, xp)
            if echo is not None and refusals.off_reference(got[name], ref, xp, dtype):
                refusal = refusals.line("input-echo", f"output {name!r} is input {echo!r}")
            elif refusals.is_constant(got[name], ref, xp, dtype):
                refusal = refusals.line(
                    "constant-output",
                    f"output {name!r}: spread {float(xp.std(got[name])):.3e}, "
                    f"reference spread {float(xp.std(ref)):.3e}",
                )
        if refusal is not None or not passed:
            touched = self._modified_inputs(inputs, kept)
            if touched:
                refusal = refusals.line("inputs-modified", f"inputs {touched} changed")
        if refusal is not None:
            return Checked(False, rel_err, [refusal, *messages], {}, outputs, reference,
                            inputs, refused=True)  # fmt: skip
        return Checked(passed, rel_err, messages, {}, outputs, reference, inputs)

    def _modified_inputs(self, inputs: Arrays, kept: Arrays) -> list[str]:
        arrays = {n: a for n, a in inputs.items() if _is_array(a) and n in kept}
        now = self.backend.upcast(arrays)
        return sorted(
            n for n in arrays if not refusals.same_bits(now[n], kept[n], array_module(now[n]))
        )

    def _fresh_recheck(self, case: Case, module: Any, checked: Checked) -> Checked | None:
        """Fresh values into the same input buffers, outputs poisoned again, one
        launch, the verdict; None if it passes. An output left as it was (the
        last answer, or the poison) is refused as stale."""
        bench, shape = case.benchmark, case.shape
        seed = secrets.randbits(63)
        fresh = bench.inputs(shape, self.backend.rng(seed))
        inputs = checked.inputs
        for name, value in fresh.items():
            old = inputs.get(name)
            if _is_array(value) and old is not None and _is_array(old):
                old[...] = value
        # Inputs are copied by value into the buffers the first check used, so an input must
        # not hold device addresses of its own buffer: the copies would point into `fresh`.
        # Suites store positions as offsets (the pointer chase's chain does).
        before = {n: o.copy() for n, o in checked.outputs.items()}
        poisoned = {}
        for name, out in checked.outputs.items():
            self.backend.poison(out)
            poisoned[name] = out.copy()
        kept = self.backend.upcast(inputs)
        self.backend.synchronize()
        bench.launch(module, case.version, shape, checked.arrays)
        self.backend.synchronize()
        reference = bench.reference(kept, shape)
        again = self._verdict(bench, inputs, kept, checked.outputs, reference)
        if again.passed:
            checked.reference = reference  # what the outputs now hold
            return None
        for name, out in checked.outputs.items():
            xp = array_module(out)
            if refusals.same_bits(out, before[name], xp) or refusals.same_bits(
                out, poisoned[name], xp
            ):
                kept_as = "its last answer" if refusals.same_bits(out, before[name], xp) else (
                    "its poison (not written)"
                )
                again.messages.insert(
                    0, refusals.line("stale-output", f"output {name!r} kept {kept_as}")
                )
                again.refused = True
                break
        else:
            again.messages.insert(0, "outputs wrong on a second set of fresh inputs")
        again.messages.append(f"second input seed {seed}")
        return again

    def _other_shapes(self, case: Case, module: Any) -> list[str]:
        """Check the version, untimed, at its benchmark's smallest shape and at its
        `check_shapes`; the refusal (empty if none), once per version per run."""
        key = version_key(case)
        if key in self._other_shape_refusals:
            return self._other_shape_refusals[key]
        bench = case.benchmark
        smallest = min((dict(s) for s in bench.shapes), key=_size)
        found: list[str] = []
        for other in [smallest, *(dict(s) for s in bench.check_shapes)]:
            label = shape_label(other)
            if other == case.shape or (key, label) in self._passed_shapes:
                continue
            checked = self.check(case, module, other)
            if not checked.passed:
                found = [refusals.line("wrong-at-other-shape", f"at {label}"), *checked.messages]
                break
            self._passed_shapes.add((key, label))
        self._other_shape_refusals[key] = found
        return found

    def _compare(
        self, bench: Benchmark, outputs: Arrays, reference: Arrays
    ) -> tuple[bool, float, list[str]]:
        got = bench.compare(outputs) if bench.compare is not None else outputs
        passed, worst, messages = True, 0.0, []
        for name in bench.outputs:
            if name not in reference:
                return False, float("nan"), [f"reference returned no output {name!r}"]
            cmp = self.backend.compare(got[name], reference[name], bench.tolerance)
            if not cmp.passed:
                if passed:
                    messages.append(refusals.line("above-tolerance"))
                passed = False
                messages.append(
                    f"output {name!r}: rel err {cmp.rel_err:.3e} > tolerance {bench.tolerance:.1e}"
                )
                messages.extend(f"  {m}" for m in cmp.mismatches)
            worst = max(worst, cmp.rel_err) if cmp.rel_err == cmp.rel_err else float("nan")
        return passed, worst, messages
