"""The harness's answer to each way a kernel can pass a check without doing the work.

A kernel written to satisfy a harness, rather than to compute an operation,
finds the harness's blind spots. Each one below has a check and a refusal
with a stable code and text; `curriculum bench` prints `code: text` first,
then the details of the case. Pages quote the text from `REASONS` (a test
holds the quotes equal to it), so a change of wording is made here only.

| cheat | the check |
| --- | --- |
| a constant or zero output that a loose tolerance accepts | inputs are fresh random numbers whose answer varies; an output whose spread is near zero where the reference's is not is refused, whatever the tolerance |
| returning an input | an output bit-equal to an input of the same shape and type, where the reference differs from it by more than rounding, is refused |
| caching across calls | after timing, fresh values are written into the same input buffers, the outputs are poisoned again, the kernel runs once more and is checked; an output left as it was (the old answer or the poison) is refused |
| timing only the launch | events on the harness's stream bracket the launch, then synchronise; a time under the physical floor (bytes at 1.5x the same-run copy ceiling, FLOPs at 4x the fastest same-run compute ceiling) is refused as impossible |
| lower precision than asked | the reference is float64 and each benchmark states its tolerance and why; an fp32 case's tolerance is below what bf16 rounding gives |
| special-casing the timed shape | every version is also checked, untimed, at its benchmark's smallest declared shape and at each `check_shapes` entry (ragged sizes), once per run |
| reading the reference | the reference does not exist while the kernel runs: it is computed after the launch has synchronised, from float64 copies of the inputs taken before the launch; a kernel that rewrites its inputs is refused |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# code -> the text every refusal of that kind begins with.
REASONS: dict[str, str] = {
    "constant-output": (
        "the output does not vary where the reference does: a constant or zero output "
        "is refused whatever the tolerance"
    ),
    "input-echo": (
        "the output is one of the kernel's inputs, bit for bit, where the reference "
        "is not: an input returned as the answer"
    ),
    "stale-output": (
        "the output did not follow fresh inputs written into the same buffers: "
        "an answer kept from an earlier call"
    ),
    "below-physical-floor": (
        "the measured time is below what the device can do for this work: "
        "the work was not inside the timed region"
    ),
    "above-tolerance": (
        "the output is further from the float64 reference than the case's tolerance: "
        "wrong, or computed in a lower precision than the case asks for"
    ),
    "wrong-at-other-shape": (
        "the kernel is wrong at a shape it was not timed at: "
        "a special case of the timed shapes"
    ),
    "inputs-modified": (
        "the kernel wrote into its inputs: the harness computes the reference from "
        "copies taken before the launch, so the answer must follow the original inputs"
    ),
}

# A time below bytes / (this x the same-run copy ceiling) is impossible for data that
# starts in device memory (the L2 is flushed before each repetition). Measured kernels
# reach at most about 0.7x of this floor on an H200.
PHYSICAL_BANDWIDTH_FACTOR = 1.5
# A time below FLOPs / (this x the fastest same-run compute ceiling) is impossible: the
# ceilings are a bf16 GEMM and an fp32 SGEMM, and the fp8 tensor-core peak is twice the
# bf16 one (2:4 sparsity doubles it again). An fp8 microbenchmark reaches about 2.4x.
PHYSICAL_COMPUTE_FACTOR = 4.0

# An output counts as constant when its standard deviation is under this fraction of
# the reference's, for a reference whose standard deviation, relative to its root mean
# square, is at least RESOLUTION of the output's type: a reference that varies by less
# than a few units in the last place of the output can round to a constant honestly.
# bf16 travels as uint16; integer outputs (quantised codes, counters) are not judged.
CONSTANT_SPREAD = 0.01
RESOLUTION: dict[str, float] = {
    "float64": 2.0**-40,
    "float32": 2.0**-18,
    "float16": 2.0**-6,
    "uint16": 2.0**-6,
}


def line(code: str, detail: str = "") -> str:
    """The first message of a refusal: `code: text`, then the case's detail."""
    text = f"{code}: {REASONS[code]}"
    return f"{text} ({detail})" if detail else text


def code_of(message: str) -> str | None:
    """The refusal code a message begins with, if any."""
    head = message.split(":", 1)[0]
    return head if head in REASONS else None


@dataclass(frozen=True)
class Ceilings:
    """What the physical floor needs from the run's ceilings."""

    copy_gbps: float | None
    compute_tflops: float | None


def physical_floor_ms(
    flops: float, nbytes: float, flush_l2: bool, ceilings: Ceilings
) -> float | None:
    """The fastest time the device could possibly take, or None if nothing bounds it.

    Bytes count only when the L2 is flushed before each repetition: a benchmark
    that keeps its data warm may read it faster than device memory allows.
    """
    terms = []
    if flush_l2 and nbytes > 0 and ceilings.copy_gbps:
        terms.append(nbytes / (PHYSICAL_BANDWIDTH_FACTOR * ceilings.copy_gbps * 1e9) * 1e3)
    if flops > 0 and ceilings.compute_tflops:
        terms.append(flops / (PHYSICAL_COMPUTE_FACTOR * ceilings.compute_tflops * 1e12) * 1e3)
    return max(terms) if terms else None


def _std(a: Any, xp: Any) -> float:
    return float(xp.std(a.astype(xp.float64, copy=False)))


def _rms(a: Any, xp: Any) -> float:
    a = a.astype(xp.float64, copy=False)
    return float(xp.sqrt(xp.mean(a * a)))


def is_constant(got: Any, ref: Any, xp: Any, dtype: str = "float32") -> bool:
    """Whether `got` (decoded) is nearly constant where the reference varies by more
    than an output of type `dtype` (as stored) can resolve."""
    resolution = RESOLUTION.get(dtype)
    if resolution is None or int(getattr(ref, "size", 0)) < 2:
        return False
    if tuple(got.shape) != tuple(ref.shape) or not bool(xp.isfinite(got).all()):
        return False  # a wrong shape, poison or NaN: the tolerance check says so
    ref_std, ref_rms = _std(ref, xp), _rms(ref, xp)
    if not ref_std > resolution * ref_rms:
        return False
    return _std(got, xp) < CONSTANT_SPREAD * ref_std


def off_reference(got: Any, ref: Any, xp: Any, dtype: str = "float32") -> bool:
    """Whether `got` differs from the reference by more than rounding to `dtype` could."""
    resolution = RESOLUTION.get(dtype)
    if resolution is None or tuple(got.shape) != tuple(ref.shape):
        return False
    diff = float(xp.linalg.norm((got.astype(xp.float64) - ref.astype(xp.float64)).ravel()))
    norm = float(xp.linalg.norm(ref.astype(xp.float64).ravel()))
    return diff > resolution * norm


def same_bits(a: Any, b: Any, xp: Any) -> bool:
    """Bit-for-bit equality of two arrays of one shape and type (NaN equals itself)."""
    if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
        return False
    try:
        return bool(
            xp.array_equal(xp.ascontiguousarray(a).view(xp.uint8),
                           xp.ascontiguousarray(b).view(xp.uint8))
        )  # fmt: skip
    except (TypeError, ValueError, AttributeError):
        return False


def echoed_input(out: Any, inputs: dict[str, Any], xp: Any) -> str | None:
    """The name of an input that `out` equals bit for bit, if any."""
    for name, value in inputs.items():
        if hasattr(value, "shape") and hasattr(value, "dtype") and same_bits(out, value, xp):
            return name
    return None
