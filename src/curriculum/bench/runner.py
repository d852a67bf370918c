"""The harness: check every case, then time it, then record it.

For each case (one version at one shape), in this order:

1. compile the version (once per run) with NVRTC, or import it, for a version
   written in Python (`NN_name.py`);
2. check: fresh random inputs, outputs poisoned, one launch, every output
   against its float64 reference by ||out-ref||/||ref||; a failure lists the
   first mismatching elements and the case is not timed;
   the same check runs, untimed, at the benchmark's smallest shape and at its
   `check_shapes` (once per version per run); the checks that refuse the
   ways a kernel can pass without doing the work are in `refusals`;
3. time the kernel with the project's one timing function, then check the
   outputs again (a kernel that only works once, e.g. atomics into an output
   nobody resets, fails here); then write fresh inputs into the same buffers,
   poison the outputs, launch once more and check again (a kernel that keeps
   an answer between calls is refused here);
4. time every library candidate at the same shape (once per benchmark and
   shape per run); a candidate that raises is recorded as unavailable, with
   the reason; the fastest one that ran is the case's library figure;
5. if the clocks were held down (power or thermal throttling) before or
   after, wait `cool_down_s`, then time the kernel once more and record that
   measurement, flagged `remeasured` (and `throttled` with its reasons if the
   clocks were held down again);
6. place the time against the physical floor (`refusals.physical_floor_ms`):
   under it, the work was not timed and the case is refused; then against the
   floor from this run's ceilings: a time more than 3% under it is a
   measurement bug and is refused (a benchmark that no ceiling bounds has no
   floor and no % of roofline);
7. merge the case into the results file, atomically, under the file lock.

A failed or refused case is reported and never recorded; the run goes on and
its exit code is 1 at the end. A suite declared `expected_refusal` (cheating
kernels) runs only when `--only` names its topic; none of its cases is ever
recorded, and one that every check lets through is `not-refused`, a failure.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from curriculum.bench import refusals, store
from curriculum.bench.api import Arrays, Benchmark, LibraryBaseline, Roofline
from curriculum.bench.backend import Backend, DeviceInfo
from curriculum.bench.checks import Checked, Checker, version_key
from curriculum.bench.errors import UsageError
from curriculum.bench.nvml import is_throttled
from curriculum.bench.staleness import HARNESS_VERSION, Fingerprints, stale_reason
from curriculum.bench.suites import (
    Case,
    import_python_version,
    load_suites,
    plan_cases,
    select_cases,
    shard_cases,
    topic_globs_of,
)
from curriculum.bench.timing import TimingPolicy
from curriculum.results import (
    CEILING_TOLERANCE,
    Baseline,
    CaseResult,
    Ceiling,
    Provenance,
    ResultsFile,
    Run,
    Stat,
    UnavailableBaseline,
    shape_label,
)

# A time this far under the roofline floor is a measurement bug, not a fast kernel
# (the same tolerance the results file is checked with on load).
FLOOR_SLACK = CEILING_TOLERANCE

# Seconds to let a throttled card cool before a case is measured again.
COOL_DOWN_S = 5.0

Status = Literal["recorded", "checked", "failed", "refused", "skipped", "not-refused"]


@dataclass(frozen=True)
class BenchOptions:
    root: Path
    out: Path | None = None
    only: str | None = None
    force: bool = False
    shard: tuple[int, int] = (0, 1)
    small: bool = False
    headline: bool = False
    check_only: bool = False
    check_shapes: bool = False  # with check_only: each version at its suite's check shapes
    shape: str | None = None  # glob on the shape label, e.g. 'b=1,h=128,*'
    repeat: int = 1
    policy: TimingPolicy = field(default_factory=TimingPolicy)
    cool_down_s: float = COOL_DOWN_S


@dataclass
class CaseOutcome:
    case: Case
    status: Status
    result: CaseResult | None = None
    rel_err: float | None = None
    messages: list[str] = field(default_factory=list)
    repeat_medians_ms: list[float] = field(default_factory=list)
    checked_at: list[str] = field(default_factory=list)  # shapes checked, when not the case's


@dataclass
class BenchSummary:
    results_path: Path | None
    outcomes: list[CaseOutcome] = field(default_factory=list)
    ceilings: dict[str, Ceiling] = field(default_factory=dict)

    @property
    def failed(self) -> list[CaseOutcome]:
        """Outcomes that make the run fail: a failed or refused case, except in a
        suite that expects refusals, where only a case let through fails."""
        return [
            o
            for o in self.outcomes
            if o.status == "not-refused"
            or (o.status in ("failed", "refused") and not o.case.expected_refusal)
        ]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0


class Reporter(Protocol):
    """Where the harness tells the terminal what happens (the CLI owns it)."""

    def begin(self, total: int) -> None: ...

    def case_started(self, case: Case) -> None: ...

    def case_finished(self, outcome: CaseOutcome) -> None: ...

    def note(self, message: str) -> None: ...

    def end(self) -> None: ...


class SilentReporter:
    def begin(self, total: int) -> None: ...

    def case_started(self, case: Case) -> None: ...

    def case_finished(self, outcome: CaseOutcome) -> None: ...

    def note(self, message: str) -> None: ...

    def end(self) -> None: ...


def plan(options: BenchOptions, listing: bool = False) -> list[Case]:
    """The cases this invocation is responsible for, before skipping up-to-date ones.

    A suite that expects refusals is left out unless `--only` names its topic
    exactly (`cheats/*`); a listing shows it always.
    """
    topic_globs = topic_globs_of(options.only)
    suites = [
        s
        for s in load_suites(options.root, topic_globs)
        if listing or not s.suite.expected_refusal or s.suite.topic in topic_globs
    ]
    small = options.small or options.check_shapes  # one case a version is enough
    cases = select_cases(plan_cases(suites), options.only, small, options.headline, options.shape)
    if not cases:
        what = f"--only {options.only!r}" if options.only else "kernels/"
        what += f" at --shape {options.shape!r}" if options.shape else ""
        raise UsageError(f"no case matches {what}")
    return shard_cases(cases, *options.shard)


def default_results_path(root: Path, slug: str) -> Path:
    return root / "kernels" / "results" / f"{slug}.json"


def is_up_to_date(results: ResultsFile, case: Case, fingerprints: Fingerprints) -> bool:
    """Whether the recorded case is fresh by the one staleness rule (`stale_reason`,
    which the build also uses) and carries a fingerprint (schema 1 cases do not:
    they are measured again, with every library candidate)."""
    done = results.case(case.id, case.shape_label)
    return (
        done is not None
        and done.fingerprint is not None
        and stale_reason(fingerprints, done) is None
    )


def run_bench(options: BenchOptions, backend: Backend, reporter: Reporter) -> BenchSummary:
    cases = plan(options)
    info = backend.device()
    if options.check_only:
        return _check_only(cases, backend, reporter, options.check_shapes)
    path = options.out or default_results_path(options.root, info.slug)
    summary = BenchSummary(results_path=path)
    existing = store.read_locked(path, info.slug)
    fingerprints = Fingerprints(options.root)
    todo = []
    for case in cases:
        if not options.force and is_up_to_date(existing, case, fingerprints):
            summary.outcomes.append(CaseOutcome(case=case, status="skipped"))
        else:
            todo.append(case)
    skipped = len(cases) - len(todo)
    if skipped:
        reporter.note(f"{skipped} case(s) up to date in {path}; --force re-runs them")
    if not todo:
        return summary

    run_id, run = _start_run(options, backend, info, reporter)
    summary.ceilings = dict(run.ceilings)
    # A run of cheating kernels records nothing, not even the run: no case of it is kept.
    recording = not all(c.expected_refusal for c in todo)
    if recording:
        store.record(path, info.slug, run_id, run)
    else:
        summary.results_path = None
    reporter.begin(len(todo))
    harness = _Harness(backend, options.policy, run_id, run, cool_down_s=options.cool_down_s)
    try:
        for case in todo:
            reporter.case_started(case)
            outcome = expected_refusal_outcome(harness.run_case(case, options.repeat))
            if outcome.result is not None:
                store.record(path, info.slug, run_id, run, [outcome.result])
            summary.outcomes.append(outcome)
            reporter.case_finished(outcome)
    finally:
        reporter.end()
    return summary


def _check_only(
    cases: list[Case], backend: Backend, reporter: Reporter, check_shapes: bool = False
) -> BenchSummary:
    summary = BenchSummary(results_path=None)
    harness = _Harness(backend, TimingPolicy(), run_id="", run=None)
    check = harness.check_shapes_only if check_shapes else harness.check_only
    reporter.begin(len(cases))
    try:
        for case in cases:
            reporter.case_started(case)
            outcome = expected_refusal_outcome(check(case))
            summary.outcomes.append(outcome)
            reporter.case_finished(outcome)
    finally:
        reporter.end()
    return summary


def expected_refusal_outcome(outcome: CaseOutcome) -> CaseOutcome:
    """A case of a suite that expects refusals is never recorded; one let through
    is `not-refused`."""
    if not outcome.case.expected_refusal or outcome.status not in ("recorded", "checked"):
        return outcome
    return CaseOutcome(
        outcome.case,
        "not-refused",
        rel_err=outcome.rel_err,
        messages=["expected a refusal: every check let this kernel through", *outcome.messages],
        repeat_medians_ms=outcome.repeat_medians_ms,
    )


def _start_run(
    options: BenchOptions, backend: Backend, info: DeviceInfo, reporter: Reporter
) -> tuple[str, Run]:
    now = datetime.now(UTC).replace(microsecond=0)
    run_id = f"{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}"
    rev, dirty = git_state(options.root)
    provenance = Provenance(
        gpu_name=info.name,
        gpu_slug=info.slug,
        sm_count=info.sm_count,
        l2_bytes=info.l2_bytes,
        memory_bytes=info.memory_bytes,
        sm_clock_max_mhz=info.sm_clock_max_mhz,
        mem_clock_max_mhz=info.mem_clock_max_mhz,
        driver=info.driver,
        cuda_runtime=info.cuda_runtime,
        cupy=info.cupy,
        torch=info.torch,
        date=now.isoformat().replace("+00:00", "Z"),
        git_rev=rev,
        git_dirty=dirty,
    )
    reporter.note(f"measuring the ceilings of {info.name} ...")
    ceilings = backend.ceilings(options.policy)
    for c in ceilings.values():
        rate = f"{c.gbps:.0f} GB/s" if c.gbps is not None else f"{c.tflops:.1f} TFLOP/s"
        reporter.note(f"ceiling {c.name}: {rate} ({c.description})")
    return run_id, Run(provenance=provenance, ceilings=ceilings)


def git_state(root: Path) -> tuple[str, bool]:
    """(revision, dirty); CURRICULUM_GIT_REV/CURRICULUM_GIT_DIRTY override, for
    machines that receive the tree without its .git folder."""
    rev = os.environ.get("CURRICULUM_GIT_REV")
    dirty_env = os.environ.get("CURRICULUM_GIT_DIRTY")
    if rev:
        return rev, dirty_env not in (None, "", "0", "false")
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown", True
    return out.stdout.strip() or "unknown", bool(status.stdout.strip())


def roofline_floor_ms(
    roofline: Roofline, flops: float, nbytes: float, ceilings: dict[str, Ceiling]
) -> tuple[float | None, list[str]]:
    """max(bytes / bandwidth, flops / compute) in ms; also the ceilings that were missing."""
    terms, missing = [], []
    if roofline.bandwidth is not None:
        bw = ceilings.get(roofline.bandwidth)
        if bw is None or not bw.gbps:
            missing.append(roofline.bandwidth)
        else:
            terms.append(nbytes / (bw.gbps * 1e9) * 1e3)
    if roofline.compute is not None:
        cc = ceilings.get(roofline.compute)
        if cc is None or not cc.tflops:
            missing.append(roofline.compute)
        else:
            terms.append(flops / (cc.tflops * 1e12) * 1e3)
    return (max(terms) if terms else None), missing


class _Harness(Checker):
    """Per-run state: compiled modules and baseline timings shared across cases."""

    def __init__(
        self,
        backend: Backend,
        policy: TimingPolicy,
        run_id: str,
        run: Run | None,
        cool_down_s: float = COOL_DOWN_S,
        sleep: Callable[[float], None] = time.sleep,
    ):
        super().__init__(backend)
        self.policy = policy
        self.run_id = run_id
        self.run = run
        self.cool_down_s = cool_down_s
        self.sleep = sleep
        self._modules: dict[tuple[str, tuple[str, ...]], Any] = {}
        self._compile_errors: dict[tuple[str, tuple[str, ...]], str] = {}
        self._candidates: dict[tuple[str, str, str], Baseline | UnavailableBaseline] = {}

    def _module(self, case: Case) -> Any:
        key = version_key(case)
        options = key[1]
        if key in self._compile_errors:
            raise RuntimeError(self._compile_errors[key])
        if key not in self._modules:
            python = case.version.language == "python"
            try:
                if python:
                    self._modules[key] = import_python_version(case.version)
                else:
                    self._modules[key] = self.backend.compile(case.version.source, options)
            except Exception as exc:
                if python:  # the error names the file, "import failed" and the cause
                    message = str(exc)
                else:
                    message = f"compile failed ({' '.join(options)}): {type(exc).__name__}: {exc}"
                self._compile_errors[key] = message
                raise RuntimeError(message) from exc
        return self._modules[key]

    def _check_all_shapes(self, case: Case, module: Any) -> tuple[Checked, CaseOutcome | None]:
        """Check the case, then the version at the shapes it is not timed at; the outcome is
        set when either fails, and the check's arrays are kept for timing otherwise."""
        checked = self.check(case, module)
        if not checked.passed:
            return checked, CaseOutcome(
                case, checked.status, rel_err=checked.rel_err, messages=checked.messages
            )
        self._passed_shapes.add((version_key(case), case.shape_label))
        other = self._other_shapes(case, module)
        if other:
            return checked, CaseOutcome(case, "refused", rel_err=checked.rel_err, messages=other)
        return checked, None

    def check_only(self, case: Case) -> CaseOutcome:
        try:
            module = self._module(case)
            checked, refused = self._check_all_shapes(case, module)
            if refused is not None:
                return refused
            again = self._fresh_recheck(case, module, checked)
            if again is not None:
                return CaseOutcome(
                    case, again.status, rel_err=again.rel_err, messages=again.messages
                )
        except Exception as exc:
            return CaseOutcome(case, "failed", messages=[f"{type(exc).__name__}: {exc}"])
        finally:
            self.backend.release()
        return CaseOutcome(case, "checked", rel_err=checked.rel_err)

    def check_shapes_only(self, case: Case) -> CaseOutcome:
        """Check the version at its suite's check shapes (at the case's shape if it declares
        none), each on fresh inputs; nothing else runs, so a sanitizer sees small launches."""
        shapes = [dict(s) for s in case.benchmark.check_shapes] or [dict(case.shape)]
        labels = [shape_label(s) for s in shapes]
        worst = 0.0
        try:
            module = self._module(case)
            for shape, label in zip(shapes, labels, strict=True):
                checked = self.check(case, module, shape)
                if not checked.passed:
                    where = refusals.line("wrong-at-other-shape", f"at {label}")
                    return CaseOutcome(case, checked.status, rel_err=checked.rel_err,
                                       messages=[where, *checked.messages], checked_at=[label])
                worst = max(worst, checked.rel_err)
        except Exception as exc:
            return CaseOutcome(case, "failed", messages=[f"{type(exc).__name__}: {exc}"],
                               checked_at=labels)
        finally:
            self.backend.release()
        return CaseOutcome(case, "checked", rel_err=worst, checked_at=labels)

    def run_case(self, case: Case, repeat: int = 1) -> CaseOutcome:
        try:
            return self._run_case(case, repeat)
        except Exception as exc:
            return CaseOutcome(case, "failed", messages=[f"{type(exc).__name__}: {exc}"])
        finally:
            self.backend.release()

    def _run_case(self, case: Case, repeat: int) -> CaseOutcome:
        assert self.run is not None
        bench, shape = case.benchmark, case.shape
        clocks_before = self.backend.clocks()
        module = self._module(case)
        checked, refused = self._check_all_shapes(case, module)
        if refused is not None:
            return refused

        def launch() -> None:
            bench.launch(module, case.version, shape, checked.arrays)

        def timed() -> tuple[list[Stat], CaseOutcome | None, float]:
            stats = [self._time(bench, launch) for _ in range(max(1, repeat))]
            self.backend.synchronize()
            ok, rel, messages = self._compare(bench, checked.outputs, checked.reference)
            if not ok:
                messages.insert(
                    0, "outputs wrong after the timed launches (state kept between launches?)"
                )
                return stats, CaseOutcome(case, "failed", rel_err=rel, messages=messages), rel
            again = self._fresh_recheck(case, module, checked)
            if again is not None:
                outcome = CaseOutcome(
                    case, again.status, rel_err=again.rel_err, messages=again.messages
                )
                return stats, outcome, again.rel_err
            return stats, None, rel

        stats, failed, rel_after = timed()
        if failed is not None:
            return failed
        measured, unavailable = self._library(case, checked.arrays)
        winner = min(measured, key=lambda b: b.stat.median_ms) if measured else None
        clocks_after = self.backend.clocks()
        notes: list[str] = []
        remeasured = False
        if is_throttled(clocks_before, clocks_after):
            first = ", ".join(throttle_reasons(clocks_before, clocks_after))
            self.sleep(self.cool_down_s)
            clocks_before = self.backend.clocks()
            stats, failed, rel_after = timed()
            if failed is not None:
                return failed
            clocks_after = self.backend.clocks()
            remeasured = True
            again = is_throttled(clocks_before, clocks_after)
            notes.append(
                f"clocks throttled ({first}): measured again after {self.cool_down_s:g} s "
                + ("and still throttled" if again else "with clean clocks")
            )
        stat = stats[0]

        flops, nbytes = float(bench.flops(shape)), float(bench.bytes(shape))
        ms = stat.median_ms
        floor, missing = roofline_floor_ms(bench.roofline, flops, nbytes, self.run.ceilings)
        medians = [s.median_ms for s in stats]
        physical = refusals.physical_floor_ms(
            flops, nbytes, bench.flush_l2, run_ceilings(self.run.ceilings)
        )
        if physical is not None and ms < physical:
            return CaseOutcome(
                case,
                "refused",
                rel_err=checked.rel_err,
                repeat_medians_ms=medians,
                messages=[
                    refusals.line(
                        "below-physical-floor",
                        f"median {ms:.4f} ms, physical floor {physical:.4f} ms",
                    )
                ],
            )
        if floor is None and bench.bounded:
            return CaseOutcome(
                case, "failed", messages=[f"no roofline: ceiling(s) {missing} not measured"]
            )
        if floor is not None and ms < floor * (1.0 - FLOOR_SLACK):
            return CaseOutcome(
                case,
                "refused",
                rel_err=checked.rel_err,
                repeat_medians_ms=medians,
                messages=[
                    f"median {ms:.4f} ms is {100 * (1 - ms / floor):.1f}% under the roofline "
                    f"floor {floor:.4f} ms: a measurement bug (byte or FLOP count too high, "
                    "data served from cache, or a kernel doing less work); not recorded"
                ],
            )
        if missing:
            notes.append(f"ceiling(s) {missing} not measured; floor from the others")
        notes.extend(f"library candidate {u.name} unavailable: {u.reason}" for u in unavailable)
        throttled = is_throttled(clocks_before, clocks_after)
        reasons = throttle_reasons(clocks_before, clocks_after) if throttled else []
        if throttled and not remeasured:
            notes.append(f"clocks throttled: {', '.join(reasons)}")
        items = float(bench.items(shape)) if bench.items is not None else None
        result = CaseResult(
            id=case.id,
            topic=case.topic,
            version=case.version.stem,
            benchmark=bench.name,
            title=case.version.title,
            shape=dict(shape),
            shape_label=case.shape_label,
            headline=case.headline,
            fingerprint=case.fingerprint or None,
            harness=HARNESS_VERSION,
            source_hash=case.source_hash,
            suite_hash=case.suite_hash,
            run=self.run_id,
            stat=stat,
            flops=flops,
            bytes=nbytes,
            gbps=nbytes / (ms * 1e-3) / 1e9,
            tflops=flops / (ms * 1e-3) / 1e12,
            items=items,
            items_label=bench.items_label if items is not None else "",
            # the ceilings the floor was taken from (a declared one not measured is left out)
            bandwidth_ceiling=bench.roofline.bandwidth if bench.roofline.bandwidth not in missing
            else None,
            compute_ceiling=bench.roofline.compute if bench.roofline.compute not in missing
            else None,
            roofline_ms=floor,
            pct_roofline=100.0 * floor / ms if floor is not None else None,
            baselines=measured,
            unavailable=unavailable,
            library=winner.name if winner else None,
            pct_library=100.0 * winner.stat.median_ms / ms if winner else None,
            rel_err=max(checked.rel_err, rel_after),
            tolerance=bench.tolerance,
            clocks_before=clocks_before,
            clocks_after=clocks_after,
            throttled=throttled,
            throttle_reasons=reasons,
            remeasured=remeasured,
        )
        return CaseOutcome(
            case,
            "recorded",
            result=result,
            rel_err=result.rel_err,
            messages=notes,
            repeat_medians_ms=medians,
        )

    def _time(self, bench: Benchmark, fn: Callable[[], None]) -> Stat:
        if bench.flush_l2:
            return self.backend.time(fn, self.policy)
        return self.backend.time(fn, self.policy, flush_l2=False)

    def _library(
        self, case: Case, arrays: Arrays
    ) -> tuple[list[Baseline], list[UnavailableBaseline]]:
        """Every library candidate of the case's benchmark at its shape, timed once a run."""
        measured: list[Baseline] = []
        unavailable: list[UnavailableBaseline] = []
        for candidate in case.benchmark.candidates:
            key = (case.benchmark.name, case.shape_label, candidate.name)
            if key not in self._candidates:
                self._candidates[key] = self._time_candidate(case, candidate, arrays)
            got = self._candidates[key]
            if isinstance(got, Baseline):
                measured.append(got)
            else:
                unavailable.append(got)
        return measured, unavailable

    def _time_candidate(
        self, case: Case, candidate: LibraryBaseline, arrays: Arrays
    ) -> Baseline | UnavailableBaseline:
        bench = case.benchmark
        try:
            fn: Callable[[], None] = candidate.make(arrays, case.shape)
            stat: Stat = self._time(bench, fn)
            self.backend.synchronize()
        except Exception as exc:  # a backend that refuses the shape, a missing library
            with contextlib.suppress(Exception):  # a failed device: the case's checks say
                self.backend.synchronize()
            reason = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
            return UnavailableBaseline(name=candidate.name, reason=reason)
        seconds = stat.median_ms * 1e-3
        flops, nbytes = float(bench.flops(case.shape)), float(bench.bytes(case.shape))
        return Baseline(
            name=candidate.name,
            stat=stat,
            gbps=nbytes / seconds / 1e9 if nbytes else None,
            tflops=flops / seconds / 1e12 if flops else None,
        )


def run_ceilings(ceilings: dict[str, Ceiling]) -> refusals.Ceilings:
    """The copy bandwidth and the fastest compute rate this run measured."""
    copy = ceilings.get("copy")
    rates = [c.tflops for c in ceilings.values() if c.tflops]
    return refusals.Ceilings(
        copy_gbps=copy.gbps if copy is not None else None,
        compute_tflops=max(rates) if rates else None,
    )


def throttle_reasons(*clocks: Any) -> list[str]:
    """Every throttle reason of the readings that means the clocks were held down."""
    from curriculum.bench.nvml import BENIGN_REASONS

    found: set[str] = set()
    for c in clocks:
        found |= set(c.throttle_reasons) - BENIGN_REASONS
    return sorted(found)
