"""Merge results files of one GPU model into kernels/results/<gpu>.json.

    python scripts/merge_results.py OTHER/nvidia-h200.json [...]

For each (case, shape) the case from the newer run wins; runs no case cites
are dropped except the newest. Used when several machines with the same GPU
model each ran part of the suites (`curriculum bench --only ...`) and each
brought back its own copy of the file.
"""

from __future__ import annotations

import sys
from pathlib import Path

from curriculum.results import ResultsFile, read_results, write_results


def merge_files(target: Path, sources: list[Path]) -> ResultsFile:
    files = [read_results(p) for p in ([target] if target.is_file() else []) + sources]
    slugs = {f.gpu_slug for f in files}
    if len(slugs) != 1:
        raise SystemExit(f"refusing to merge results of different GPUs: {sorted(slugs)}")
    runs = {k: v for f in files for k, v in f.runs.items()}
    cases = {}
    for f in files:
        for c in f.cases:
            if c.key not in cases or c.run >= cases[c.key].run:
                cases[c.key] = c
    cited = {c.run for c in cases.values()} | {max(runs)}
    merged = ResultsFile(gpu_slug=slugs.pop(), runs={k: v for k, v in runs.items() if k in cited},
                         cases=list(cases.values()))
    write_results(target, merged)
    return merged


if __name__ == "__main__":
    sources = [Path(p) for p in sys.argv[1:]]
    if not sources:
        raise SystemExit(__doc__)
    slug = read_results(sources[0]).gpu_slug
    result = merge_files(Path("kernels/results") / f"{slug}.json", sources)
    print(f"{len(result.cases)} cases, {len(result.runs)} runs")
