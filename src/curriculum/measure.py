"""Stage 3, `measure`: attach measured results to the figures pages cite.

Reads every `kernels/results/<gpu>.json`, resolves each `{fig:...}` reference
and each chart block of every body, and marks figures that are missing (no
result yet) or stale (the kernel's source changed since it was measured).
Missing and stale figures are warnings, errors under `--strict`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from curriculum.bench.staleness import Fingerprints, describe, stale_reason
from curriculum.catalog import Body, Catalog
from curriculum.errors import Diagnostics, Loc, did_you_mean, rel
from curriculum.results import CaseResult, ResultsFile, Run, check_text, source_hash
from curriculum.yamlio import load_yaml

CASE_FIELDS = ("ms", "us", "gbps", "tbps", "tflops", "pct_roofline", "pct_library", "rel_err",
               "library_ms", "library_us", "library_gbps", "library_tflops", "ns_per_item",
               "cycles_per_item")
CEILING_FIELDS = ("ms", "gbps", "tbps", "tflops")


@dataclass(frozen=True)
class Figure:
    """A cited number as a page shows it."""

    text: str
    value: float | None
    provenance: str
    stale: bool = False
    missing: bool = False
    throttled: bool = False  # measured while the clocks were held down (see provenance)


# Drawn charts, by the sha256 of everything drawn from (spec, cases, runs, drawing code and
# matplotlib version): matplotlib takes a few hundred milliseconds a chart.
CHART_CACHE = Path(".cache") / "charts"


@dataclass(frozen=True)
class Chart:
    svg: str
    name: str  # file name under figures/
    alt: str
    caption: str | None


def format_value(field_name: str, v: float) -> str:
    if field_name in ("ms", "library_ms"):
        return f"{v:.3f} ms" if v < 100 else f"{v:,.0f} ms"
    if field_name in ("us", "library_us"):
        return f"{v:,.1f} µs"
    if field_name in ("gbps", "library_gbps"):
        return f"{v:,.0f} GB/s"
    if field_name == "tbps":
        return f"{v:.2f} TB/s"
    if field_name in ("tflops", "library_tflops"):
        return f"{v:,.1f} TFLOP/s"
    if field_name.startswith("pct_"):
        return f"{v:.1f}%" if v < 10 else f"{v:.0f}%"
    if field_name == "rel_err":
        return f"{v:.1e}"
    if field_name == "ns_per_item":
        return f"{v / 1000:.3g} µs" if v >= 1000 else f"{v:.3g} ns"
    if field_name == "cycles_per_item":
        return f"{v:,.0f} cycles" if v >= 1000 else f"{v:.3g} cycles"
    return f"{v:g}"


def case_value(case: CaseResult, field_name: str) -> float | None:
    base = case.baseline
    return {
        "ms": case.stat.median_ms,
        "us": case.stat.median_ms * 1000,
        "gbps": case.gbps,
        "tbps": case.gbps / 1000,
        "tflops": case.tflops,
        "pct_roofline": case.pct_roofline,
        "pct_library": case.pct_library,
        "rel_err": case.rel_err,
        "library_ms": base.stat.median_ms if base else None,
        "library_us": base.stat.median_ms * 1000 if base else None,
        "library_gbps": base.gbps if base else None,
        "library_tflops": base.tflops if base else None,
        "ns_per_item": case.ns_per_item,
        "cycles_per_item": case.cycles_per_item,
    }.get(field_name)


@dataclass
class Measurements:
    """Results by GPU slug, and the figures and charts resolved against them."""

    root: Path
    primary: str
    results: dict[str, ResultsFile] = field(default_factory=dict)
    _hashes: dict[str, str | None] = field(default_factory=dict)
    _charts: dict[str, Chart] = field(default_factory=dict)
    _fingerprints: Fingerprints | None = None
    # Rendered Markdown fragments of this build, shared by its editions (see render).
    fragments: dict[tuple[str, int, str, str], tuple[str, dict[str, bytes | str]]] = field(
        default_factory=dict)

    def current_hash(self, case_id: str) -> str | None:
        if case_id not in self._hashes:
            path = self.root / "kernels" / f"{case_id}.cu"
            self._hashes[case_id] = source_hash(path) if path.is_file() else None
        return self._hashes[case_id]

    def stale(self, case: CaseResult) -> str | None:
        """Why a recorded case is stale (the rule `bench` uses to skip), or None."""
        if self._fingerprints is None:
            self._fingerprints = Fingerprints(self.root)
        found = stale_reason(self._fingerprints, case)
        return describe(found[0]) if found else None

    def figure(self, ref: dict[str, Any]) -> Figure:
        gpu = ref.get("gpu") or self.primary
        case_id, field_name = ref["case"], ref["field"]
        if case_id.startswith("traces/"):  # `curriculum trace` data, see timeline
            return _trace_figure(self.root, case_id, field_name, ref.get("shape"))
        if case_id.startswith("decoder/"):  # `python -m curriculum.decoder` data, see decoder
            return _decoder_figure(self.root, case_id, field_name, ref.get("shape"))
        results = self.results.get(gpu)
        placeholder = Figure("[not measured]", None, f"{case_id} has no result on {gpu} yet",
                             missing=True)
        if results is None:
            return placeholder
        if case_id.startswith("ceiling/"):
            run = results.latest_run()
            ceiling = run.ceilings.get(case_id.split("/", 1)[1]) if run else None
            if run is None or ceiling is None:
                return placeholder
            value = {"ms": ceiling.stat.median_ms, "gbps": ceiling.gbps,
                     "tbps": ceiling.gbps / 1000 if ceiling.gbps else None,
                     "tflops": ceiling.tflops}.get(field_name)
            if value is None:
                return placeholder
            prov = (f"{run.provenance.gpu_name}: {ceiling.description}; median of "
                    f"{ceiling.stat.samples} runs; measured {run.provenance.date[:10]}")
            return Figure(format_value(field_name, value), value, prov)
        case = results.case(case_id, ref.get("shape"))
        if case is None:
            return placeholder
        value = case_value(case, field_name)
        if value is None:
            return Figure("[no value]", None, f"{case_id} has no {field_name}", missing=True)
        run = results.runs.get(case.run)
        why = self.stale(case)
        prov = _provenance(case, run, field_name)
        if why:
            prov += f"; stale: {why}"
        return Figure(format_value(field_name, value), value, prov, stale=why is not None,
                      throttled=case.throttled)

    def chart(self, yaml_text: str, file: str, line: int, diags: Diagnostics) -> Chart | None:
        key = hashlib.sha256(yaml_text.encode()).hexdigest()
        if key in self._charts:
            return self._charts[key]
        data, _ = load_yaml(yaml_text, file, diags, line_offset=line)
        if data is None:
            return None
        try:
            from curriculum.charts import ChartSpec, chart_inputs_hash, render_chart
        except ImportError as exc:  # charts need matplotlib
            diags.error(Loc(file, line + 1, 1), "chart.unavailable", f"cannot render charts: {exc}")
            return None
        try:
            spec = ChartSpec.model_validate(data)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "(chart)"
            diags.error(Loc(file, line + 1, 1), "chart.invalid", f"{where}: {first['msg']}")
            return None
        gpu = getattr(spec, "gpu", None) or self.primary
        results = self.results.get(gpu)
        if results is None:
            diags.warning(Loc(file, line + 1, 1), "chart.missing",
                          f"no results for {gpu} to draw the {spec.kind} chart of '{spec.topic}'")
            return None
        try:
            name = f"{spec.kind}-{spec.topic}-{chart_inputs_hash(spec, results)[:12]}.svg"
            # The cache key also covers the version files on disk, which a ladder shows unmeasured.
            cached = self.root / CHART_CACHE / f"{chart_inputs_hash(spec, results, self.root)}.svg"
            try:
                svg = cached.read_text(encoding="utf-8")
            except OSError:
                svg = render_chart(spec, results, self.root)
                _keep(cached, svg)
        except ImportError as exc:  # drawing needs matplotlib; a cached chart did not
            diags.error(Loc(file, line + 1, 1), "chart.unavailable", f"cannot render charts: {exc}")
            return None
        except ValueError as exc:  # nothing measured to draw (yet), or a shape key it lacks
            diags.warning(Loc(file, line + 1, 1), "chart.missing", str(exc))
            return None
        chart = Chart(svg, name, spec.alt, spec.caption)
        self._charts[key] = chart
        return chart


def _trace_figure(root: Path, case_id: str, field_name: str, shape: str | None) -> Figure:
    from curriculum.timeline import figure

    try:
        text, value, prov = figure(root, case_id, field_name, shape)
    except ValueError as exc:
        return Figure("[not traced]", None, str(exc), missing=True)
    return Figure(text, value, prov)


def _decoder_figure(root: Path, case_id: str, field_name: str, shape: str | None) -> Figure:
    from curriculum.decoder import figure

    try:
        text, value, prov = figure(root, case_id, field_name, shape)
    except ValueError as exc:
        return Figure("[not measured]", None, str(exc), missing=True)
    return Figure(text, value, prov)


def _keep(path: Path, svg: str) -> None:
    """Store a drawn chart under its inputs' hash, atomically; a project folder that
    cannot be written to only costs the drawing next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".chart-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(svg)
        os.replace(tmp, path)
    except OSError:
        pass


def _provenance(case: CaseResult, run: Run | None, field_name: str = "") -> str:
    s = case.stat
    parts = [run.provenance.gpu_name if run else "unknown GPU", case.shape_label,
             f"median of {s.samples} runs (p20 {s.p20_ms:.4g} ms, p80 {s.p80_ms:.4g} ms)"]
    if (field_name == "pct_library" or field_name.startswith("library_")) and case.library:
        parts.append(f"vs {case.library}" + _others(case))
    if field_name in ("ns_per_item", "cycles_per_item") and case.items:
        label = case.items_label or "items"
        parts.append(f"{case.items:,.0f} {label} a launch")
        if field_name == "cycles_per_item":
            parts.append(f"at the SM clock read before the case, {case.clocks_before.sm_mhz} MHz")
    if run:
        rev = run.provenance.git_rev[:10] + (" dirty" if run.provenance.git_dirty else "")
        parts.append(f"measured {run.provenance.date[:10]} at {rev}")
    if case.throttled:
        reasons = case.throttle_reasons or sorted(
            set(case.clocks_before.throttle_reasons + case.clocks_after.throttle_reasons))
        parts.append(f"measured while throttled: {', '.join(reasons)}")
    return "; ".join(parts)


def _others(case: CaseResult) -> str:
    """The other library candidates, for the provenance of a library figure."""
    others = [f"{b.name} {b.stat.median_ms:.4g} ms" for b in case.baselines if b.name != case.library]
    others += [f"{u.name} unavailable" for u in case.unavailable]
    return f" (fastest of: {case.library}, {', '.join(others)})" if others else ""


def load_results(root: Path, primary: str, diags: Diagnostics) -> Measurements:
    m = Measurements(root=root, primary=primary)
    for path in sorted((root / "kernels" / "results").glob("*.json")):
        file = rel(path, root)
        try:
            checked, violations = check_text(path.read_text(encoding="utf-8"))
        except ValueError as exc:  # not JSON at all
            diags.error(_json_loc(path, file, exc), "results.invalid", _first_error(exc))
            continue
        for v in violations:  # every one, each at its line, with its case
            diags.error(Loc(file, v.line, 1), v.code, v.text(),
                        "re-run `curriculum bench` for the case; never edit a results file by hand")
        if checked is None:
            continue
        results = checked
        if results.gpu_slug != path.stem:
            diags.error(Loc(file, 1, 1), "results.slug",
                        f"file holds gpu_slug '{results.gpu_slug}' but is named {path.name}")
            continue
        m.results[results.gpu_slug] = results
    return m


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"])
        return f"{where}: {err['msg']}" if where else err["msg"]
    return str(exc)


def _json_loc(path: Path, file: str, exc: Exception) -> Loc:
    """Best effort: the line of the first failing value in the JSON text."""
    if isinstance(exc, ValidationError):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            return Loc(file, 1, 1)
        loc = exc.errors(include_url=False)[0]["loc"]
        text = path.read_text(encoding="utf-8")
        offset = 0
        node: Any = data
        for part in loc:
            if isinstance(part, str) and isinstance(node, dict) and part in node:
                found = text.find(json.dumps(part), offset)
                offset = found if found >= 0 else offset
                node = node[part]
            elif isinstance(part, int) and isinstance(node, list) and part < len(node):
                node = node[part]
        return Loc(file, text.count("\n", 0, offset) + 1, 1)
    lineno = getattr(exc, "lineno", None)
    return Loc(file, lineno or 1, getattr(exc, "colno", 1) or 1)


def _bodies(catalog: Catalog) -> Iterator[tuple[str, Body]]:
    for cap in catalog.capsules.values():
        if not cap.draft:
            yield f"capsule '{cap.id}'", cap.preview
            if cap.rest is not None:
                yield f"capsule '{cap.id}'", cap.rest
    for q in catalog.questions.values():
        yield f"question '{q.id}'", q.question
        yield f"question '{q.id}'", q.answer
    for exp in catalog.experiments.values():
        yield f"experiment '{exp.id}'", exp.preview
        if exp.rest is not None:
            yield f"experiment '{exp.id}'", exp.rest


def measure(catalog: Catalog, root: Path, diags: Diagnostics) -> Measurements:
    """Load results and check every figure, chart and seeded experiment input."""
    m = load_results(root, catalog.site.primary_gpu, diags)
    known_cases = {c.id for r in m.results.values() for c in r.cases}
    for page, body in _bodies(catalog):
        check_body_figures(m, body, page, known_cases, diags)
    for exp in catalog.experiments.values():
        for inp in exp.meta.inputs:
            if inp.default_from is None:
                continue
            ref = parse_ref(inp.default_from)
            loc = Loc(exp.loc.path, 1, 1)
            if ref is None:
                diags.error(loc, "figure.syntax", f"default_from '{inp.default_from}' is not "
                            "'topic/version.field' or 'ceiling/name.field'")
            else:
                _check_figure(m, ref, loc, f"experiment '{exp.id}'", known_cases, diags)
    return m


def check_body_figures(m: Measurements, body: Body, page: str, known_cases: set[str],
                       diags: Diagnostics) -> None:
    """Every figure and chart one Markdown body cites, against the results."""
    for ref, line in body.refs.figures:
        _check_figure(m, ref, Loc(body.file, body.line + line, 1), page, known_cases, diags)
    for yaml_text, line in body.refs.charts:
        m.chart(yaml_text, body.file, body.line + line, diags)


def parse_ref(text: str) -> dict[str, Any] | None:
    from curriculum.markdown import FIG_RE

    match = FIG_RE.fullmatch("{fig:" + text + "}")
    return match.groupdict() if match else None


def _check_figure(m: Measurements, ref: dict[str, Any], loc: Loc, page: str,
                  known_cases: set[str], diags: Diagnostics) -> None:
    case_id, field_name = ref["case"], ref["field"]
    cite = f"{{fig:{case_id}.{field_name}}}"
    if case_id.startswith("traces/"):
        from curriculum.timeline import SEGMENT_FIELDS, STEP_FIELDS

        fields = STEP_FIELDS if case_id.split("/", 1)[1] in ("eager", "graph") else SEGMENT_FIELDS
        if field_name not in fields:
            diags.error(loc, "figure.unknown-field", f"{case_id} has no field '{field_name}'",
                        did_you_mean(field_name, fields))
        elif (fig := m.figure(ref)).missing:
            diags.warning(loc, "figure.missing", f"{page} cites {cite}: {fig.provenance}",
                          "run `curriculum trace` on a GPU")
        return
    if case_id.startswith("decoder/"):
        from curriculum.decoder import fields_for

        fields = fields_for(case_id.split("/", 1)[1])
        if field_name not in fields:
            diags.error(loc, "figure.unknown-field", f"{case_id} has no field '{field_name}'",
                        did_you_mean(field_name, fields) if fields else
                        "keys: prefill_<impl>, decode_<impl>, check_<name>, breakdown_<step>, "
                        "floor, model")
        elif (fig := m.figure(ref)).missing:
            diags.warning(loc, "figure.missing", f"{page} cites {cite}: {fig.provenance}",
                          "run `python -m curriculum.decoder` on a GPU")
        return
    if case_id.startswith("ceiling/"):
        if field_name not in CEILING_FIELDS:
            diags.error(loc, "figure.unknown-field", f"ceilings have no field '{field_name}'",
                        did_you_mean(field_name, CEILING_FIELDS))
            return
    else:
        if field_name not in CASE_FIELDS:
            diags.error(loc, "figure.unknown-field", f"cases have no field '{field_name}'",
                        did_you_mean(field_name, CASE_FIELDS))
            return
        if m.current_hash(case_id) is None and case_id not in known_cases:
            diags.error(loc, "figure.unknown-case", f"no kernel kernels/{case_id}.cu",
                        did_you_mean(case_id, known_cases))
            return
    fig = m.figure(ref)
    if fig.missing:
        diags.warning(loc, "figure.missing", f"{page} cites {cite}, which is not measured: "
                      f"{fig.provenance}", "run `curriculum bench` on a GPU")
    elif fig.stale:
        why = fig.provenance.rsplit("; stale: ", 1)[-1]
        diags.warning(loc, "figure.stale", f"{page} cites {cite}, but {why} "
                      f"(kernels/{case_id})", "re-run `curriculum bench`")
