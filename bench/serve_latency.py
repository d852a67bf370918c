"""Edit-to-reload latency of `curriculum serve` on a large corpus.

Generates the same seeded corpus as bench/build_speed.py (one course of N
capsules), starts the live server on it in this process, and then, several
times over, appends a sentence to one capsule and measures the time from the
file write to the moment a waiting client (the long-poll every open page holds)
is told that the rebuilt page is ready. It reports the median, 20th and 80th
percentiles, and what each rebuild re-rendered.

    python bench/serve_latency.py                    # 1,000 capsules, 9 edits
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
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_speed import COURSE, generate  # noqa: E402


def _wait(url: str, version: int, box: dict[str, Any]) -> None:
    with urllib.request.urlopen(f"{url}__curriculum/wait?v={version}&timeout=30") as reply:
        box["news"] = json.loads(reply.read())
    box["at"] = time.perf_counter()


def measure_edits(root: Path, edits: int, step_ms: int, seed: int = 7) -> dict[str, Any]:
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
    samples: list[dict[str, Any]] = []
    try:
        for i in range(edits + 1):  # the first edit warms the watcher up and is not counted
            time.sleep(2.0)  # let the previous rebuild's index refresh finish
            target = rng.choice(capsules)
            box: dict[str, Any] = {}
            waiter = threading.Thread(target=_wait, args=(server.url, server.site.version, box))
            waiter.start()
            time.sleep(0.2)  # the waiter is parked on the server
            text = target.read_text(encoding="utf-8")
            edited = text + f"\nOne more measured sentence about warp {i} and its loads.\n"
            wrote = time.perf_counter()
            target.write_text(edited, encoding="utf-8")
            waiter.join(timeout=60)
            if "at" not in box:
                raise SystemExit(f"no notification for edit {i} within 60 s")
            page = f"courses/{COURSE}/{target.stem}/index.html"
            news = box["news"]
            deadline = time.monotonic() + 30  # the log entry comes after the index refresh
            while not any(u.version == news["version"] for u in updates) \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            update = next((u for u in reversed(updates) if u.version == news["version"]), None)
            samples.append({
                "capsule": target.stem,
                "ms": round((box["at"] - wrote) * 1000, 1),
                "rebuild_ms": round(update.seconds * 1000, 1) if update else None,
                "units": len(update.rebuilt) if update else None,
                "index_ms": round(update.index_seconds * 1000, 1) if update else None,
                "page_changed": page in news["changed"],
                "errors": len(news["errors"]),
            })
    finally:
        server.stop()
    warmup, samples = samples[0], samples[1:]
    ms = [s["ms"] for s in samples]
    q = statistics.quantiles(ms, n=5) if len(ms) > 1 else [ms[0]] * 4
    return {"capsules": len(capsules), "edits": edits, "step_ms": step_ms,
            "initial_build_s": round(initial, 1), "median_ms": statistics.median(ms),
            "p20_ms": round(q[0], 1), "p80_ms": round(q[3], 1), "samples": samples,
            "warmup": warmup,
            "median_index_ms": statistics.median(s["index_ms"] or 0 for s in samples),
            "python": platform.python_version(), "machine": platform.machine(),
            "cpus": __import__("os").cpu_count()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--capsules", type=int, default=1000)
    p.add_argument("--edits", type=int, default=9)
    p.add_argument("--step-ms", type=int, default=30, help="watcher quiet time (default: 30)")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as tmp:
        corpus = generate(Path(tmp), args.capsules)
        assert corpus.curriculum_root is not None
        res = measure_edits(corpus.curriculum_root, args.edits, args.step_ms)
    for s in res["samples"]:
        print(f"  {s['capsule']:<36} {s['ms']:>7.1f} ms  (rebuild {s['rebuild_ms']} ms, "
              f"{s['units']} unit(s), page changed: {s['page_changed']}; "
              f"index refresh after it {s['index_ms']} ms)")
    print(f"{res['capsules']} capsules, initial build {res['initial_build_s']} s; "
          f"edit to notification: median {res['median_ms']:.0f} ms "
          f"(p20 {res['p20_ms']:.0f}, p80 {res['p80_ms']:.0f}) over {res['edits']} edits "
          f"after one warm-up edit ({res['warmup']['ms']:.0f} ms); search index, sitemap and "
          f"feed follow in a median {res['median_index_ms']:.0f} ms")
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
