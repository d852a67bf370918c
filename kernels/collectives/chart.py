"""Bus bandwidth against message size, one line per GPU count, from the runner's results.

    python3 kernels/collectives/chart.py [--op all_reduce] [--out FILE.svg]

Reads every `results/*.json` beside this file (each validated by `model.validate_text`),
draws the chosen collective's bus bandwidth on a log-2 size axis with the links' nominal rate
in one direction as a dashed line, and writes a deterministic SVG. With no results it says so
and exits 1. `load`, `data_hash` and `draw` are the entry points a site build calls, like
`curriculum.timeline`'s for the decode-step trace: `draw(ax, load(root), op)` on an axis the
caller made.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _load_model():
    """model.py beside this file, under a name no other module on sys.path can shadow."""
    name = "kernels_collectives_model"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "model.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


model = _load_model()

RESULTS = Path("kernels") / "collectives" / "results"
# NVLink 4 on an H200: 900 GB/s per GPU counting both directions (NVIDIA's datasheet); a ring
# uses each direction once, so its bus bandwidth is bounded by half of it.
NOMINAL_GBPS = 450.0
OP_TITLES = {
    "all_reduce": "all-reduce",
    "all_gather": "all-gather",
    "reduce_scatter": "reduce-scatter",
}


def result_files(root: Path) -> list[Path]:
    return sorted((root / RESULTS).glob("*.json"))


def load(root: Path) -> list[model.Document]:
    """Every results document under `root`, fewest GPUs first (ValueError on a bad file)."""
    docs = []
    for path in result_files(root):
        try:
            docs.append(model.validate_text(path.read_text(encoding="utf-8")))
        except ValueError as exc:
            raise ValueError(f"{path.relative_to(root)}: {exc}") from exc
    return sorted(docs, key=lambda d: (d.provenance.world, d.kind))


def data_hash(root: Path) -> str:
    """sha256 over the results files' names and bytes: what a cached chart depends on."""
    h = hashlib.sha256()
    for path in result_files(root):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def series(doc: model.Document, op: str) -> list[tuple[int, float]]:
    """(message bytes, bus bandwidth GB/s) of one collective by size, replayed from a CUDA
    graph where the run has it (the GPU's time), else issued eagerly."""
    if op not in model.OPS:
        raise ValueError(f"unknown collective {op!r}; one of {', '.join(model.OPS)}")
    return [(r.bytes, r.busbw_gbps) for r in model.rows_of(doc, op)]


def _size_label(nbytes: float) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


def draw(
    ax: Any, docs: list[model.Document], op: str = "all_reduce", nominal_gbps: float = NOMINAL_GBPS
) -> None:
    """Bus bandwidth of `op` against message size, a line per document with more than one GPU
    (one GPU moves nothing between GPUs: its bus bandwidth is 0 by definition)."""
    drawn = [d for d in docs if d.provenance.world > 1 and series(d, op)]
    if not drawn:
        raise ValueError(f"no {op} results from more than one GPU to draw")
    for d in drawn:
        pts = series(d, op)
        ax.plot(
            [b for b, _ in pts],
            [g for _, g in pts],
            marker="o",
            markersize=3,
            label=f"{d.provenance.world} GPUs ({d.provenance.gpu_name}, "
            f"{model.rows_of(d, op)[0].mode})",
        )
    ax.axhline(
        nominal_gbps,
        linestyle="--",
        linewidth=1,
        color="0.4",
        label="NVLink, one direction (datasheet)",
    )
    ax.set_xscale("log", base=2)
    ticks = [1 << k for k in range(10, 31, 4)]
    ax.set_xticks(ticks, [_size_label(t) for t in ticks])
    ax.set_xlabel("message size")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"NCCL {OP_TITLES[op]}, NVLS off")
    top = max([nominal_gbps] + [g for d in drawn for _, g in series(d, op)])
    ax.set_ylim(0, top * 1.12)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")  # below the curves' large-message end


def render_svg(docs: list[model.Document], op: str = "all_reduce") -> str:
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams["svg.hashsalt"] = "collectives"
        fig = Figure(figsize=(7.0, 4.0))
        draw(fig.add_subplot(), docs, op)
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=HERE.parent.parent, help="project folder")
    ap.add_argument("--op", choices=model.OPS, default="all_reduce")
    ap.add_argument("--out", type=Path, default=Path("collectives.svg"))
    opts = ap.parse_args(argv)
    try:
        svg = render_svg(load(opts.root), opts.op)
    except ValueError as exc:
        print(f"collectives chart: {exc}", file=sys.stderr)
        return 1
    opts.out.write_text(svg, encoding="utf-8")
    print(f"wrote {opts.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
