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

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION = 2

CeilingName = Literal["copy", "read", "sgemm_fp32", "gemm_bf16"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Stat(_Strict):
    """Timing statistics of one measured launch, in milliseconds."""

    median_ms: float = Field(description="Median of the timed repetitions.")
    p20_ms: float = Field(description="20th percentile of the timed repetitions.")
    p80_ms: float = Field(description="80th percentile of the timed repetitions.")
    min_ms: float = Field(description="Fastest repetition.")
    max_ms: float = Field(description="Slowest repetition.")
    samples: int = Field(description="Number of timed repetitions.", ge=1)
    raw_ms: list[float] = Field(description="Every timed repetition, in order.")


class Clocks(_Strict):
    """Clocks and throttle reasons read through NVML."""

    sm_mhz: int | None = Field(description="SM clock in MHz.")
    mem_mhz: int | None = Field(description="Memory clock in MHz.")
    throttle_reasons: list[str] = Field(
        default_factory=list, description="Active clock-throttle reasons, NVML names."
    )


class Provenance(_Strict):
    """Where and when a run was measured."""

    gpu_name: str = Field(description="Device name as the driver reports it.")
    gpu_slug: str = Field(description="File-name form of the GPU model, e.g. nvidia-h200.")
    sm_count: int = Field(description="Number of streaming multiprocessors.")
    l2_bytes: int = Field(description="L2 cache size in bytes.")
    memory_bytes: int = Field(description="Device memory in bytes.")
    sm_clock_max_mhz: int | None = Field(description="Maximum SM clock in MHz.")
    mem_clock_max_mhz: int | None = Field(description="Maximum memory clock in MHz.")
    driver: str = Field(description="Driver version.")
    cuda_runtime: str = Field(description="CUDA runtime version.")
    cupy: str = Field(description="CuPy version.")
    torch: str | None = Field(default=None, description="PyTorch version, if present.")
    date: str = Field(description="ISO 8601 UTC timestamp of the run's start.")
    git_rev: str = Field(description="Git revision of the project, or 'unknown'.")
    git_dirty: bool = Field(description="Whether the work tree had uncommitted changes.")


class Ceiling(_Strict):
    """A ceiling of the card measured in the run: bandwidth or arithmetic rate."""

    name: CeilingName = Field(description="Which ceiling.")
    description: str = Field(description="What was run, with its shape.")
    stat: Stat = Field(description="Timing of the ceiling's operation.")
    gbps: float | None = Field(default=None, description="Achieved GB/s (1e9 bytes/s).")
    tflops: float | None = Field(default=None, description="Achieved TFLOP/s (1e12/s).")


class Run(_Strict):
    """One invocation of `curriculum bench`."""

    provenance: Provenance = Field(description="Device, software and revision.")
    ceilings: dict[str, Ceiling] = Field(description="Ceilings measured in this run.")


class Baseline(_Strict):
    """A library candidate a case is compared with, timed in the same run."""

    name: str = Field(description="What ran, e.g. 'cuBLAS (cupy.matmul)'.")
    stat: Stat = Field(description="Timing of the library operation.")
    gbps: float | None = Field(default=None, description="Library GB/s by the case's byte model.")
    tflops: float | None = Field(default=None, description="Library TFLOP/s by the case's FLOP model.")


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
    flops: float = Field(description="FLOPs by the suite's work model.")
    bytes: float = Field(description="Minimum device-memory bytes by the suite's work model.")
    gbps: float = Field(description="bytes / median time, in GB/s.")
    tflops: float = Field(description="flops / median time, in TFLOP/s.")
    items: float | None = Field(default=None, description="Items one launch processes.")
    items_label: str = Field(default="", description="What one item is, e.g. 'dependent loads'.")
    roofline_ms: float | None = Field(
        default=None, description="Roofline floor time from the run's ceilings (None: unbounded)."
    )
    pct_roofline: float | None = Field(
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
    pct_library: float | None = Field(default=None, description="100 * library time / kernel time.")
    rel_err: float = Field(description="||out - ref|| / ||ref|| against the float64 reference.")
    tolerance: float = Field(description="Largest accepted rel_err.")
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


def _object_lines(obj: dict[str, Any], indent: str, first: tuple[str, ...] = ()) -> list[str]:
    """An object written one key a line (values compact), keys in `first` on the opening line."""
    head = [k for k in first if k in obj]
    rest = [k for k in obj if k not in head]
    opening = ", ".join(f"{_compact(k)}: {_compact(obj[k])}" for k in head)
    lines = [indent + "{" + opening + ("," if opening and rest else "")]
    for i, k in enumerate(rest):
        lines.append(f"{indent} {_compact(k)}: {_compact(obj[k])}" + ("," if i < len(rest) - 1 else ""))
    lines.append(indent + "}")
    return lines


def format_results(results: ResultsFile) -> str:
    """The file's text: a few lines a run and a case, each line one field in compact JSON.

    Cases are sorted by (id, shape); a case opens with its id and shape label
    on one line (what `case_lines` finds), then one line a field, so a re-run's
    diff shows which fields changed, and raw samples take one line, not one
    line a sample.
    """
    ordered = sorted(results.cases, key=lambda c: (c.id, c.shape_label))
    lines = ["{", f' "schema_version": {SCHEMA_VERSION},', f' "gpu_slug": {_compact(results.gpu_slug)},']
    lines.append(' "runs": {')
    run_ids = sorted(results.runs)
    for i, run_id in enumerate(run_ids):
        run = results.runs[run_id].model_dump(mode="json")
        body = _object_lines(run, "  ")
        body[0] = f"  {_compact(run_id)}: " + body[0].lstrip()
        if i < len(run_ids) - 1:
            body[-1] += ","
        lines.extend(body)
    lines.append(" },")
    lines.append(' "cases": [')
    for i, case in enumerate(ordered):
        body = _object_lines(case.model_dump(mode="json"), "  ", first=("id", "shape_label"))
        if i < len(ordered) - 1:
            body[-1] += ","
        lines.extend(body)
    lines.append(" ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


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
