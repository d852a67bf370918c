"""Search at test time, replayed: three ways to spend evaluations on 07's tile sweep.

The sweep of `gemm/07_autotuned` is measured once, every candidate, at 4096^3
(the `sgemm_tiles` cases of a results file). A search that could only afford
k evaluations would have found the best of the k it tried; this module
replays three searches over the measured table, deterministically:

- random: candidates in a random order; over `TRIALS` seeded orders, the
  median and the 10th percentile (an unlucky search) of the best found;
- model-ranked: candidates in the order of a napkin cost model, register
  reuse of the thread tile first (tm*tn/(tm+tn)), then of the block tile
  (bm*bn/(bm+bn)), then the longer k step;
- greedy: start at the default tile, try every neighbour (one parameter one
  step along its list), move to the best if it beats the current one, stop
  when none does.

`table(results_path)` writes the result as a Markdown table whose cells cite
the measured candidates (`{fig:gemm/07_autotuned.tflops@...}`); the capsule
`search-at-test-time` holds that table and a test keeps the two equal:
`python -m curriculum.bench.tilesearch` prints it again after a re-measure.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

CASE = "gemm/07_autotuned"
KEYS = ("bm", "bn", "bk", "tm", "tn")
VALUES = {"bm": (64, 128, 256), "bn": (64, 128, 256), "bk": (8, 16, 32), "tm": (4, 8), "tn": (4, 8)}
DEFAULT = (128, 128, 16, 8, 8)
TRIALS = 1001  # odd: a median is one of the measured candidates
BUDGETS = (1, 2, 4, 8, 16, 32)

Tile = tuple[int, int, int, int, int]


def load_sweep(results_path: Path) -> dict[Tile, tuple[float, str]]:
    """Tile -> (TFLOP/s, shape label) for every measured candidate of the sweep."""
    data = json.loads(results_path.read_text(encoding="utf-8"))
    sweep: dict[Tile, tuple[float, str]] = {}
    for case in data["cases"]:
        shape = case["shape"]
        if case["id"] == CASE and all(k in shape for k in KEYS):
            tile = tuple(int(shape[k]) for k in KEYS)
            sweep[tile] = (float(case["tflops"]), case["shape_label"])  # type: ignore[index]
    return sweep


def best_so_far(order: list[Tile], sweep: dict[Tile, tuple[float, str]]) -> list[Tile]:
    """The best tile found after 1, 2, ... evaluations of `order`."""
    out: list[Tile] = []
    for tile in order:
        if not out or sweep[tile][0] > sweep[out[-1]][0]:
            out.append(tile)
        else:
            out.append(out[-1])
    return out


def model_order(tiles: list[Tile]) -> list[Tile]:
    def score(t: Tile) -> tuple[float, float, int, Tile]:
        bm, bn, bk, tm, tn = t
        return (tm * tn / (tm + tn), bm * bn / (bm + bn), bk, t)

    return sorted(tiles, key=score, reverse=True)


def neighbours(tile: Tile) -> list[Tile]:
    out = []
    for i, key in enumerate(KEYS):
        values = VALUES[key]
        j = values.index(tile[i])
        for step in (-1, 1):
            if 0 <= j + step < len(values):
                t = list(tile)
                t[i] = values[j + step]
                out.append((t[0], t[1], t[2], t[3], t[4]))
    return out


def greedy_order(sweep: dict[Tile, tuple[float, str]], start: Tile = DEFAULT) -> list[Tile]:
    """The tiles a greedy neighbourhood search evaluates, in order, until it stops."""
    order = [start]
    current = start
    while True:
        fresh = [t for t in neighbours(current) if t in sweep and t not in order]
        order.extend(fresh)
        best = max(fresh, key=lambda t: sweep[t][0], default=None)
        if best is None or sweep[best][0] <= sweep[current][0]:
            return order
        current = best


def random_curves(sweep: dict[Tile, tuple[float, str]]) -> tuple[list[Tile], list[Tile]]:
    """Per evaluation count: the median and the 10th-percentile best found."""
    tiles = sorted(sweep)
    runs = []
    rng = random.Random(0)
    for _ in range(TRIALS):
        order = tiles[:]
        rng.shuffle(order)
        runs.append(best_so_far(order, sweep))
    median, low = [], []
    for k in range(len(tiles)):
        found = sorted((r[k] for r in runs), key=lambda t: sweep[t][0])
        median.append(found[TRIALS // 2])
        low.append(found[TRIALS // 10])
    return median, low


def _fig(label: str) -> str:
    return "{fig:" + CASE + ".tflops@" + label + "}"


def table(results_path: Path) -> str:
    """The capsule's table: best found against evaluations spent, each cell a figure."""
    sweep = load_sweep(results_path)
    if not sweep or DEFAULT not in sweep:
        raise ValueError(f"{results_path}: no measured tile sweep of {CASE}")
    tiles = sorted(sweep)
    median, low = random_curves(sweep)
    model = best_so_far(model_order(tiles), sweep)
    greedy_evals = greedy_order(sweep)
    greedy = best_so_far(greedy_evals, sweep)
    best = max(tiles, key=lambda t: sweep[t][0])
    rows = [
        "| evaluations | random, median | random, unlucky 10% | model-ranked | greedy |",
        "| --- | --- | --- | --- | --- |",
    ]
    for k in (*BUDGETS, len(tiles)):
        if k > len(tiles):
            continue
        g = greedy[min(k, len(greedy)) - 1]
        cells = [median[k - 1], low[k - 1], model[k - 1]]
        row = [str(k), *(_fig(sweep[t][1]) for t in cells), _fig(sweep[g][1])]
        rows.append("| " + " | ".join(row) + " |")
    rows.append("")
    rows.append(
        f"The sweep holds {len(tiles)} candidates; the best is "
        f"`{_label(best)}` at {_fig(sweep[best][1])}. Greedy stops after "
        f"{len(greedy_evals)} evaluations at `{_label(greedy[-1])}`; the model's first pick "
        f"is `{_label(model_order(tiles)[0])}`, and it reaches the best at evaluation "
        f"{model.index(best) + 1 if best in model else len(tiles)}."
    )
    return "\n".join(rows) + "\n"


def _label(tile: Tile) -> str:
    return "bm{} bn{} bk{} tm{} tn{}".format(*tile)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else Path("kernels/results/nvidia-h200.json")
    sys.stdout.write(table(path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
