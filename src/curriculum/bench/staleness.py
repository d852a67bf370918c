"""Which measured figures no longer match their sources.

A figure is stale when the `.cu` file it measured has changed (or is gone)
since the run, or when its topic's `suite.py` has (inputs, shapes, work model
or tolerance may differ). The build marks stale figures on the page and fails
under `--strict`. Imports stay at pydantic level: the build calls this on
machines without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from curriculum.results import ResultsFile, source_hash

StaleReason = Literal["source-changed", "source-missing", "suite-changed", "suite-missing"]


@dataclass(frozen=True)
class StaleCase:
    """One recorded case whose source no longer matches what was measured."""

    id: str
    shape_label: str
    reason: StaleReason
    path: Path

    def message(self) -> str:
        what = {
            "source-changed": "kernel source changed since it was measured",
            "source-missing": "kernel source no longer exists",
            "suite-changed": "suite.py changed since it was measured",
            "suite-missing": "suite.py no longer exists",
        }[self.reason]
        return f"{self.id} @ {self.shape_label}: {what} ({self.path}); re-run `curriculum bench`"


def stale_cases(root: Path, results: ResultsFile) -> list[StaleCase]:
    """Every case of `results` whose .cu or suite.py under `root/kernels` differs.

    A source change takes precedence over a suite change for the same case.
    """
    hashes: dict[Path, str | None] = {}

    def hash_of(path: Path) -> str | None:
        if path not in hashes:
            hashes[path] = source_hash(path) if path.is_file() else None
        return hashes[path]

    stale = []
    for case in results.cases:
        topic_dir = root / "kernels" / case.topic
        cu = topic_dir / f"{case.version}.cu"
        suite = topic_dir / "suite.py"
        cu_hash, suite_hash = hash_of(cu), hash_of(suite)
        if cu_hash is None:
            stale.append(StaleCase(case.id, case.shape_label, "source-missing", cu))
        elif cu_hash != case.source_hash:
            stale.append(StaleCase(case.id, case.shape_label, "source-changed", cu))
        elif suite_hash is None:
            stale.append(StaleCase(case.id, case.shape_label, "suite-missing", suite))
        elif suite_hash != case.suite_hash:
            stale.append(StaleCase(case.id, case.shape_label, "suite-changed", suite))
    return stale
