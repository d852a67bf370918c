"""Merging measurements into the results file, safely with several writers.

Each write takes an exclusive `flock` on a sibling `<file>.lock`, re-reads
the file, merges this writer's run and cases into it, and writes it with
`write_results` (temporary file, fsync, rename). Two shards writing the same
file therefore never drop each other's cases, and a crash mid-write leaves
the previous file whole.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import ValidationError

from curriculum.bench.errors import ResultsFileError
from curriculum.results import CaseResult, ResultsFile, Run, read_results, write_results


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of a results file for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path(path), "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def load_existing(path: Path, gpu_slug: str) -> ResultsFile:
    """The file's contents, or an empty file for this GPU; a bad file is an error."""
    if not path.exists():
        return ResultsFile(gpu_slug=gpu_slug)
    try:
        results = read_results(path)
    except (ValidationError, ValueError) as exc:
        raise ResultsFileError(
            f"{path}: not a valid results file ({exc.__class__.__name__}); "
            "move it aside or fix it, nothing was overwritten"
        ) from exc
    if results.gpu_slug != gpu_slug:
        raise ResultsFileError(
            f"{path}: holds results of {results.gpu_slug!r}, this device is {gpu_slug!r}; "
            "use --out for another file"
        )
    return results


def merge(
    results: ResultsFile,
    run_id: str,
    run: Run,
    cases: list[CaseResult],
) -> ResultsFile:
    """Add a run and replace cases with the same (id, shape); drop runs no case cites.

    The run being written is always kept, so its ceilings are readable even
    before its first case lands.
    """
    replaced = {c.key for c in cases}
    kept = [c for c in results.cases if c.key not in replaced]
    merged_cases = kept + list(cases)
    runs = dict(results.runs)
    runs[run_id] = run
    cited = {c.run for c in merged_cases} | {run_id}
    runs = {k: v for k, v in runs.items() if k in cited}
    return results.model_copy(update={"runs": runs, "cases": merged_cases})


def record(
    path: Path,
    gpu_slug: str,
    run_id: str,
    run: Run,
    cases: list[CaseResult] | None = None,
) -> ResultsFile:
    """Merge this run (and any cases) into the file under its lock; returns what was written."""
    with locked(path):
        current = load_existing(path, gpu_slug)
        merged = merge(current, run_id, run, cases or [])
        write_results(path, merged)
    return merged


def read_locked(path: Path, gpu_slug: str) -> ResultsFile:
    with locked(path):
        return load_existing(path, gpu_slug)
