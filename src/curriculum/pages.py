"""The page kinds: each function turns one part of the edition's catalog into
a template context and asks the renderer for the page."""

from __future__ import annotations

import json
from typing import Any

from markupsafe import Markup

from curriculum.catalog import PACK_TOKENS_ABOVE
from curriculum.measure import parse_ref
from curriculum.output import JOIN_PAGE, KIND_LABELS, Chapter, epub_path, page_url, relative
from curriculum.puzzle.site import puzzle_pages, puzzles_href
from curriculum.render import Renderer, capsule_listing, hours, toc
from curriculum.syllabus import lesson_counts


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
    if r.cat.questions:
        review(r)
    if r.cat.placement is not None:
        placement(r)
    rest(r)


def rest(r: Renderer) -> None:
    """The pages that show no capsule, question, experiment or path: the puzzles, the join
    page, search and the 404 page."""
    puzzle_pages(r)
    join(r)
    r.page("search.html", "search/index.html", "Search", f"Search {r.cat.site.title}.",
           up_next=_link(r, "search/index.html", "Home", "index.html"))
    r.page("404.html", "404.html", "Page not found", r.cat.site.description,
           up_next=_link(r, "404.html", "Home", "index.html"))


def _link(r: Renderer, page: str, title: str, target: str, label: str = "Up next") -> dict[str, Any]:
    """A pager link: where "up next" (or "previous") points from `page`."""
    return {"title": title, "href": relative(page, target), "label": label}


def _first_capsule(r: Renderer, course_id: str) -> Any:
    return next((c for c in r.cat.capsules_of(course_id) if not c.draft), None)


def home(r: Renderer) -> None:
    path = "index.html"
    courses = []
    for cid in r.cat.site.courses:
        entry = r.cat.courses[cid]
        caps = r.cat.capsules_of(cid)
        courses.append({"id": cid, "meta": entry.meta, "href": relative(path, page_url("course", cid, r.cat)),
                        **counts(caps)})
    paths = [{"meta": p.meta, "href": relative(path, page_url("path", pid, r.cat))}
             for pid, p in sorted(r.cat.paths.items())]
    questions = [{"meta": q.meta, "href": relative(path, page_url("question", qid, r.cat)),
                  "access": r.access_badge("question", qid, q.access)}
                 for qid, q in sorted(r.cat.questions.items(), key=lambda kv: (kv[1].meta.track, kv[1].meta.order))]
    experiments = [{"meta": e.meta, "href": relative(path, page_url("experiment", eid, r.cat))}
                   for eid, e in sorted(r.cat.experiments.items())]
    first = r.cat.site.courses[0] if r.cat.site.courses else None
    up_next = (_link(r, path, r.cat.courses[first].meta.title, page_url("course", first, r.cat),
                     "Start with") if first else None)
    r.page("home.html", path, r.cat.site.title, r.cat.site.description, index={"kind": "home"},
           courses=courses, paths=paths, questions=questions, experiments=experiments,
           has_ladder=r.cat.ladder is not None, up_next=up_next,
           placement=r.cat.placement, placement_href=relative(path, PLACEMENT_PAGE),
           review_href=relative(path, REVIEW_PAGE), puzzles_href=puzzles_href(r, path))


def counts(caps: list[Any]) -> dict[str, Any]:
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
        parts.append({"number": i, "part": part, **counts(caps),
                      "capsules": [capsule_listing(r, c, path) for c in caps]})
    first = _first_capsule(r, course_id)
    r.page("course.html", path, entry.meta.title, entry.meta.description,
           index={"kind": "course", "access": r.cat.lowest_tier},
           course=entry.meta, parts=parts, **counts(r.cat.capsules_of(course_id)),
           syllabus_href=relative(path, page_url("syllabus", course_id, r.cat)) if entry.syllabus else None,
           epub_href=relative(path, epub_path(course_id, r.view.edition.id)),
           up_next=_link(r, path, first.meta.title, page_url("capsule", first.id, r.cat),
                         "Start with") if first else None)
    if entry.syllabus is not None:
        syllabus(r, course_id)


def syllabus(r: Renderer, course_id: str) -> None:
    entry = r.cat.courses[course_id]
    assert entry.syllabus is not None
    path = page_url("syllabus", course_id, r.cat)
    units = []
    for unit in entry.syllabus.units:
        lessons = [{"lesson": les, "counts": lesson_counts(r.cat.capsules[les.capsule], les),
                    "capsule": capsule_listing(r, r.cat.capsules[les.capsule], path)}
                   for les in unit.lessons]
        units.append({"unit": unit, "lessons": lessons,
                      **{k: sum(getattr(x["counts"], k) for x in lessons)
                         for k in ("minutes", "widgets", "labs", "figures")}})
    first = _first_capsule(r, course_id)
    r.page("syllabus.html", path, entry.syllabus.title, entry.syllabus.summary,
           index={"kind": "syllabus", "access": r.cat.lowest_tier}, course=entry.meta,
           up_next=_link(r, path, first.meta.title, page_url("capsule", first.id, r.cat),
                         "Start with") if first else None,
           course_href=relative(path, page_url("course", course_id, r.cat)),
           syllabus=entry.syllabus, units=units,
           total_minutes=sum(u["minutes"] for u in units))


def capsule(r: Renderer, cap_id: str) -> None:
    cap = r.cat.capsules[cap_id]
    path = page_url("capsule", cap_id, r.cat)
    entry = r.cat.courses[cap.course]
    ordered, position = _reading_order(r, cap.course)
    i = position[cap_id]
    prev_cap = ordered[i - 1] if i > 0 else None
    next_cap = ordered[i + 1] if i + 1 < len(ordered) else None
    part = next(p for p in entry.parts if p.id == cap.part)
    locked = r.view.is_locked("capsule", cap_id)
    preview_html = r.markdown(cap.preview, path)
    rest_html = r.markdown(cap.rest, path)
    r.out.chapters.append(Chapter.of(course=cap.course, part=part.title, capsule=cap_id,
                                     title=cap.meta.title, summary=cap.meta.summary, path=path,
                                     html=str(preview_html) + str(rest_html), locked=locked,
                                     pack=len(r.cat.capsules) > PACK_TOKENS_ABOVE))
    if next_cap is not None:
        up_next = _link(r, path, next_cap.meta.title, page_url("capsule", next_cap.id, r.cat))
    else:
        up_next = _link(r, path, entry.meta.title, page_url("course", cap.course, r.cat),
                        "Back to the course")
    r.page("capsule.html", path, cap.meta.title, cap.meta.summary,
           index={"kind": "capsule", "access": cap.access, "course": entry.meta.title},
           cap=cap, meta=cap.meta, course=entry.meta, part=part,
           course_href=relative(path, page_url("course", cap.course, r.cat)),
           access=r.access_badge("capsule", cap_id, cap.access), locked=locked,
           preview_html=preview_html, rest_html=rest_html,
           toc=toc(r, [cap.preview, cap.rest]),
           prerequisites=[capsule_listing(r, r.cat.capsules[p], path) for p in cap.meta.prerequisites],
           prev=_link(r, path, prev_cap.meta.title, page_url("capsule", prev_cap.id, r.cat),
                      "Previous") if prev_cap else None,
           up_next=up_next, sidebar_html=_sidebar(r, cap.course, cap_id, cap.part))


def _reading_order(r: Renderer, course_id: str) -> tuple[list[Any], dict[str, int]]:
    """The course's written capsules in order, and each one's position."""
    key = ("order", course_id)
    if key not in r.memo:
        ordered = [c for c in r.cat.capsules_of(course_id) if not c.draft]
        r.memo[key] = (ordered, {c.id: i for i, c in enumerate(ordered)})
    return r.memo[key]


def _sidebar(r: Renderer, course_id: str, cap_id: str, part_id: str) -> Markup:
    """The course sidebar: every part of the course by title (each a link to its section of
    the course page, which holds the full contents), and the capsules of the current part
    only, so that a page's size does not grow with the capsules of other parts. It is
    rendered once per part and edition (every capsule page of a course sits at the same
    depth, so the links are the same on each); only the current capsule is marked per
    page. Its items carry no progress keys; the page's script reads each key from the
    link instead."""
    key = ("sidebar", f"{course_id}/{part_id}")
    if key not in r.memo:
        entry = r.cat.courses[course_id]
        sibling = f"courses/{course_id}/-/index.html"  # any capsule page's folder depth
        course_href = relative(sibling, page_url("course", course_id, r.cat))
        parts = [{"part": p, "href": f"{course_href}#part-{p.id}",
                  "capsules": [capsule_listing(r, r.cat.capsules[c], sibling)
                               for c in p.capsules] if p.id == part_id else None}
                 for p in entry.parts]
        r.memo[key] = r.env.get_template("sidebar.html").render(
            course=entry.meta, course_href=course_href, parts=parts)
    html: str = r.memo[key]
    html = html.replace(f'<li><a href="../{cap_id}/index.html">',
                        f'<li class="current"><a href="../{cap_id}/index.html" aria-current="page">', 1)
    return Markup(html)


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
    return {"kind": kind, "key": f"{kind}:{target}", "kind_label": KIND_LABELS[kind],
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
    first = next((s for s in steps if s["href"]), None)
    r.page("path.html", path, entry.meta.title, entry.meta.summary,
           index={"kind": "path", "access": r.cat.lowest_tier}, lp=entry.meta, steps=steps,
           review_href=relative(path, REVIEW_PAGE)
           if any(s["kind"] == "question" for s in steps) else None,
           placement_href=relative(path, PLACEMENT_PAGE) if r.cat.placement else None,
           up_next={"title": first["title"], "href": first["href"], "label": "Start with"}
           if first else None)


def question(r: Renderer, qid: str) -> None:
    q = r.cat.questions[qid]
    path = page_url("question", qid, r.cat)
    track = sorted((x for x in r.cat.questions.values() if x.meta.track == q.meta.track),
                   key=lambda x: x.meta.order)
    later = [x for x in track if x.meta.order > q.meta.order]
    if later:
        up_next = _link(r, path, later[0].meta.title, page_url("question", later[0].id, r.cat),
                        "Up next in this track")
    else:
        up_next = _link(r, path, "Home", "index.html")
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
            ref = parse_ref(inp.default_from)
            fig = r.m.figure(ref) if ref else None
            value = fig.value if fig and fig.value is not None else inp.min
            # Start on the control's own grid: 4.27 TB/s for a step of 0.01, not 4.2724089...
            value = round(value, len(f"{inp.step:g}".partition(".")[2]))
            source = fig.provenance if fig else None
        inputs.append({"input": inp, "value": value, "text": _number(value), "source": source})
    ids = sorted(r.cat.experiments)
    later = ids[ids.index(eid) + 1:]
    up_next = (_link(r, path, r.cat.experiments[later[0]].meta.title,
                     page_url("experiment", later[0], r.cat)) if later
               else _link(r, path, "Home", "index.html"))
    r.page("experiment.html", path, e.meta.title, e.meta.summary, up_next=up_next, table=None,
           index={"kind": "experiment", "access": e.access},
           exp=e, meta=e.meta, locked=r.view.is_locked("experiment", eid),
           access=r.access_badge("experiment", eid, e.access), inputs=inputs,
           script=f"static/js/experiments/{e.meta.script}.js",
           preview_html=r.markdown(e.preview, path), rest_html=r.markdown(e.rest, path))


def _number(value: float | None) -> str:
    """An input's value as a person would type it: 8192, not 8192.0."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else f"{value:.10g}"


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
    first = next((d["lesson"] for m in modules for d in m["drills"] if d["lesson"]["href"]), None)
    r.page("ladder.html", path, lad.title, lad.summary, index={"kind": "ladder", "access": r.cat.lowest_tier},
           ladder=lad, modules=modules,
           up_next={"title": first["title"], "href": first["href"], "label": "Up next"}
           if first else None)


# -- the join page, the self-grade review and the placement check ------------------------

REVIEW_PAGE = "review/index.html"
PLACEMENT_PAGE = "placement/index.html"


def join(r: Renderer) -> None:
    """What each tier gives and where to get it, from site.yaml: where every locked
    page, card and path step points."""
    path = JOIN_PAGE
    rank = r.cat.tier_rank
    limit = rank[r.view.edition.max_tier]
    tiers = [{"tier": t, "open": rank[t.id] <= limit} for t in r.cat.site.tiers]
    r.page("join.html", path, "What each tier gives",
           f"What each tier of {r.cat.site.title} opens, what it costs, and where to get it "
           "or sign in.",
           index={"kind": "join", "access": r.cat.lowest_tier}, tiers=tiers,
           up_next=_link(r, path, "Home", "index.html"))


def review(r: Renderer) -> None:
    """Every worked question with the reader's own grade (filled in from progress by
    site.js) and what to redo: the rubric's weak lines, or its strong-hire lines for an
    answer graded hire. A question whose rubric this edition withholds links back."""
    path = REVIEW_PAGE
    ordered = sorted(r.cat.questions.values(), key=lambda q: (q.meta.track, q.meta.order))
    tracks: list[dict[str, Any]] = []
    for q in ordered:
        if not tracks or tracks[-1]["track"] != q.meta.track:
            tracks.append({"track": q.meta.track, "questions": []})
        rubric = q.meta.rubric
        tracks[-1]["questions"].append({
            "id": q.id, "key": f"question:{q.id}", "title": q.meta.title,
            "href": relative(path, page_url("question", q.id, r.cat)),
            "access": r.access_badge("question", q.id, q.access),
            "weak": list(rubric.weak) if rubric is not None else None,
            "strong": list(rubric.strong_hire) if rubric is not None else None})
    n = len(ordered)
    first = ordered[0]
    r.page("review.html", path, f"The {n}-question interview review",
           "Every worked question with the grade you gave your own attempt, and what to redo "
           "before the next one.", index={"kind": "review", "access": r.cat.lowest_tier},
           tracks=tracks, total=n,
           up_next=_link(r, path, first.meta.title, page_url("question", first.id, r.cat),
                         "Start with"))


def placement(r: Renderer) -> None:
    """The placement check: one form of items whose answers placement.js checks; it
    scores each part, picks the first rule the scores meet, and starts the reader at the
    first missed item's capsule (one on the suggested path if any was missed there)."""
    check = r.cat.placement
    assert check is not None
    path = PLACEMENT_PAGE
    course = r.cat.courses[check.course]
    order = {c.id: i for i, c in enumerate(r.cat.capsules_of(check.course))}
    part_titles = {p.id: p.title for p in course.parts}
    items = []
    for item in check.items:
        cap = r.cat.capsules[item.capsule]
        target = (page_url("course", cap.course, r.cat) + f"#{cap.id}" if cap.draft
                  else page_url("capsule", cap.id, r.cat))
        items.append({"item": item, "part_title": part_titles[item.part],
                      "capsule_title": cap.meta.title, "capsule_order": order[cap.id],
                      "capsule_href": relative(path, target)})
    parts = [{"id": p.id, "title": p.title} for p in course.parts
             if any(i.part == p.id for i in check.items)]
    rules = []
    for rule in check.suggest:
        lp = r.cat.paths[rule.path]
        steps = [_step(r, *s.target, path) for s in lp.meta.steps]
        first = next((s for s in steps if s["href"]), None)
        rules.append({"rule": rule, "title": lp.meta.title,
                      "href": relative(path, page_url("path", rule.path, r.cat)),
                      "first_title": first["title"] if first else "",
                      "first_href": first["href"] if first else "",
                      "min_json": json.dumps(rule.min, sort_keys=True),
                      "capsules": " ".join(t for k, t in (x.target for x in lp.meta.steps)
                                           if k == "capsule")})
    r.page("placement.html", path, check.title, check.summary,
           index={"kind": "placement", "access": r.cat.lowest_tier}, check=check,
           items=items, parts=parts, rules=rules,
           up_next={"title": rules[-1]["title"], "href": rules[-1]["href"], "label": "Or start with"})
