"""`curriculum bench`: check and time every kernel on this machine's GPU.

The project CLI adds `--root` and calls `configure` then `run`. Exit codes:
0 every case recorded (or up to date); 1 some case failed its check or was
refused; 2 the run could not start (no GPU, bad suite, bad options, bad
results file) and nothing was written.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from curriculum.bench.errors import BenchError
from curriculum.bench.runner import (
    COOL_DOWN_S,
    BenchOptions,
    BenchSummary,
    CaseOutcome,
    plan,
    run_bench,
)
from curriculum.bench.suites import Case, parse_shard
from curriculum.bench.timing import TimingPolicy


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the bench options (the caller adds --root)."""
    parser.add_argument("--only", metavar="PATTERN", help="glob on case ids, e.g. 'memory/*'")
    parser.add_argument(
        "--force", action="store_true", help="re-run cases whose sources are unchanged"
    )
    parser.add_argument(
        "--shard",
        metavar="I/N",
        default="0/1",
        help="run shard I of N (from 0); one process per device, all writing one file",
    )
    parser.add_argument("--list", action="store_true", help="list the cases and exit (no GPU)")
    parser.add_argument(
        "--out",
        metavar="FILE",
        type=Path,
        help="results file (default kernels/results/<gpu-slug>.json)",
    )
    parser.add_argument(
        "--time-cap",
        metavar="SECONDS",
        type=float,
        default=TimingPolicy.time_cap_s,
        help="wall-clock cap of one timing (kernel or baseline) of a case",
    )
    parser.add_argument(
        "--device",
        metavar="N",
        type=int,
        default=0,
        help="device index among CUDA_VISIBLE_DEVICES (default 0)",
    )
    parser.add_argument(
        "--small", action="store_true", help="only the smallest shape of each version"
    )
    parser.add_argument("--headline", action="store_true", help="only each headline shape")
    parser.add_argument(
        "--shape",
        metavar="GLOB",
        help="only shapes whose label matches, e.g. 'b=1,h=128,*' (labels: --list)",
    )
    parser.add_argument(
        "--check-only",
        action="store_true",
        help="correctness checks only: no ceilings, no timing, nothing written; "
        "buffers are not pooled, so a memory checker sees their bounds",
    )
    parser.add_argument(
        "--check-shapes",
        action="store_true",
        help="with --check-only: check each version at its suite's check shapes alone (the "
        "small sizes a memory or race checker gets through quickly); a suite without any is "
        "checked at its smallest shape",
    )
    parser.add_argument(
        "--cool-down",
        metavar="SECONDS",
        type=float,
        default=COOL_DOWN_S,
        help="wait this long before measuring a throttled case once more (default %(default)s)",
    )
    parser.add_argument(
        "--repeat",
        metavar="K",
        type=int,
        default=1,
        help="time each case K times and report every median (the first is recorded)",
    )


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    err = Console(stderr=True, soft_wrap=True)
    try:
        options = _options(args)
        if args.list:
            return _list(options)
        return _bench(options, args.device, err)
    except BenchError as exc:
        err.print(f"[bold red]curriculum bench:[/] {exc}", highlight=False, markup=True)
        return exc.exit_code


def _options(args: argparse.Namespace) -> BenchOptions:
    from curriculum.bench.errors import UsageError

    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    if args.time_cap <= 0:
        raise UsageError("--time-cap must be positive")
    if args.check_shapes and not args.check_only:
        raise UsageError("--check-shapes needs --check-only: check shapes are never timed")
    root = Path(getattr(args, "root", None) or Path.cwd())
    return BenchOptions(
        root=root,
        out=args.out,
        only=args.only,
        force=args.force,
        shard=parse_shard(args.shard),
        small=args.small,
        headline=args.headline,
        check_only=args.check_only,
        check_shapes=args.check_shapes,
        shape=args.shape,
        repeat=args.repeat,
        policy=TimingPolicy(time_cap_s=args.time_cap),
        cool_down_s=max(0.0, getattr(args, "cool_down", COOL_DOWN_S)),
    )


def _list(options: BenchOptions) -> int:
    cases = plan(options, listing=True)
    width = max(len(c.id) for c in cases)
    shape_width = max(len(c.shape_label) for c in cases)
    lines = [
        f"{c.id:<{width}}  {c.benchmark.name:<10}  {c.shape_label:<{shape_width}}  "
        f"{'headline' if c.headline else '        '}  {c.version.title}"
        + (f"  [expects refusal: runs only with --only {c.topic}/*]"
           if c.expected_refusal else "")
        for c in cases
    ]
    lines.append(f"{len(cases)} case(s)")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _bench(options: BenchOptions, device: int, err: Any) -> int:
    from curriculum.bench.cupy_backend import open_cupy_backend

    plan(options)  # suite errors surface before the GPU is touched
    backend = open_cupy_backend(device, pool=not options.check_only)
    handler = _log_handler(err)
    logger = logging.getLogger("curriculum.bench")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        summary = run_bench(options, backend, RichReporter(err))
    finally:
        logger.removeHandler(handler)
    _print_summary(summary, err)
    return summary.exit_code


def _log_handler(console: Any) -> logging.Handler:
    from rich.logging import RichHandler

    return RichHandler(console=console, show_time=False, show_path=False)


class RichReporter:
    """Progress bar (case, shape, ETA) and per-case lines on stderr."""

    def __init__(self, console: Any) -> None:
        self.console = console
        self._progress: Any = None
        self._task: Any = None

    def begin(self, total: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self._progress.start()
        self._task = self._progress.add_task("bench", total=total)

    def case_started(self, case: Case) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=f"{case.id} [{case.shape_label}]")

    def case_finished(self, outcome: CaseOutcome) -> None:
        self.console.print(_outcome_line(outcome), highlight=False, markup=False)
        for message in outcome.messages:
            self.console.print(f"    {message}", highlight=False, markup=False)
        if self._progress is not None:
            self._progress.advance(self._task)

    def note(self, message: str) -> None:
        self.console.print(message, highlight=False, markup=False)

    def end(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _outcome_line(o: CaseOutcome) -> str:
    expected = " (expected)" if o.case.expected_refusal and o.status in ("refused", "failed") else ""
    where = "; ".join(o.checked_at) if o.checked_at else o.case.shape_label
    head = f"{o.status:8s} {o.case.id} [{where}]{expected}"
    r = o.result
    if r is None:
        err = f" rel err {o.rel_err:.2e}" if o.rel_err is not None else ""
        return head + err
    lib = f" {r.pct_library:5.1f}% of {r.library}" if r.pct_library is not None else ""
    roof = f" {r.pct_roofline:5.1f}% of roofline" if r.pct_roofline is not None else ""
    per_item = f" {r.ns_per_item:.3g} ns/item" if r.ns_per_item is not None else ""
    line = (
        f"{head}: {r.stat.median_ms:.4f} ms (p20 {r.stat.p20_ms:.4f}, p80 {r.stat.p80_ms:.4f}, "
        f"n={r.stat.samples}) {r.gbps:.0f} GB/s{roof}{lib}{per_item} "
        f"rel err {r.rel_err:.1e}"
    )
    if len(o.repeat_medians_ms) > 1:
        meds = ", ".join(f"{m:.4f}" for m in o.repeat_medians_ms)
        spread = 100 * (max(o.repeat_medians_ms) / min(o.repeat_medians_ms) - 1)
        line += f" | repeat medians {meds} ms (spread {spread:.2f}%)"
    return line


def _print_summary(summary: BenchSummary, err: Any) -> None:
    counts: dict[str, int] = {}
    for o in summary.outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    where = f"; results in {summary.results_path}" if summary.results_path else ""
    err.print(f"bench: {parts or 'nothing to do'}{where}", highlight=False, markup=False)
    for o in summary.failed:
        err.print(
            f"  {o.status}: {o.case.id} [{o.case.shape_label}]", highlight=False, markup=False
        )
