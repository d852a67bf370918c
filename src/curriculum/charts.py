"""Charts of measured results, as deterministic SVG.

A Markdown block with the info string `chart` holds a `ChartSpec` in YAML.
Three kinds:

- `ladder`: one bar per version of a topic (or of one benchmark of it) at its
  headline shape; the bar's length is `field` (default: % of the library).
- `roofline`: log-log, the run's measured bandwidth ceilings as slanted lines
  and its compute ceilings as flat ones, each measured kernel at its
  (FLOP/byte, achieved FLOP/s) point.
- `sweep`: `field` against shape, one line per version. By default the shapes
  are evenly spaced categories; `x: <shape key>` plots against that key's
  value instead (with `log_x` / `log_y` for log axes, and `marks` for labelled
  vertical lines, e.g. cache sizes on a working-set sweep).
- `timeline` and `steps`: a decode step's kernels on a time axis, and its step
  time eager against graph replay, from `curriculum trace` data (topic
  `traces`; see `timeline`).
- `breakdown` and `throughput`: where one profiled step of the capstone decoder
  spends its kernel time (`segment: prefill`, `decode_b1`, ...), and tokens a
  second of every implementation, from `python -m curriculum.decoder` data
  (topic `decoder`; see `decoder`).

The same spec and results give byte-identical SVG: Matplotlib's defaults (no
user style), a fixed figure size, a fixed hash salt for element ids, text
kept as text (`svg.fonttype: none`) and no date in the metadata. Nothing is
fetched: the only font used is the one Matplotlib ships.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from curriculum.bench.api import VERSION_FILE
from curriculum.results import CaseResult, ResultsFile

CHART_FORMAT = 2  # bump when the drawing code changes, to invalidate cached charts

ChartKind = Literal["ladder", "roofline", "sweep", "timeline", "steps", "breakdown", "throughput"]
DECODER_KINDS = ("breakdown", "throughput")  # drawn from decoder data, not from results


def _library(attr: str, scale: float = 1.0) -> Callable[[CaseResult], float | None]:
    def get(c: CaseResult) -> float | None:
        if c.baseline is None:
            return None
        value = c.baseline.stat.median_ms if attr == "ms" else getattr(c.baseline, attr)
        return None if value is None else value * scale

    return get


# Every figure field of a case: how to read it, its axis label, and its number format.
FIELDS: dict[str, tuple[Callable[[CaseResult], float | None], str, str]] = {
    "ms": (lambda c: c.stat.median_ms, "time (ms, median)", "{:.3g}"),
    "us": (lambda c: c.stat.median_ms * 1e3, "time (µs, median)", "{:.3g}"),
    "gbps": (lambda c: c.gbps, "GB/s", "{:.0f}"),
    "tbps": (lambda c: c.gbps / 1e3, "TB/s", "{:.2f}"),
    "tflops": (lambda c: c.tflops, "TFLOP/s", "{:.3g}"),
    "pct_roofline": (lambda c: c.pct_roofline, "% of roofline", "{:.1f}%"),
    "pct_library": (lambda c: c.pct_library, "% of library", "{:.1f}%"),
    "rel_err": (lambda c: c.rel_err, "relative error", "{:.1e}"),
    "library_ms": (_library("ms"), "library time (ms)", "{:.3g}"),
    "library_us": (_library("ms", 1e3), "library time (µs)", "{:.3g}"),
    "library_gbps": (_library("gbps"), "library GB/s", "{:.0f}"),
    "library_tflops": (_library("tflops"), "library TFLOP/s", "{:.3g}"),
    "ns_per_item": (lambda c: c.ns_per_item, "ns per item (median)", "{:.3g}"),
    "cycles_per_item": (lambda c: c.cycles_per_item, "cycles per item (median)", "{:.3g}"),
}

LIBRARY_FIELDS = ("pct_library", "library_ms", "library_us", "library_gbps", "library_tflops")


def field_label(field: str, cases: list[CaseResult]) -> str:
    """The axis label of `field`; a library field names the library that won every plotted
    case (e.g. '% of cuDNN SDPA'), or says 'best library' when the winners differ."""
    label = FIELDS[field][1]
    if field not in LIBRARY_FIELDS:
        return label
    winners = {c.library for c in cases if c.library is not None}
    name = winners.pop() if len(winners) == 1 else "best library"
    return label.replace("library", name, 1)


FIGSIZE = (7.2, 4.2)
PALETTE = ["#3b6ea8", "#d9822b", "#4f9a5b", "#b8483e", "#7d62a8", "#8c6d4f", "#c964a2", "#6f7d8c"]
RC = {
    "svg.hashsalt": "curriculum-chart",
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 9.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "path.simplify": False,
}


class ChartSpec(BaseModel):
    """What a `chart` block in Markdown asks for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ChartKind = Field(
        description="ladder, roofline, sweep, timeline, steps, breakdown or throughput."
    )
    topic: str = Field(description="Folder under kernels/, e.g. 'memory'.")
    benchmark: str | None = Field(
        default=None, description="One benchmark of the topic, e.g. 'copy'; all when omitted."
    )
    field: str = Field(default="pct_library", description="Case field to plot (ladder and sweep).")
    where: dict[str, int] | None = Field(
        default=None,
        description="Only the cases whose shape holds these values, e.g. {'causal': 0} to "
        "draw one mask of a suite that sweeps both.",
    )
    versions: list[str] | None = Field(
        default=None,
        description="Only these versions, by file stem (e.g. ['01_tma_store']): a sweep of "
        "the versions measured at every shape, leaving out those measured at the headline only.",
    )
    alt: str = Field(min_length=1, description="Text alternative read in place of the chart.")
    caption: str | None = Field(default=None, description="Caption shown under the chart.")
    x: str | None = Field(
        default=None,
        description="Sweep only: a shape key (e.g. 'kib') whose value is the x axis, "
        "instead of one evenly spaced position per shape.",
    )
    x_label: str | None = Field(
        default=None, description="Sweep with x: the x axis label (default: the key)."
    )
    log_x: bool = Field(default=False, description="Sweep with x: a log-2 x axis.")
    log_y: bool = Field(default=False, description="Sweep only: a log-10 y axis.")
    marks: dict[str, float] | None = Field(
        default=None,
        description="Sweep with x: labelled vertical lines, label -> x value in the key's "
        "unit (e.g. {'L2 50 MiB': 51200} on a kib axis).",
    )
    segment: str | None = Field(
        default=None,
        description="Timeline: the traced segment to draw, e.g. 'eager_b1'; breakdown: the "
        "profiled step, e.g. 'decode_b1' or 'prefill'.",
    )
    window: tuple[float, float] | None = Field(
        default=None, description="Timeline only: the time range drawn, in µs from the "
        "segment's start (default: all of it).",
    )

    @model_validator(mode="after")
    def _trace_options(self) -> ChartSpec:
        if self.kind not in ("timeline", "breakdown") and self.segment:
            raise ValueError("segment applies to kinds breakdown and timeline only")
        if self.kind != "timeline" and self.window:
            raise ValueError("window applies to kind: timeline only")
        if self.kind == "timeline" and not self.segment:
            raise ValueError("a timeline needs segment: the traced segment to draw")
        if self.kind == "breakdown" and not self.segment:
            raise ValueError("a breakdown needs segment: the profiled step, e.g. decode_b1")
        if self.window and self.window[1] <= self.window[0]:
            raise ValueError("window must be [from, to] with from < to")
        return self

    @model_validator(mode="after")
    def _sweep_options(self) -> ChartSpec:
        if self.kind != "sweep" and (
            self.x or self.x_label or self.log_x or self.log_y or self.marks
        ):
            raise ValueError("x, x_label, log_x, log_y and marks apply to kind: sweep only")
        if self.x is None and (self.x_label or self.log_x or self.marks):
            raise ValueError("x_label, log_x and marks need x: the shape key to plot against")
        if self.log_x and any(v <= 0 for v in (self.marks or {}).values()):
            raise ValueError("marks on a log x axis must be positive")
        return self

    @field_validator("field")
    @classmethod
    def _known_field(cls, value: str) -> str:
        if value not in FIELDS:
            raise ValueError(f"unknown field {value!r}; one of: {', '.join(FIELDS)}")
        return value


def _topic_cases(spec: ChartSpec, results: ResultsFile) -> list[CaseResult]:
    cases = [
        c
        for c in results.cases
        if c.topic == spec.topic
        and (spec.benchmark is None or c.benchmark == spec.benchmark)
        and all(c.shape.get(k) == v for k, v in (spec.where or {}).items())
        and (spec.versions is None or c.version in spec.versions)
    ]
    absent = sorted(set(spec.versions or ()) - {c.version for c in cases})
    if cases and absent:
        raise ValueError(
            f"chart: no measured cases of {', '.join(map(repr, absent))} in topic "
            f"{spec.topic!r} (versions are named by file stem, e.g. '01_naive')"
        )
    if not cases:
        what = f"topic {spec.topic!r}" + (
            f", benchmark {spec.benchmark!r}" if spec.benchmark else ""
        )
        if spec.where:
            what += ", shapes with " + ", ".join(f"{k}={v}" for k, v in spec.where.items())
        if spec.versions:
            what += ", versions " + ", ".join(spec.versions)
        raise ValueError(
            f"chart: no measured cases for {what} in the {results.gpu_slug} results; "
            f"run `curriculum bench --only '{spec.topic}/*'` on a GPU"
        )
    return sorted(cases, key=lambda c: (c.version, _size(c), c.shape_label))


def _size(c: CaseResult) -> int:
    total = 1
    for v in c.shape.values():
        total *= v
    return total


def _source_stems(sources_root: Path | None, topic: str) -> list[str]:
    """Version stems on disk; `sources_root` is kernels/ or the project root."""
    if sources_root is None:
        return []
    for base in (sources_root / topic, sources_root / "kernels" / topic):
        if base.is_dir():
            return sorted(p.stem for p in base.glob("*.cu") if VERSION_FILE.match(p.name))
    return []


def chart_inputs_hash(
    spec: ChartSpec, results: ResultsFile, sources_root: Path | None = None
) -> str:
    """sha256 of everything a chart is drawn from, for caching rendered SVG.

    Pass `sources_root` when the chart is rendered with it (a ladder shows
    versions not yet measured).
    """
    if spec.kind in DECODER_KINDS:  # drawn from decoder data, not from results
        from curriculum import decoder

        text = json.dumps({"format": CHART_FORMAT, "matplotlib": _matplotlib_version(),
                           "spec": spec.model_dump(mode="json"),
                           "decoder": decoder.data_hash(sources_root)}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()
    if spec.kind in ("timeline", "steps"):  # drawn from trace data, not from results
        from curriculum.timeline import data_hash

        text = json.dumps({"format": CHART_FORMAT, "matplotlib": _matplotlib_version(),
                           "spec": spec.model_dump(mode="json"),
                           "trace": data_hash(sources_root, spec.topic)}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()
    cases = _topic_cases(spec, results)
    runs = sorted({c.run for c in cases})
    payload = {
        "format": CHART_FORMAT,
        "matplotlib": _matplotlib_version(),
        "spec": spec.model_dump(mode="json"),
        "cases": [c.model_dump(mode="json") for c in cases],
        "runs": {r: results.runs[r].model_dump(mode="json") for r in runs if r in results.runs},
        "stems": _source_stems(sources_root, spec.topic),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _matplotlib_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:  # not `import matplotlib`: a chart found in the cache is not drawn
        return version("matplotlib")
    except PackageNotFoundError:
        return "absent"


def render_chart(spec: ChartSpec, results: ResultsFile, sources_root: Path) -> str:
    """The chart as an SVG document (str); ValueError when the topic has no cases."""
    if spec.kind in ("timeline", "steps"):
        from curriculum import timeline

        trace, cases = timeline.load(sources_root, spec.topic), []
    elif spec.kind in DECODER_KINDS:
        from curriculum import decoder

        trace, cases = decoder.load(sources_root), []
    else:
        cases = _topic_cases(spec, results)
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams.update(RC)
        fig = Figure(figsize=FIGSIZE)
        ax = fig.add_subplot()
        if spec.kind == "timeline":
            timeline.draw_timeline(ax, trace, spec.segment or "", spec.window)
        elif spec.kind == "steps":
            timeline.draw_steps(ax, trace)
        elif spec.kind == "breakdown":
            decoder.draw_breakdown(ax, trace, spec.segment or "")
        elif spec.kind == "throughput":
            decoder.draw_throughput(ax, trace)
        elif spec.kind == "ladder":
            _ladder(ax, spec, cases, _source_stems(sources_root, spec.topic))
        elif spec.kind == "roofline":
            _roofline(ax, spec, cases, results)
        elif spec.x is not None:
            _sweep_numeric(ax, spec, cases, spec.x)
        else:
            _sweep(ax, spec, cases)
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    return valid_svg(buf.getvalue())


# A line drawn with no points (a series whose every value is missing) is written as a
# `<path>` with no `d`, which the SVG schema (and so epubcheck) rejects; it draws nothing.
_EMPTY_PATH = re.compile(r"<path(?![^>]*\sd=)[^>]*/>\s*")


def valid_svg(svg: str) -> str:
    """The SVG without the empty `<path>` elements that matplotlib writes for empty lines."""
    return _EMPTY_PATH.sub("", svg)


def _colors(names: list[str]) -> dict[str, str]:
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(names)))}


def _ladder(ax: Any, spec: ChartSpec, cases: list[CaseResult], stems: list[str]) -> None:
    get, _, fmt = FIELDS[spec.field]
    headline = {c.version: c for c in cases if c.headline}
    label = field_label(spec.field, list(headline.values()))
    unmeasured = set(stems) if spec.benchmark is None and spec.versions is None else set()
    versions = sorted(set(headline) | unmeasured)
    colors = _colors([c.benchmark for c in headline.values()])
    values: list[float | None] = [get(headline[v]) if v in headline else None for v in versions]
    ys = list(range(len(versions)))[::-1]
    known = [v for v in values if v is not None]
    span = max(known) if known else 1.0
    for y, version, value in zip(ys, versions, values, strict=True):
        if value is None:
            why = "not measured" if version not in headline else "no value"
            ax.text(0, y, f"  {why}", va="center", ha="left", color="#777777")
            continue
        case = headline[version]
        ax.barh(y, value, color=colors[case.benchmark], height=0.6)
        ax.text(value + span * 0.01, y, fmt.format(value), va="center", ha="left")
    ax.set_yticks(ys, [_short(v) for v in versions])
    ax.set_xlim(0, span * 1.15)
    ax.grid(axis="y", visible=False)
    if spec.field in ("pct_library", "pct_roofline"):
        ax.axvline(100, color="#444444", linestyle="--", linewidth=1)
    shapes = sorted({c.shape_label for c in headline.values()})
    ax.set_xlabel(f"{label}, at the headline shape ({'; '.join(shapes)})")
    if len(colors) > 1:
        from matplotlib.patches import Patch

        ax.legend(
            handles=[Patch(color=c, label=b) for b, c in colors.items()],
            loc="lower left",
            bbox_to_anchor=(0.0, 1.0),
            ncols=len(colors),
            frameon=False,
        )


def _short(stem: str) -> str:
    return stem.replace("_", " ", 1)


def _roofline(ax: Any, spec: ChartSpec, cases: list[CaseResult], results: ResultsFile) -> None:
    points = [c for c in cases if c.headline and c.flops > 0 and c.bytes > 0]
    if not points:
        raise ValueError(
            f"chart: roofline of {spec.topic!r} needs cases that count FLOPs; "
            "its headline cases count none (use a ladder)"
        )
    run_id = max(c.run for c in points)
    run = results.runs.get(run_id)
    if run is None:
        raise ValueError(f"chart: run {run_id!r} of the results file is missing")
    if any(c.tflops <= 0 for c in points):
        raise ValueError("chart: roofline points need a positive FLOP rate")
    intensities = [c.flops / c.bytes for c in points]
    bandwidths = {n: c.gbps for n, c in sorted(run.ceilings.items()) if c.gbps}
    computes = {n: c.tflops for n, c in sorted(run.ceilings.items()) if c.tflops}
    ridges = [t * 1e3 / g for t in computes.values() for g in bandwidths.values()]
    x_lo = min(intensities) / 8
    x_hi = max(intensities + ridges) * 8
    import numpy

    xs = numpy.geomspace(x_lo, x_hi, 64)
    top = max(computes.values()) if computes else None
    for i, (name, gbps) in enumerate(bandwidths.items()):
        ys = xs * gbps / 1e3  # TFLOP/s = FLOP/byte * GB/s / 1000
        if top is not None:
            ys = numpy.minimum(ys, top)
        ax.plot(
            xs,
            ys,
            color="#555555",
            linestyle=["-", "--", ":"][i % 3],
            linewidth=1.2,
            label=f"{name} {gbps:.0f} GB/s",
        )
    for i, (name, tflops) in enumerate(computes.items()):
        ax.axhline(
            tflops,
            color="#999999",
            linestyle=["-", "-."][i % 2],
            linewidth=1,
            label=f"{name} {tflops:.0f} TFLOP/s",
        )
    colors = _colors([c.version for c in points])
    for group in _clusters(points):
        x, y = group[0].flops / group[0].bytes, group[0].tflops
        for c in group:
            ax.plot([c.flops / c.bytes], [c.tflops], "o", color=colors[c.version])
        ax.annotate(
            ", ".join(_short(c.version) for c in group),
            (x, y),
            textcoords="offset points",
            xytext=(6, -3),
            fontsize=8,
        )
    ax.legend(loc="lower right", fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    y_lo = min(c.tflops for c in points) / 8
    ax.set_ylim(y_lo, (top or max(c.tflops for c in points)) * 2)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(
        f"{spec.topic}: roofline of run {run_id} ({run.provenance.gpu_name})",
        loc="left",
        fontsize=9,
    )


def _clusters(points: list[CaseResult]) -> list[list[CaseResult]]:
    """Points within 10% of each other on both axes share one label."""
    groups: list[list[CaseResult]] = []
    for c in sorted(points, key=lambda c: c.version):
        for g in groups:
            a = g[0]
            if (
                abs(c.flops / c.bytes / (a.flops / a.bytes) - 1) < 0.1
                and abs(c.tflops / a.tflops - 1) < 0.1
            ):
                g.append(c)
                break
        else:
            groups.append([c])
    return groups


def _sweep_order(c: CaseResult) -> tuple[int, tuple[int, ...]]:
    """Smaller problems first; at equal size (rows x cols fixed), by the last
    dimension first, so a width sweep reads left to right."""
    return (_size(c), tuple(reversed(list(c.shape.values()))))


def _sweep(ax: Any, spec: ChartSpec, cases: list[CaseResult]) -> None:
    get = FIELDS[spec.field][0]
    # Shapes with extra parameters (e.g. an input distribution) are not sizes.
    common = Counter(tuple(c.shape) for c in cases).most_common(1)[0][0]
    cases = [c for c in cases if tuple(c.shape) == common]
    label = field_label(spec.field, cases)
    shapes = sorted({(_sweep_order(c), c.shape_label) for c in cases})
    position = {lab: i for i, (_, lab) in enumerate(shapes)}
    versions = sorted({c.version for c in cases})
    colors = _colors(versions)
    for version in versions:
        mine = [c for c in cases if c.version == version]
        pts = [(position[c.shape_label], get(c)) for c in mine]
        pts = sorted((x, y) for x, y in pts if y is not None)
        if not pts:
            continue
        ax.plot(
            [x for x, _ in pts],
            [y for _, y in pts],
            marker="o",
            color=colors[version],
            label=_short(version),
        )
    ax.set_xticks(range(len(shapes)), [lab for _, lab in shapes], rotation=20, ha="right")
    ax.set_ylabel(label)
    ax.set_xlabel("shape")
    if spec.log_y:
        ax.set_yscale("log")
    if spec.field in ("pct_library", "pct_roofline"):
        ax.axhline(100, color="#444444", linestyle="--", linewidth=1)
    ax.legend(fontsize=8)
    ax.set_title(f"{spec.topic}: {label} by shape", loc="left", fontsize=9)


def _sweep_numeric(ax: Any, spec: ChartSpec, cases: list[CaseResult], key: str) -> None:
    """`field` against the value of one shape key, one line per version; cases whose
    other shape keys differ from the most common set are left out, as in `_sweep`."""
    from matplotlib.ticker import NullLocator

    get, label, _ = FIELDS[spec.field]
    keyed = [c for c in cases if key in c.shape]
    if not keyed:
        keys = sorted({k for c in cases for k in c.shape})
        raise ValueError(
            f"chart: no case of {spec.topic!r} has the shape key {key!r} (keys: {', '.join(keys)})"
        )
    common = Counter(tuple(c.shape) for c in keyed).most_common(1)[0][0]
    keyed = [c for c in keyed if tuple(c.shape) == common]
    versions = sorted({c.version for c in keyed})
    colors = _colors(versions)
    xs: set[int] = set()
    for version in versions:
        pts = sorted(
            (c.shape[key], y) for c in keyed if c.version == version and (y := get(c)) is not None
        )
        if spec.log_y:
            pts = [(x, y) for x, y in pts if y > 0]
        if not pts:
            continue
        xs.update(x for x, _ in pts)
        ax.plot(
            [x for x, _ in pts],
            [y for _, y in pts],
            marker="o",
            color=colors[version],
            label=_short(version),
        )
    if spec.log_x:
        ax.set_xscale("log", base=2)
    if spec.log_y:
        ax.set_yscale("log")
    ticks = sorted(xs)
    ax.set_xticks(ticks, [str(t) for t in ticks], rotation=30, ha="right")
    ax.xaxis.set_minor_locator(NullLocator())
    for name, at in sorted((spec.marks or {}).items(), key=lambda kv: (kv[1], kv[0])):
        ax.axvline(at, color="#777777", linestyle=":", linewidth=1)
        ax.text(
            at,
            0.98,
            f" {name}",
            transform=ax.get_xaxis_transform(),
            rotation=90,
            va="top",
            ha="right",
            fontsize=7,
            color="#555555",
        )
    ax.set_ylabel(label)
    ax.set_xlabel(spec.x_label or key)
    if spec.field in ("pct_library", "pct_roofline"):
        ax.axhline(100, color="#444444", linestyle="--", linewidth=1)
    ax.legend(fontsize=8)
    ax.set_title(f"{spec.topic}: {label} by {spec.x_label or key}", loc="left", fontsize=9)
