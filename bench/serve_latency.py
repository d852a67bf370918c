"""Edit-to-reload latency of `curriculum serve` on a large corpus.

Generates the same seeded corpus as bench/build_speed.py (one course of N
capsules), starts the live server on it in this process, and measures the time
from a file write to the moment a waiting client (the long-poll every open page
holds) is told that the rebuilt page is ready, in three series:

- isolated: one sentence appended to a random capsule, after the previous
  edit's indexes are made (the first edit warms up and is not counted);
- back to back: the same, each edit saved as soon as the previous one was
  reported, as an author saving again and again does;
- course.yaml: the course description edited (the course page and home
  change), and a part title edited (every capsule page's sidebar changes).

    python bench/serve_latency.py                    # 1,000 capsules, 9 + 6 edits
    python bench/serve_latency.py --capsules 200 --edits 5 --json latency.json

The watcher waits `--step-ms` of quiet after a change before it rebuilds
(editors write a file in several steps); that wait is part of the figure.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_speed import COURSE, generate  # noqa: E402


def _wait(url: str, version: int, box: dict[str, Any]) -> None:
    with urllib.request.urlopen(f"{url}__curriculum/wait?v={version}&timeout=60") as reply:
        box["news"] = json.loads(reply.read())
    box["at"] = time.perf_counter()


def _timed_edit(server: Any, updates: list[Any], target: Path, change: Callable[[str], str],
                page: str) -> dict[str, Any]:
    """Write `change(text)` to `target`; time the write to the waiting client's reply."""
    box: dict[str, Any] = {}
    waiter = threading.Thread(target=_wait, args=(server.url, server.site.version, box))
    waiter.start()
    time.sleep(0.05)  # the waiter is parked on the server
    text = target.read_text(encoding="utf-8")
    wrote = time.perf_counter()
    target.write_text(change(text), encoding="utf-8")
    waiter.join(timeout=120)
    if "at" not in box:
        raise SystemExit(f"no notification for an edit of {target.name} within 120 s")
    news = box["news"]
    update = next((u for u in reversed(updates)
                   if u.version == news["version"] and not u.indexed), None)
    return {"file": target.name, "ms": round((box["at"] - wrote) * 1000, 1),
            "rebuild_ms": round(update.seconds * 1000, 1) if update else None,
            "units": len(update.rebuilt) if update else None,
            "full": update.full if update else None,
            "page_changed": page in news["changed"], "errors": len(news["errors"])}


def _summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    ms = [s["ms"] for s in samples]
    q = statistics.quantiles(ms, n=5) if len(ms) > 1 else [ms[0]] * 4
    return {"median_ms": statistics.median(ms), "p20_ms": round(q[0], 1),
            "p80_ms": round(q[3], 1), "max_ms": max(ms), "samples": samples}


def measure_edits(root: Path, edits: int, back_to_back: int, step_ms: int, seed: int = 7
                  ) -> dict[str, Any]:
    from curriculum.serve import Server

    updates: list[Any] = []
    server = Server(root, REPO / "templates", "member", port=0, log=updates.append,
                    step_ms=step_ms)
    started = time.perf_counter()
    first = server.start()
    initial = time.perf_counter() - started
    if not first.ok:
        server.stop()
        raise SystemExit("the corpus did not build: " +
                         "; ".join(d.format() for d in first.diagnostics[:5]))
    capsules = sorted((root / "content" / "courses" / COURSE / "capsules").glob("*.md"))
    rng = random.Random(seed)
    indexer = server.site.indexer
    assert indexer is not None

    def capsule_edit(i: int) -> dict[str, Any]:
        target = rng.choice(capsules)
        return _timed_edit(server, updates, target, lambda text: text +
                           f"\nOne more measured sentence about warp {i} and its loads.\n",
                           f"courses/{COURSE}/{target.stem}/index.html")

    try:
        isolated = []
        for i in range(edits + 1):  # the first edit warms the watcher up and is not counted
            indexer.idle(timeout=120)
            time.sleep(0.5)
            isolated.append(capsule_edit(i))
        indexer.idle(timeout=120)
        index_runs = [u.seconds * 1000 for u in updates if u.indexed]
        time.sleep(0.5)
        runs_before = indexer.runs
        chained = [capsule_edit(100 + i) for i in range(back_to_back)]
        indexer.idle(timeout=120)
        chained_runs = indexer.runs - runs_before
        course = root / "content" / "courses" / COURSE / "course.yaml"
        time.sleep(0.5)
        description = _timed_edit(server, updates, course, lambda text: text.replace(
            "description: ", "description: Edited once more. ", 1),
            f"courses/{COURSE}/index.html")
        indexer.idle(timeout=120)
        time.sleep(0.5)
        part = _timed_edit(server, updates, course, lambda text: text.replace(
            "title: ", "title: Renamed ", 2), f"courses/{COURSE}/{capsules[0].stem}/index.html")
        indexer.idle(timeout=120)
    finally:
        server.stop()
    return {"capsules": len(capsules), "step_ms": step_ms,
            "initial_build_s": round(initial, 1),
            "isolated": {**_summary(isolated[1:]), "warmup": isolated[0]},
            "back_to_back": {**_summary(chained), "index_runs": chained_runs},
            "course_description": description, "course_part_title": part,
            "median_index_ms": round(statistics.median(index_runs), 1) if index_runs else None,
            "python": platform.python_version(), "machine": platform.machine(),
            "cpus": __import__("os").cpu_count()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--capsules", type=int, default=1000)
    p.add_argument("--edits", type=int, default=9, help="isolated edits (default: 9)")
    p.add_argument("--back-to-back", type=int, default=6,
                   help="edits saved one after another (default: 6)")
    p.add_argument("--step-ms", type=int, default=30, help="watcher quiet time (default: 30)")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as tmp:
        corpus = generate(Path(tmp), args.capsules)
        assert corpus.curriculum_root is not None
        res = measure_edits(corpus.curriculum_root, args.edits, args.back_to_back, args.step_ms)

    def line(s: dict[str, Any]) -> str:
        return (f"  {s['file']:<36} {s['ms']:>8.1f} ms  (rebuild {s['rebuild_ms']} ms, "
                f"{s['units']} unit(s), page changed: {s['page_changed']})")

    for name in ("isolated", "back_to_back"):
        r = res[name]
        print(f"{name.replace('_', ' ')}: median {r['median_ms']:.0f} ms, p20 {r['p20_ms']:.0f}, "
              f"p80 {r['p80_ms']:.0f}, max {r['max_ms']:.0f}")
        for s in r["samples"]:
            print(line(s))
    print(f"back-to-back edits were indexed in {res['back_to_back']['index_runs']} run(s)")
    print("course.yaml, description:\n" + line(res["course_description"]))
    print("course.yaml, part titles:\n" + line(res["course_part_title"]))
    print(f"{res['capsules']} capsules, initial build {res['initial_build_s']} s; "
          f"indexes after an isolated edit: median {res['median_index_ms']} ms")
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
