"""The measured-results store: `kernels/results/<gpu-slug>.json`.

Written by `curriculum bench` on a GPU, read by the build. This module imports
nothing heavier than pydantic, because the GPU machine installs the project
with `--no-deps` and only a handful of wheels.

A results file holds *runs* (provenance and the ceilings measured in that run)
and *cases* (one kernel version at one shape). Each case names the run that
measured it, so every "% of roofline" and "% of library" is a ratio of two
numbers taken in one run.

Schema 2 records every library candidate a case was compared with (and which
won), the case's fingerprint (see `bench.staleness`), and, for
microbenchmarks, the items one launch processes. It is written a few lines a
case, raw samples as one array a line, so a re-run's diff shows what changed.
Schema 1 files are read and migrated in memory (`parse_results`).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import datetime
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

SCHEMA_VERSION = 2

CeilingName = Literal["copy", "read", "sgemm_fp32", "gemm_bf16"]

# A case may be this much faster than the floor its declared ceilings give (time at least
# (1 - CEILING_TOLERANCE) x the floor, so a throughput at most ~3.1% above a ceiling): the
# ceilings are themselves medians of one run. Faster is a measurement bug; the runner refuses
# to record it and a results file holding it fails `curriculum check`.
CEILING_TOLERANCE = 0.03

# Finite, strictly positive: every time; finite, not negative: counts, rates and errors.
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Name = Annotated[str, Field(min_length=1)]


def _close(a: float, b: float, rel: float = 1e-6) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Stat(_Strict):
    """Timing statistics of one measured launch, in milliseconds."""

    median_ms: Positive = Field(description="Median of the timed repetitions.")
    p20_ms: Positive = Field(description="20th percentile of the timed repetitions.")
    p80_ms: Positive = Field(description="80th percentile of the timed repetitions.")
    min_ms: Positive = Field(description="Fastest repetition.")
    max_ms: Positive = Field(description="Slowest repetition.")
    samples: int = Field(description="Number of timed repetitions.", ge=1)
    raw_ms: list[Positive] = Field(description="Every timed repetition, in order.")

    @model_validator(mode="after")
    def _consistent(self) -> Stat:
        order = (self.min_ms, self.p20_ms, self.median_ms, self.p80_ms, self.max_ms)
        if any(a > b for a, b in zip(order, order[1:], strict=False)):
            raise PydanticCustomError(
                "results.percentiles",
                "percentiles out of order: need min {min} <= p20 {p20} <= median {median} "
                "<= p80 {p80} <= max {max} (ms)",
                dict(zip(("min", "p20", "median", "p80", "max"), order, strict=True)),
            )
        if self.samples != len(self.raw_ms):
            raise PydanticCustomError(
                "results.samples",
                "samples is {samples} but raw_ms holds {raw} repetitions",
                {"samples": self.samples, "raw": len(self.raw_ms)},
            )
        return self


class Clocks(_Strict):
    """Clocks and throttle reasons read through NVML."""

    sm_mhz: int | None = Field(description="SM clock in MHz.")
    mem_mhz: int | None = Field(description="Memory clock in MHz.")
    throttle_reasons: list[str] = Field(
        default_factory=list, description="Active clock-throttle reasons, NVML names."
    )


class Provenance(_Strict):
    """Where and when a run was measured."""

    gpu_name: Name = Field(description="Device name as the driver reports it.")
    gpu_slug: Name = Field(description="File-name form of the GPU model, e.g. nvidia-h200.")
    sm_count: int = Field(gt=0, description="Number of streaming multiprocessors.")
    l2_bytes: int = Field(gt=0, description="L2 cache size in bytes.")
    memory_bytes: int = Field(gt=0, description="Device memory in bytes.")
    sm_clock_max_mhz: int | None = Field(description="Maximum SM clock in MHz.")
    mem_clock_max_mhz: int | None = Field(description="Maximum memory clock in MHz.")
    driver: Name = Field(description="Driver version.")
    cuda_runtime: Name = Field(description="CUDA runtime version.")
    cupy: Name = Field(description="CuPy version.")
    torch: str | None = Field(default=None, description="PyTorch version, if present.")
    date: Name = Field(description="ISO 8601 UTC timestamp of the run's start.")
    git_rev: Name = Field(description="Git revision of the project, or 'unknown'.")
    git_dirty: bool = Field(description="Whether the work tree had uncommitted changes.")

    @model_validator(mode="after")
    def _dated(self) -> Provenance:
        try:
            datetime.fromisoformat(self.date.replace("Z", "+00:00"))
        except ValueError:
            raise PydanticCustomError(
                "results.provenance", "date {date!r} is not an ISO 8601 timestamp",
                {"date": self.date},
            ) from None
        return self


class Ceiling(_Strict):
    """A ceiling of the card measured in the run: bandwidth or arithmetic rate."""

    name: CeilingName = Field(description="Which ceiling.")
    description: str = Field(description="What was run, with its shape.")
    stat: Stat = Field(description="Timing of the ceiling's operation.")
    gbps: Positive | None = Field(default=None, description="Achieved GB/s (1e9 bytes/s).")
    tflops: Positive | None = Field(default=None, description="Achieved TFLOP/s (1e12/s).")


class Run(_Strict):
    """One invocation of `curriculum bench`."""

    provenance: Provenance = Field(description="Device, software and revision.")
    ceilings: dict[str, Ceiling] = Field(description="Ceilings measured in this run.")


class Baseline(_Strict):
    """A library candidate a case is compared with, timed in the same run."""

    name: Name = Field(description="What ran, e.g. 'cuBLAS (cupy.matmul)'.")
    stat: Stat = Field(description="Timing of the library operation.")
    gbps: Positive | None = Field(default=None, description="Library GB/s by the case's byte model.")
    tflops: Positive | None = Field(default=None, description="Library TFLOP/s by the case's FLOP model.")


class UnavailableBaseline(_Strict):
    """A library candidate that could not run at the case's shape, and why."""

    name: str = Field(description="The candidate's name.")
    reason: str = Field(description="The error it raised, e.g. 'No available kernel'.")


class CaseResult(_Strict):
    """One kernel version at one shape, checked and timed."""

    id: str = Field(description="'<topic>/<version stem>', e.g. 'memory/02_copy_vec4'.")
    topic: str = Field(description="Folder under kernels/.")
    version: str = Field(description="File stem of the .cu file.")
    benchmark: str = Field(description="Name of the suite benchmark that ran it.")
    title: str = Field(description="First line of the kernel's header comment.")
    shape: dict[str, int] = Field(description="Problem shape.")
    shape_label: str = Field(description="Canonical 'k=v,k=v' label of the shape.")
    headline: bool = Field(description="Whether this is the shape pages cite by default.")
    fingerprint: str | None = Field(
        default=None,
        description="sha256 of the case's inputs: .cu, its includes, suite.py, harness version "
        "(None for cases migrated from schema 1).",
    )
    harness: int | None = Field(default=None, description="Harness version that measured it.")
    source_hash: str = Field(description="sha256 of the .cu file (see `source_hash`).")
    suite_hash: str = Field(description="sha256 of the topic's suite.py.")
    run: str = Field(description="Key of the run in `runs` that measured this case.")
    stat: Stat = Field(description="Timing of the kernel.")
    flops: NonNegative = Field(description="FLOPs by the suite's work model.")
    bytes: NonNegative = Field(description="Minimum device-memory bytes by the suite's work model.")
    gbps: NonNegative = Field(description="bytes / median time, in GB/s.")
    tflops: NonNegative = Field(description="flops / median time, in TFLOP/s.")
    items: Positive | None = Field(default=None, description="Items one launch processes.")
    items_label: str = Field(default="", description="What one item is, e.g. 'dependent loads'.")
    bandwidth_ceiling: CeilingName | None = Field(
        default=None, description="The bandwidth ceiling the benchmark declares (None: none or "
        "unknown, in cases from schema 1)."
    )
    compute_ceiling: CeilingName | None = Field(
        default=None, description="The compute ceiling the benchmark declares."
    )
    roofline_ms: Positive | None = Field(
        default=None, description="Roofline floor time from the run's ceilings (None: unbounded)."
    )
    pct_roofline: Positive | None = Field(
        default=None, description="100 * roofline floor / median time."
    )
    baselines: list[Baseline] = Field(
        default_factory=list, description="Every library candidate that ran, same run and shape."
    )
    unavailable: list[UnavailableBaseline] = Field(
        default_factory=list, description="Library candidates that could not run, with why."
    )
    library: str | None = Field(
        default=None, description="Name of the fastest candidate: what pct_library compares with."
    )
    pct_library: Positive | None = Field(
        default=None, description="100 * library time / kernel time."
    )
    rel_err: NonNegative = Field(description="||out - ref|| / ||ref|| against the float64 reference.")
    tolerance: NonNegative = Field(description="Largest accepted rel_err.")
    clocks_before: Clocks = Field(description="Clocks read before the case.")
    clocks_after: Clocks = Field(description="Clocks read after the case.")
    throttled: bool = Field(description="Whether a throttle reason other than idle was active.")
    throttle_reasons: list[str] = Field(
        default_factory=list, description="The throttle reasons seen while it was measured."
    )
    remeasured: bool = Field(
        default=False, description="Whether it was measured again after a cool-down."
    )

    @model_validator(mode="before")
    @classmethod
    def _single_baseline(cls, data: Any) -> Any:
        """Schema 1 spelling: `baseline=` one candidate, which is then also the winner."""
        if not isinstance(data, dict) or "baseline" not in data:
            return data
        data = dict(data)
        base = data.pop("baseline")
        if base is not None:
            data.setdefault("baselines", [base])
            name = base.name if isinstance(base, Baseline) else base.get("name")
            data.setdefault("library", name)
        return data

    @property
    def key(self) -> tuple[str, str]:
        return (self.id, self.shape_label)

    @property
    def baseline(self) -> Baseline | None:
        """The winning library candidate (the one `pct_library` compares with)."""
        for b in self.baselines:
            if b.name == self.library:
                return b
        return None

    @property
    def ns_per_item(self) -> float | None:
        if not self.items:
            return None
        return self.stat.median_ms * 1e6 / self.items

    @property
    def cycles_per_item(self) -> float | None:
        ns = self.ns_per_item
        mhz = self.clocks_before.sm_mhz
        if ns is None or not mhz:
            return None
        return ns * mhz / 1000.0


class ResultsFile(_Strict):
    """Everything measured on one GPU model."""

    schema_version: int = Field(default=SCHEMA_VERSION, description="Format version.")
    gpu_slug: str = Field(description="GPU model slug; also the file name.")
    runs: dict[str, Run] = Field(default_factory=dict, description="Runs by id.")
    cases: list[CaseResult] = Field(default_factory=list, description="Sorted by (id, shape).")

    def case(self, case_id: str, shape_label: str | None = None) -> CaseResult | None:
        """The case at `shape_label`, or at its headline shape when None."""
        for c in self.cases:
            if c.id == case_id and (c.shape_label == shape_label if shape_label else c.headline):
                return c
        return None

    def latest_run(self) -> Run | None:
        if not self.runs:
            return None
        return self.runs[max(self.runs)]


def shape_label(shape: dict[str, int]) -> str:
    """Canonical label: keys in declaration order, 'm=4096,n=4096,k=4096'."""
    return ",".join(f"{k}={v}" for k, v in shape.items())


def source_hash(path: Path) -> str:
    """sha256 of a source file with line endings normalised, so a checkout on
    another OS does not make every figure stale."""
    data = path.read_bytes().replace(b"\r\n", b"\n")
    return hashlib.sha256(data).hexdigest()


def migrate(data: Any) -> Any:
    """Schema 1 data as schema 2, in memory: the single `baseline` becomes the
    only candidate and the winner; the fingerprint is unknown (None)."""
    if not isinstance(data, dict) or data.get("schema_version", 1) != 1:
        return data
    out = dict(data)
    cases = []
    for case in data.get("cases", []):
        if not isinstance(case, dict):
            cases.append(case)
            continue
        c = dict(case)
        base = c.pop("baseline", None)
        c["baselines"] = [base] if base else []
        c["library"] = base.get("name") if isinstance(base, dict) else None
        cases.append(c)
    out["cases"] = cases
    out["schema_version"] = SCHEMA_VERSION
    return out


def parse_results(text: str) -> ResultsFile:
    """Parse and validate the text of a results file of any schema version
    (raises pydantic.ValidationError or ValueError)."""
    data = json.loads(text)
    if isinstance(data, dict) and data.get("schema_version", 1) > SCHEMA_VERSION:
        raise ValueError(
            f"schema_version {data['schema_version']} is newer than this reader "
            f"({SCHEMA_VERSION}); update the project"
        )
    return ResultsFile.model_validate(migrate(data))


def read_results(path: Path) -> ResultsFile:
    """Parse and validate a results file (raises pydantic.ValidationError or ValueError)."""
    return parse_results(path.read_text(encoding="utf-8"))


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# The lines of a case in the file, each a group of fields (in this order); a field not named
# here gets a line of its own. The timing of the kernel, and of each library candidate, are
# one line each, raw samples included.
CASE_LINES: tuple[tuple[str, ...], ...] = (
    ("id", "shape_label", "topic", "version", "benchmark", "headline", "shape"),
    ("title",),
    ("run", "harness", "fingerprint", "source_hash", "suite_hash"),
    ("stat",),
    ("flops", "bytes", "gbps", "tflops", "items", "items_label"),
    ("bandwidth_ceiling", "compute_ceiling", "roofline_ms", "pct_roofline"),
    ("library", "pct_library", "unavailable"),
    ("baselines",),
    ("rel_err", "tolerance"),
    ("clocks_before", "clocks_after", "throttled", "throttle_reasons", "remeasured"),
)
RUN_LINES: tuple[tuple[str, ...], ...] = (("provenance",), ("ceilings",))


def _object_lines(obj: dict[str, Any], indent: str, groups: tuple[tuple[str, ...], ...]) -> list[str]:
    """An object written a group of keys a line, values in compact JSON."""
    named = {k for g in groups for k in g}
    rows = [[k for k in g if k in obj] for g in groups] + [[k] for k in obj if k not in named]
    rows = [r for r in rows if r]
    lines = []
    for n, row in enumerate(rows):
        body = ", ".join(f"{_compact(k)}: {_compact(obj[k])}" for k in row)
        lead = "{" if n == 0 else " "
        lines.append(f"{indent}{lead}{body}" + ("," if n < len(rows) - 1 else "}"))
    return lines or [indent + "{}"]


def format_data(data: dict[str, Any]) -> str:
    """The text of a results file from its JSON data: a few lines a run and a case.

    A case takes the lines of `CASE_LINES`, opening with its id and shape label
    (what `json_lines` and a reader's eye find), so a re-run's diff shows which
    groups of fields changed, and raw samples take one line, not one a sample.
    """
    lines = ["{", f' "schema_version": {_compact(data.get("schema_version", SCHEMA_VERSION))},',
             f' "gpu_slug": {_compact(data.get("gpu_slug"))},', ' "runs": {']
    runs = data.get("runs", {})
    for i, run_id in enumerate(sorted(runs)):
        body = _object_lines(runs[run_id], "  ", RUN_LINES)
        body[0] = f"  {_compact(run_id)}: " + body[0].lstrip()
        if i < len(runs) - 1:
            body[-1] += ","
        lines.extend(body)
    lines += [" },", ' "cases": [']
    cases = data.get("cases", [])
    for i, case in enumerate(cases):
        body = _object_lines(case, "  ", CASE_LINES)
        if i < len(cases) - 1:
            body[-1] += ","
        lines.extend(body)
    lines += [" ]", "}"]
    return "\n".join(lines) + "\n"


def format_results(results: ResultsFile) -> str:
    """The file's text (see `format_data`), cases sorted by (id, shape)."""
    ordered = sorted(results.cases, key=lambda c: (c.id, c.shape_label))
    data = results.model_copy(update={"cases": ordered}).model_dump(mode="json")
    data["schema_version"] = SCHEMA_VERSION
    return format_data(data)


def write_results(path: Path, results: ResultsFile) -> None:
    """Write atomically: a temporary file in the same folder, fsync, rename.

    A reader sees the old file or the new one, never half of one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    text = format_results(results)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; results are shared data
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- validation on load: every violation, with its line ------------------------------------------


@dataclass(frozen=True)
class Violation:
    """One thing wrong in a results file: where (JSON path and line), what, and which case."""

    path: tuple[str | int, ...]
    code: str
    message: str
    line: int = 1
    case: str | None = None  # "<id> @ <shape label>" when the path is inside a case

    def text(self) -> str:
        where = ".".join(str(p) for p in self.path)
        head = f"case {self.case}: " if self.case else ""
        return f"{head}{where}: {self.message}" if where else f"{head}{self.message}"


# pydantic's error types, as the codes `curriculum check` reports.
_PYDANTIC_CODES = {
    "finite_number": "results.not-finite",
    "greater_than": "results.not-positive",
    "greater_than_equal": "results.not-positive",
    "missing": "results.missing",
    "string_too_short": "results.missing",
}


def _pydantic_violations(exc: ValidationError) -> list[Violation]:
    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        code = err["type"] if err["type"].startswith("results.") else _PYDANTIC_CODES.get(
            err["type"], "results.invalid")
        if code in ("results.missing", "results.invalid") and "provenance" in loc:
            code = "results.provenance"
        value = err.get("input")
        shown = f" (got {value!r})" if code in ("results.not-finite", "results.not-positive") \
            else ""
        out.append(Violation(loc, code, err["msg"] + shown))
    return out


def _throughput_limit(ceiling: float) -> float:
    return ceiling / (1.0 - CEILING_TOLERANCE)


def check_results(results: ResultsFile) -> list[Violation]:
    """What the models cannot see alone: each case against its run and its own numbers.

    - the run a case cites exists, and holds the ceilings the case declares;
    - no case is faster than its roofline floor by more than CEILING_TOLERANCE, i.e. its
      bandwidth and FLOP rate from the *median* stay under the run's declared ceilings
      (a kernel cannot beat the copy bandwidth or the tensor-core peak);
    - the floor follows from the run's ceilings; gbps, tflops, pct_roofline, pct_library
      follow from the median; the library named as winner is a measured candidate and the
      fastest; rel_err is within the tolerance; no (id, shape) appears twice.
    """
    found: list[Violation] = []
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(results.cases):
        def bad(field: str, code: str, message: str, i: int = i) -> None:
            found.append(Violation(("cases", i, field), code, message))

        if c.key in seen:
            bad("id", "results.duplicate", "recorded twice at this shape")
        seen.add(c.key)
        if sorted(shape_label(c.shape).split(",")) != sorted(c.shape_label.split(",")):
            bad("shape_label", "results.inconsistent",
                f"{c.shape_label!r} is not the label of its shape ({shape_label(c.shape)!r})")
        if c.rel_err > c.tolerance:
            bad("rel_err", "results.rel-err",
                f"rel_err {c.rel_err:.3g} is above the tolerance {c.tolerance:.3g}: a failed "
                "check was recorded")
        run = results.runs.get(c.run)
        if run is None:
            bad("run", "results.run-missing", f"cites run {c.run!r}, which the file does not hold")
            continue
        ms = c.stat.median_ms
        seconds = ms * 1e-3
        rate = {"gbps": c.bytes / seconds / 1e9, "tflops": c.flops / seconds / 1e12}
        for field in ("gbps", "tflops"):
            if not _close(getattr(c, field), rate[field], 1e-6) and rate[field] > 0:
                bad(field, "results.inconsistent",
                    f"{field} {getattr(c, field):.6g} does not follow from the median "
                    f"{ms:.6g} ms ({rate[field]:.6g})")
        for kind, name in (("gbps", c.bandwidth_ceiling), ("tflops", c.compute_ceiling)):
            if name is None:
                continue
            ceiling = run.ceilings.get(name)
            value = getattr(ceiling, kind) if ceiling is not None else None
            if value is None:
                bad("run", "results.run-missing",
                    f"declares the {name} ceiling, which run {c.run} did not measure")
            elif rate[kind] > _throughput_limit(value):
                unit = "GB/s" if kind == "gbps" else "TFLOP/s"
                bad("stat", "results.above-ceiling",
                    f"median {ms:.6g} ms gives {rate[kind]:,.4g} {unit}, "
                    f"{100 * (rate[kind] / value - 1):.1f}% above the run's {name} ceiling "
                    f"({value:,.4g} {unit}; tolerance {100 * CEILING_TOLERANCE:.0f}%)")
        if c.roofline_ms is not None:
            terms = _floor_terms(c, run)
            if terms and not any(_close(c.roofline_ms, t, 1e-6) for t in terms):
                bad("roofline_ms", "results.inconsistent",
                    f"floor {c.roofline_ms:.6g} ms does not follow from run {c.run}'s ceilings "
                    "and the work model")
            if ms < c.roofline_ms * (1.0 - CEILING_TOLERANCE):
                bad("stat", "results.above-ceiling",
                    f"median {ms:.6g} ms is {100 * (1 - ms / c.roofline_ms):.1f}% under the "
                    f"roofline floor {c.roofline_ms:.6g} ms (tolerance "
                    f"{100 * CEILING_TOLERANCE:.0f}%): faster than the run's ceilings allow")
            want = 100.0 * c.roofline_ms / ms
            if c.pct_roofline is None or not _close(c.pct_roofline, want, 1e-6):
                bad("pct_roofline", "results.inconsistent",
                    f"pct_roofline {c.pct_roofline} does not follow from the floor and the median "
                    f"({want:.6g})")
        elif c.pct_roofline is not None:
            bad("pct_roofline", "results.inconsistent", "pct_roofline without a roofline floor")
        names = [b.name for b in c.baselines]
        if len(set(names)) != len(names):
            bad("baselines", "results.library", "a library candidate is listed twice")
        if c.library is None:
            if c.pct_library is not None:
                bad("pct_library", "results.library", "pct_library without a winning library")
            if c.baselines:
                bad("library", "results.library", "candidates were measured but none is named "
                    "the winner")
            continue
        winner = c.baseline
        if winner is None:
            bad("library", "results.library",
                f"the winner {c.library!r} is not among the measured candidates {names}")
            continue
        fastest = min(c.baselines, key=lambda b: b.stat.median_ms)
        if fastest.stat.median_ms < winner.stat.median_ms:
            bad("library", "results.library",
                f"the winner {c.library!r} ({winner.stat.median_ms:.6g} ms) is slower than "
                f"{fastest.name!r} ({fastest.stat.median_ms:.6g} ms)")
        want = 100.0 * winner.stat.median_ms / ms
        if c.pct_library is None or not _close(c.pct_library, want, 1e-6):
            bad("pct_library", "results.inconsistent",
                f"pct_library {c.pct_library} does not follow from {c.library}'s median and "
                f"the case's ({want:.6g})")
    return found


def _floor_terms(c: CaseResult, run: Run) -> list[float]:
    """Every floor the run's ceilings could give the case: the declared one, or (for cases
    from schema 1, which did not record what they declared) each combination."""
    def bw(name: str) -> float | None:
        ceiling = run.ceilings.get(name)
        return c.bytes / (ceiling.gbps * 1e9) * 1e3 if ceiling and ceiling.gbps else None

    def cc(name: str) -> float | None:
        ceiling = run.ceilings.get(name)
        return c.flops / (ceiling.tflops * 1e12) * 1e3 if ceiling and ceiling.tflops else None

    if c.bandwidth_ceiling is not None or c.compute_ceiling is not None:
        terms = [t for t in (bw(c.bandwidth_ceiling) if c.bandwidth_ceiling else None,
                             cc(c.compute_ceiling) if c.compute_ceiling else None)
                 if t is not None]
        return [max(terms)] if terms else []
    bws = [t for t in (bw("copy"), bw("read")) if t is not None]
    ccs = [t for t in (cc("sgemm_fp32"), cc("gemm_bf16")) if t is not None]
    return bws + ccs + [max(b, x) for b in bws for x in ccs]


def json_lines(text: str) -> dict[tuple[str | int, ...], int]:
    """The line of every value in a JSON text, by its path (keys and array indices).

    A small scanner, run only when a file has something to report: the standard decoder
    keeps no positions.
    """
    lines: dict[tuple[str | int, ...], int] = {}
    newlines = [i for i, ch in enumerate(text) if ch == "\n"]

    def line_of(pos: int) -> int:
        return bisect.bisect_right(newlines, pos - 1) + 1

    ws = re.compile(r"[ \t\n\r]*")
    number = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|NaN|-?Infinity")
    literal = re.compile(r"true|false|null")

    def skip(pos: int) -> int:
        m = ws.match(text, pos)
        return m.end() if m else pos

    def value(pos: int, path: tuple[str | int, ...]) -> int:
        pos = skip(pos)
        lines.setdefault(path, line_of(pos))
        ch = text[pos:pos + 1]
        if ch == "{":
            pos = skip(pos + 1)
            if text[pos:pos + 1] == "}":
                return pos + 1
            while True:
                pos = skip(pos)
                key, pos = scanstring(text, pos + 1)
                key_line = line_of(pos)
                pos = skip(pos)
                pos = skip(pos + 1)  # the colon
                lines[(*path, key)] = key_line
                pos = skip(value(pos, (*path, key)))
                if text[pos:pos + 1] == ",":
                    pos += 1
                    continue
                return pos + 1
        if ch == "[":
            pos = skip(pos + 1)
            if text[pos:pos + 1] == "]":
                return pos + 1
            index = 0
            while True:
                pos = skip(value(pos, (*path, index)))
                index += 1
                if text[pos:pos + 1] == ",":
                    pos += 1
                    continue
                return pos + 1
        if ch == '"':
            return scanstring(text, pos + 1)[1]
        m = number.match(text, pos) or literal.match(text, pos)
        if m is None:
            raise ValueError(f"unexpected {ch!r} at line {line_of(pos)}")
        return m.end()

    value(0, ())
    return lines


def check_text(text: str) -> tuple[ResultsFile | None, list[Violation]]:
    """Parse, migrate, validate and cross-check a results file's text.

    Returns the file (None when the models refuse it) and every violation, each with
    the line of the value at fault and the case it belongs to.
    """
    data = json.loads(text)  # a syntax error raises ValueError with its own line
    if isinstance(data, dict) and data.get("schema_version", 1) > SCHEMA_VERSION:
        return None, [Violation(("schema_version",), "results.invalid",
                                f"schema_version {data['schema_version']} is newer than this "
                                f"reader ({SCHEMA_VERSION}); update the project")]
    results: ResultsFile | None
    try:
        results = ResultsFile.model_validate(migrate(data))
        found = check_results(results)
    except ValidationError as exc:
        results, found = None, _pydantic_violations(exc)
    if not found:
        return results, []
    try:
        where = json_lines(text)
    except ValueError:
        where = {}
    cases = data.get("cases") if isinstance(data, dict) else None
    located = []
    for v in found:
        line = next((where[v.path[:n]] for n in range(len(v.path), 0, -1) if v.path[:n] in where),
                    1)
        case = None
        if len(v.path) >= 2 and v.path[0] == "cases" and isinstance(v.path[1], int) \
                and isinstance(cases, list) and v.path[1] < len(cases) \
                and isinstance(cases[v.path[1]], dict):
            raw = cases[v.path[1]]
            case = f"{raw.get('id', '?')} @ {raw.get('shape_label', '?')}"
        located.append(Violation(v.path, v.code, v.message, line, case))
    located.sort(key=lambda v: v.line)
    return results, located
