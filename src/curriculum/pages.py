"""The page kinds: each function turns one part of the edition's catalog into
a template context and asks the renderer for the page."""

from __future__ import annotations

from typing import Any

from curriculum.render import Renderer, capsule_listing, hours, page_url, relative, toc


def render_pages(r: Renderer) -> None:
    home(r)
    for course_id in r.cat.site.courses:
        course(r, course_id)
    for cap in r.cat.capsules.values():
        if not cap.draft:
            capsule(r, cap.id)
    for path_id in sorted(r.cat.paths):
        learning_path(r, path_id)
    for qid in sorted(r.cat.questions):
        question(r, qid)
    for eid in sorted(r.cat.experiments):
        experiment(r, eid)
    if r.cat.ladder is not None:
        ladder(r)
    r.page("404.html", "404.html", "Page not found", r.cat.site.description)


def home(r: Renderer) -> None:
    path = "index.html"
    courses = []
    for cid in r.cat.site.courses:
        entry = r.cat.courses[cid]
        caps = r.cat.capsules_of(cid)
        courses.append({"id": cid, "meta": entry.meta, "href": relative(path, page_url("course", cid, r.cat)),
                        **_counts(caps)})
    paths = [{"meta": p.meta, "href": relative(path, page_url("path", pid, r.cat))}
             for pid, p in sorted(r.cat.paths.items())]
    questions = [{"meta": q.meta, "href": relative(path, page_url("question", qid, r.cat)),
                  "access": r.access_badge("question", qid, q.access)}
                 for qid, q in sorted(r.cat.questions.items(), key=lambda kv: (kv[1].meta.track, kv[1].meta.order))]
    experiments = [{"meta": e.meta, "href": relative(path, page_url("experiment", eid, r.cat))}
                   for eid, e in sorted(r.cat.experiments.items())]
    r.page("home.html", path, r.cat.site.title, r.cat.site.description, index={"kind": "home"},
           courses=courses, paths=paths, questions=questions, experiments=experiments,
           has_ladder=r.cat.ladder is not None)


def _counts(caps: list[Any]) -> dict[str, Any]:
    ready = [c for c in caps if not c.draft]
    return {"n_capsules": len(ready), "n_drafts": len(caps) - len(ready),
            "n_figures": sum(c.figures for c in ready),
            "hours": hours(sum(c.minutes for c in ready))}


def course(r: Renderer, course_id: str) -> None:
    entry = r.cat.courses[course_id]
    path = page_url("course", course_id, r.cat)
    parts = []
    for i, part in enumerate(entry.parts, start=1):
        caps = [r.cat.capsules[c] for c in part.capsules]
        parts.append({"number": i, "part": part, **_counts(caps),
                      "capsules": [capsule_listing(r, c, path) for c in caps]})
    r.page("course.html", path, entry.meta.title, entry.meta.description,
           index={"kind": "course", "access": "free"},
           course=entry.meta, parts=parts, **_counts(r.cat.capsules_of(course_id)),
           syllabus_href=relative(path, page_url("syllabus", course_id, r.cat)) if entry.syllabus else None)
    if entry.syllabus is not None:
        syllabus(r, course_id)


def syllabus(r: Renderer, course_id: str) -> None:
    entry = r.cat.courses[course_id]
    assert entry.syllabus is not None
    path = page_url("syllabus", course_id, r.cat)
    units = []
    for unit in entry.syllabus.units:
        lessons = [{"lesson": les, "capsule": capsule_listing(r, r.cat.capsules[les.capsule], path)}
                   for les in unit.lessons]
        units.append({"unit": unit, "lessons": lessons,
                      "minutes": sum(les.minutes for les in unit.lessons),
                      "widgets": sum(les.widgets for les in unit.lessons),
                      "labs": sum(les.labs for les in unit.lessons)})
    r.page("syllabus.html", path, entry.syllabus.title, entry.syllabus.summary,
           index={"kind": "syllabus", "access": "free"}, course=entry.meta,
           course_href=relative(path, page_url("course", course_id, r.cat)),
           syllabus=entry.syllabus, units=units,
           total_minutes=sum(u["minutes"] for u in units))


def capsule(r: Renderer, cap_id: str) -> None:
    cap = r.cat.capsules[cap_id]
    path = page_url("capsule", cap_id, r.cat)
    entry = r.cat.courses[cap.course]
    ordered = [c for c in r.cat.capsules_of(cap.course) if not c.draft]
    i = ordered.index(cap)
    prev_cap = ordered[i - 1] if i > 0 else None
    next_cap = ordered[i + 1] if i + 1 < len(ordered) else None
    part = next(p for p in entry.parts if p.id == cap.part)
    locked = r.view.is_locked("capsule", cap_id)
    sidebar = [{"part": p, "open": p.id == cap.part,
                "capsules": [capsule_listing(r, r.cat.capsules[c], path) for c in p.capsules]}
               for p in entry.parts]
    r.page("capsule.html", path, cap.meta.title, cap.meta.summary,
           index={"kind": "capsule", "access": cap.access, "course": entry.meta.title},
           cap=cap, meta=cap.meta, course=entry.meta, part=part,
           course_href=relative(path, page_url("course", cap.course, r.cat)),
           access=r.access_badge("capsule", cap_id, cap.access), locked=locked,
           preview_html=r.markdown(cap.preview, path), rest_html=r.markdown(cap.rest, path),
           toc=toc([cap.preview, cap.rest]),
           prerequisites=[capsule_listing(r, r.cat.capsules[p], path) for p in cap.meta.prerequisites],
           prev=capsule_listing(r, prev_cap, path) if prev_cap else None,
           next=capsule_listing(r, next_cap, path) if next_cap else None,
           sidebar=sidebar)


def _step(r: Renderer, kind: str, target: str, page: str) -> dict[str, Any]:
    if kind == "capsule":
        cap = r.cat.capsules[target]
        title, access, summary, draft = cap.meta.title, cap.access, cap.meta.summary, cap.draft
    elif kind == "question":
        q = r.cat.questions[target]
        title, access, summary, draft = q.meta.title, q.access, q.meta.summary, False
    else:
        e = r.cat.experiments[target]
        title, access, summary, draft = e.meta.title, e.access, e.meta.summary, False
    return {"kind": kind, "kind_label": {"capsule": "Capsule", "question": "Worked question",
                                         "experiment": "Experiment"}[kind],
            "title": title, "summary": summary, "draft": draft,
            "access": r.access_badge(kind, target, access),
            "href": None if draft else relative(page, page_url(kind, target, r.cat))}


def learning_path(r: Renderer, path_id: str) -> None:
    entry = r.cat.paths[path_id]
    path = page_url("path", path_id, r.cat)
    steps = []
    for i, step in enumerate(entry.meta.steps, start=1):
        kind, target = step.target
        steps.append({"number": i, "note": step.note, **_step(r, kind, target, path)})
    r.page("path.html", path, entry.meta.title, entry.meta.summary,
           index={"kind": "path", "access": "free"}, lp=entry.meta, steps=steps)


def question(r: Renderer, qid: str) -> None:
    q = r.cat.questions[qid]
    path = page_url("question", qid, r.cat)
    track = sorted((x for x in r.cat.questions.values() if x.meta.track == q.meta.track),
                   key=lambda x: x.meta.order)
    later = [x for x in track if x.meta.order > q.meta.order]
    up_next = _step(r, "question", later[0].id, path) if later else None
    related = [{**capsule_listing(r, r.cat.capsules[cid], path), "score": score}
               for cid, score in q.related]
    r.page("question.html", path, q.meta.title, q.meta.summary,
           index={"kind": "question", "access": q.access},
           q=q, meta=q.meta, locked=r.view.is_locked("question", qid),
           access=r.access_badge("question", qid, q.access),
           question_html=r.markdown(q.question, path), answer_html=r.markdown(q.answer, path),
           related=related, up_next=up_next, track_position=track.index(q) + 1,
           track_length=len(track))


def experiment(r: Renderer, eid: str) -> None:
    e = r.cat.experiments[eid]
    path = page_url("experiment", eid, r.cat)
    inputs = []
    for inp in e.meta.inputs:
        value = inp.default
        source = None
        if inp.default_from is not None:
            from curriculum.measure import _parse_ref

            ref = _parse_ref(inp.default_from)
            fig = r.m.figure(ref) if ref else None
            value = fig.value if fig and fig.value is not None else inp.min
            source = fig.provenance if fig else None
        inputs.append({"input": inp, "value": value, "source": source})
    r.page("experiment.html", path, e.meta.title, e.meta.summary,
           index={"kind": "experiment", "access": e.access},
           exp=e, meta=e.meta, locked=r.view.is_locked("experiment", eid),
           access=r.access_badge("experiment", eid, e.access), inputs=inputs,
           script=f"static/js/experiments/{e.meta.script}.js",
           preview_html=r.markdown(e.preview, path), rest_html=r.markdown(e.rest, path))


def ladder(r: Renderer) -> None:
    lad = r.cat.ladder
    assert lad is not None
    path = "ladder/index.html"
    modules = []
    for module in lad.modules:
        drills = [{"drill": d, "lesson": capsule_listing(r, r.cat.capsules[d.lesson], path)}
                  for d in module.drills]
        modules.append({"module": module, "drills": drills,
                        "hours": sum(d.hours for d in module.drills)})
    r.page("ladder.html", path, lad.title, lad.summary, index={"kind": "ladder", "access": "free"},
           ladder=lad, modules=modules)
