"""Index pages: every worked question by track, every experiment, and every measurement
(one table of every results case, linking to the capsules that cite it)."""

from __future__ import annotations

import re
from typing import Any

from curriculum.measure import format_value
from curriculum.render import Renderer, page_url, relative

QUESTIONS = "questions/index.html"
EXPERIMENTS = "experiments/index.html"
MEASUREMENTS = "measurements/index.html"
INDEX_PAGES = (QUESTIONS, EXPERIMENTS, MEASUREMENTS)
# The capsules a reader opens to see how every number was taken and how to read it.
METHOD_CAPSULES = ("benchmarking-honestly", "reporting-a-kernel-number")
_CHART_TOPIC = re.compile(r"^\s*topic:\s*['\"]?([A-Za-z0-9_-]+)", re.MULTILINE)


def render_indexes(r: Renderer) -> None:
    if r.cat.questions:
        questions_index(r)
    if r.cat.experiments:
        experiments_index(r)
    measurements_index(r)


def _home(r: Renderer, path: str) -> dict[str, Any]:
    return {"label": "Up next", "title": "Home", "href": relative(path, "index.html")}


def questions_index(r: Renderer) -> None:
    path = QUESTIONS
    tracks: dict[str, list[dict[str, Any]]] = {}
    for q in sorted(r.cat.questions.values(), key=lambda q: (q.meta.track, q.meta.order)):
        tracks.setdefault(q.meta.track, []).append({
            "key": f"question:{q.id}", "title": q.meta.title, "summary": q.meta.summary,
            "href": relative(path, page_url("question", q.id, r.cat)),
            "access": r.access_badge("question", q.id, q.access)})
    r.page("questions.html", path, "Worked questions",
           f"All {len(r.cat.questions)} worked questions, by track, with what each needs to read "
           "and your own grade.", index=None,
           tracks=[{"track": t, "id": re.sub(r"[^a-z0-9]+", "-", t.lower()).strip("-"),
                    "questions": qs} for t, qs in tracks.items()],
           review_href=relative(path, "review/index.html"), up_next=_home(r, path))


def experiments_index(r: Renderer) -> None:
    path = EXPERIMENTS
    rows = [{"title": e.meta.title, "summary": e.meta.summary,
             "href": relative(path, page_url("experiment", e.id, r.cat)),
             "access": r.access_badge("experiment", e.id, e.access)}
            for e in sorted(r.cat.experiments.values(), key=lambda e: e.meta.title.lower())]
    r.page("experiments.html", path, "Experiments",
           f"All {len(rows)} experiments: models to change the inputs of and read the bound.",
           index=None, experiments=rows,
           up_next=_home(r, path))


def _citations(r: Renderer) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Capsule ids citing each case id by a figure, and each topic by a chart."""
    by_case: dict[str, list[str]] = {}
    by_topic: dict[str, list[str]] = {}
    for cap in r.cat.capsules.values():
        if cap.draft:
            continue
        for body in (cap.preview, cap.rest):
            if body is None:
                continue
            for ref, _ in body.refs.figures:
                ids = by_case.setdefault(str(ref.get("case", "")), [])
                if cap.id not in ids:
                    ids.append(cap.id)
            for text, _ in body.refs.charts:
                m = _CHART_TOPIC.search(text)
                if m:
                    ids = by_topic.setdefault(m.group(1), [])
                    if cap.id not in ids:
                        ids.append(cap.id)
    return by_case, by_topic


def measurement_rows(r: Renderer, path: str) -> list[dict[str, Any]]:
    """One row per results case of every GPU, newest GPU file first, cases in file order."""
    by_case, by_topic = _citations(r)
    rows = []
    for slug in sorted(r.m.results, key=lambda s: (s != r.m.primary, s)):
        results = r.m.results[slug]
        for c in results.cases:
            run = results.runs.get(c.run)
            cited = by_case.get(c.id) or by_topic.get(c.topic) or []
            rows.append({
                "kernel": c.id, "title": c.title, "topic": c.topic, "shape": c.shape_label,
                "headline": c.headline,
                "gpu": run.provenance.gpu_name if run else slug,
                "date": run.provenance.date[:10] if run else "",
                "time": format_value("us", c.stat.median_ms * 1000),
                "time_us": f"{c.stat.median_ms * 1000:.3f}",
                "pct_roofline": format_value("pct_roofline", c.pct_roofline)
                if c.pct_roofline else "",
                "pct_library": format_value("pct_library", c.pct_library)
                if c.pct_library else "",
                "library": c.library or "",
                "cited": [{"title": r.cat.capsules[x].meta.title,
                           "href": relative(path, page_url("capsule", x, r.cat))}
                          for x in cited[:3]],
            })
    return rows


def measurements_index(r: Renderer) -> None:
    path = MEASUREMENTS
    rows = measurement_rows(r, path)
    methods = [{"title": r.cat.capsules[c].meta.title,
                "href": relative(path, page_url("capsule", c, r.cat))}
               for c in METHOD_CAPSULES if c in r.cat.capsules and not r.cat.capsules[c].draft]
    r.page("measurements.html", path, "Every measurement",
           f"All {len(rows)} measured cases: kernel, shape, GPU, date, time, share of the "
           "roofline ceiling and of the fastest library, with the capsules that cite each.",
           index=None, rows=rows,
           topics=sorted({row["topic"] for row in rows}),
           gpus=sorted({row["gpu"] for row in rows}), methods=methods, up_next=_home(r, path))
