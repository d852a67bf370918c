"""Time candidate GEMM versions side by side on the GPU, then install the chosen ones.

    PYTHONPATH=src python3 scripts/gemm_explore.py [--install] [--json FILE]

A candidate is a complete drop-in replacement for one version file, kept in
scripts/gemm_variants/ while a tuning pass is under way (the folder is
removed once the choice is installed and measured) and named by the version
number and a tag (`09b.cu` stands in for kernels/gemm/09_*.cu): same kernel
entry, launch geometry and constants, so the suite's own launcher runs it. Every candidate
and every current version file of those numbers (plus the next version, for
ordering) is checked against the float64 reference at two small shapes, then
timed at 4096^3 with the project's timing function, twice, interleaved, next
to the library baseline.

With --install the choice is written over the version files, under the rules of
the second tuning pass (kernels/gemm/NOTES.md):
- 09 and 10: the fastest correct candidate that stays slower than the version
  after it (11 for 10; the chosen 09 for 08); 10 with overlap must leave 11
  ahead, so the plain one is the fallback;
- 08: the file in the tree stays unless the 08 candidate ('08old') is faster,
  or the tree's 08 is not slower than the chosen 09.
The bench then re-measures whatever changed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOPIC = ROOT / "kernels" / "gemm"
VARIANTS = Path(__file__).resolve().parent / "gemm_variants"
SIZE = 4096
CHECK_SIZES = (256, 1024)


@dataclass
class Entry:
    label: str  # "09b" for a candidate, "09" for the file in the tree
    stem: str  # the version stem whose geometry launches it
    path: Path
    rel_err: float = float("nan")
    passed: bool = False
    ms: list[float] | None = None
    note: str = ""

    @property
    def best_ms(self) -> float:
        return min(self.ms) if self.ms else float("inf")


def _load_suite() -> Any:
    from curriculum.bench.suites import load_suites

    (loaded,) = load_suites(ROOT, "gemm")
    return loaded


def _entries(versions: dict[str, Any]) -> list[Entry]:
    stems = {f"{v.number:02d}": v.stem for v in versions.values()}
    out = []
    candidates = sorted(VARIANTS.glob("*.cu"))
    numbers = sorted({p.name[:2] for p in candidates})
    extra = {f"{int(n) + 1:02d}" for n in numbers} - set(numbers)
    for number in sorted(set(numbers) | extra):
        stem = stems[number]
        out.append(Entry(number, stem, TOPIC / f"{stem}.cu"))
        out += [Entry(p.stem, stem, p) for p in candidates if p.name.startswith(number)]
    return out


def _run(entries: list[Entry], loaded: Any) -> dict[str, float]:
    from curriculum.bench.api import Version
    from curriculum.bench.cupy_backend import open_cupy_backend
    from curriculum.bench.timing import TimingPolicy

    backend = open_cupy_backend(0)
    policy = TimingPolicy(time_cap_s=2.0)
    modules: dict[str, tuple[Any, Any, Any]] = {}
    for e in entries:
        bench = loaded.claims[e.stem]
        source = e.path.read_text(encoding="utf-8")
        version = Version("gemm", TOPIC / f"{e.stem}.cu", int(e.stem[:2]), e.stem[3:], source)
        options = tuple(bench.compile_options) + tuple(bench.version_options.get(e.stem, ()))
        try:
            module = backend.compile(source, options)
            e.passed = True
            for size in CHECK_SIZES:
                shape = {"m": size, "n": size, "k": size}
                arrays = bench.inputs(shape, backend.rng(size))
                ref = bench.reference(backend.upcast(arrays), shape)["c"]
                out = backend.alloc_output(bench.outputs["c"], shape)
                bench.launch(module, version, shape, {**arrays, "c": out})
                backend.synchronize()
                cmp = backend.compare(out, ref, bench.tolerance)
                e.rel_err = max(e.rel_err, cmp.rel_err) if e.rel_err == e.rel_err else cmp.rel_err
                e.passed = e.passed and cmp.passed
            modules[e.label] = (bench, version, module)
        except Exception as exc:  # a candidate that does not build or launch is reported, not fatal
            e.passed, e.note = False, f"{type(exc).__name__}: {exc}"
        print(
            f"check {e.label:4s} ({e.path.name}): passed={e.passed} rel_err={e.rel_err:.2e} {e.note}"
        )
        backend.release()

    shape = {"m": SIZE, "n": SIZE, "k": SIZE}
    library: dict[str, float] = {}
    arrays_by_bench: dict[str, Any] = {}
    for _ in range(2):
        for e in entries:
            if not e.passed:
                continue
            bench, version, module = modules[e.label]
            if bench.name not in arrays_by_bench:
                arrays = bench.inputs(shape, backend.rng(SIZE))
                arrays["c"] = backend.alloc_output(bench.outputs["c"], shape)
                arrays_by_bench[bench.name] = arrays
            arrays = arrays_by_bench[bench.name]

            def launch(b: Any = bench, v: Any = version, m: Any = module, a: Any = arrays) -> None:
                b.launch(m, v, shape, a)

            stat = backend.time(launch, policy)
            e.ms = [*(e.ms or []), stat.median_ms]
    for name, arrays in arrays_by_bench.items():
        bench = next(b for b in loaded.suite.benchmarks if b.name == name)
        if bench.baseline is not None:
            library[name] = backend.time(bench.baseline.make(arrays, shape), policy).median_ms
    return library


def _tflops(ms: float) -> float:
    return 2.0 * SIZE**3 / (ms * 1e-3) / 1e12


def _choose(entries: list[Entry]) -> dict[str, Entry]:
    """Version number -> the entry to install (only where it differs from the tree)."""
    by = {e.label: e for e in entries}
    ok = {k: e for k, e in by.items() if e.passed and e.ms}
    chosen: dict[str, Entry] = {}

    def fastest(labels: list[str], below: float) -> Entry | None:
        pool = [ok[k] for k in labels if k in ok and ok[k].best_ms > below]
        return min(pool, key=lambda e: e.best_ms) if pool else None

    next_10 = ok["11"].best_ms * 1.01 if "11" in ok else 0.0
    pick10 = fastest(["10b", "10a"], next_10) or fastest(["10a"], 0.0)
    if pick10 is not None:
        chosen["10"] = pick10
    pick09 = fastest(["09a", "09b"], 0.0)
    if pick09 is not None:
        chosen["09"] = pick09
    t09 = pick09.best_ms if pick09 else (ok["09"].best_ms if "09" in ok else float("inf"))
    tree08, old08 = ok.get("08"), ok.get("08old")
    if old08 is not None and (
        tree08 is None or old08.best_ms < tree08.best_ms or tree08.best_ms <= t09 * 1.01
    ):
        chosen["08"] = old08
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install", action="store_true", help="copy the choices over the tree")
    parser.add_argument("--json", type=Path, help="write the table here")
    args = parser.parse_args()

    loaded = _load_suite()
    versions = {v.stem: v for v in loaded.versions}
    entries = _entries(versions)
    library = _run(entries, loaded)
    rows = []
    for e in entries:
        bench = loaded.claims[e.stem].name
        lib = library.get(bench)
        tf = _tflops(e.best_ms) if e.ms else 0.0
        pct = 100.0 * lib / e.best_ms if (lib and e.ms) else 0.0
        rows.append(
            {
                "label": e.label,
                "file": e.path.name,
                "passed": e.passed,
                "rel_err": e.rel_err,
                "ms": e.ms,
                "tflops": tf,
                "pct_library": pct,
            }
        )
        ms = ", ".join(f"{m:.4f}" for m in e.ms or [])
        print(f"{e.label:6s} {tf:7.1f} TFLOP/s {pct:6.1f}% of library  [{ms}] ms  {e.path.name}")
    for name, ms in library.items():
        print(f"library {name}: {_tflops(ms):.1f} TFLOP/s ({ms:.4f} ms)")
    chosen = _choose(entries)
    for number, e in sorted(chosen.items()):
        target = TOPIC / f"{e.stem}.cu"
        print(f"choice {number}: {e.path.name} -> {target.name}")
        if args.install and e.path != target:
            shutil.copyfile(e.path, target)
    if args.json:
        payload = {
            "rows": rows,
            "library_ms": library,
            "chosen": {k: e.path.name for k, e in chosen.items()},
        }
        args.json.write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
