"""Stage 2, `validate`: raw documents into one immutable `Catalog`.

Every document is checked against its strict model, then every reference
between documents is resolved. All problems are collected with `path:line:col`,
a stable code and, where one helps, a hint; nothing is raised here.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from curriculum.assets import DEFAULT_MAX_BYTES
from curriculum.bodies import check_body, describe, parse_body, schema_errors
from curriculum.catalog import (
    PACK_TOKENS_ABOVE,
    Body,
    CapsuleEntry,
    Catalog,
    CourseEntry,
    ExperimentEntry,
    PathEntry,
    QuestionEntry,
)
from curriculum.errors import Diagnostics, Loc, did_you_mean
from curriculum.lint import lint_yaml
from curriculum.load import RawDoc
from curriculum.markdown import split_at_marker
from curriculum.models import (
    SOURCE_MODELS,
    CapsuleMeta,
    Course,
    Ladder,
    Placement,
    Site,
    Syllabus,
)
from curriculum.syllabus import check_syllabus_counts

if TYPE_CHECKING:
    from curriculum.measure import Measurements

_body, _check_body = parse_body, check_body  # the names older tests import

WORDS_PER_MINUTE = 220
CODE_LINES_PER_MINUTE = 12
MINUTES_PER_FIGURE = 0.5


def _model(doc: RawDoc, diags: Diagnostics) -> Any:
    model = SOURCE_MODELS[doc.kind]
    if not isinstance(doc.data, dict):
        diags.error(doc.positions.loc(()), "schema.type",
                    f"expected a mapping of keys, got {describe(doc.data)}")
        return None
    try:
        return model.model_validate(doc.data)
    except ValidationError as exc:
        schema_errors(doc, model, exc, diags)
        return None


def _minutes(*bodies: Body | None) -> int:
    words = code = figs = 0
    for b in bodies:
        if b is None:
            continue
        words += b.refs.words
        code += b.refs.code_lines
        figs += len(b.refs.charts) + len(b.refs.images)
    total = words / WORDS_PER_MINUTE + code / CODE_LINES_PER_MINUTE + figs * MINUTES_PER_FIGURE
    return max(1, math.ceil(total))


# --- related concepts -------------------------------------------------------------------

_STOP = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "how", "in", "into", "is", "it", "its", "of", "on", "or", "that", "the", "this", "to", "was", "what", "when", "where", "which", "why", "with", "you", "your", "one", "two", "does", "do", "not", "can", "per", "each", "than"]
)


def _terms(*texts: str) -> Counter[str]:
    words = re.findall(r"[a-z0-9]+", " ".join(texts).lower())
    return Counter(w for w in words if w not in _STOP and len(w) > 2)


def rank_related(question_terms: Counter[str], candidates: dict[str, Counter[str]]
                 ) -> tuple[tuple[str, float], ...]:
    """Cosine similarity of term counts; best first, ties by id."""
    def cosine(a: Counter[str], b: Counter[str]) -> float:
        dot = sum(a[t] * b[t] for t in a.keys() & b.keys())
        norm = math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values()))
        return dot / norm if norm else 0.0
    scored = [(cid, round(cosine(question_terms, terms), 4)) for cid, terms in candidates.items()]
    return tuple(sorted(scored, key=lambda x: (-x[1], x[0])))


# --- the whole catalog ----------------------------------------------------------------------


def _capsule(doc: RawDoc, meta: CapsuleMeta, place: tuple[str, str, str], root: Path,
             ids: dict[str, set[str]], diags: Diagnostics, limit: int,
             pack: bool = False) -> CapsuleEntry:
    """One placed capsule's entry: its body split at `<!-- more -->`, parsed once, and
    checked when the capsule is ready."""
    head, tail, at = split_at_marker(doc.body, "more")
    preview = parse_body(head, doc.file, doc.body_line)
    rest = parse_body(tail, doc.file, doc.body_line + at) if tail is not None else None
    if meta.status == "ready":
        if not doc.body.strip():
            diags.error(Loc(doc.file, doc.body_line, 1), "capsule.empty",
                        "a ready capsule needs a body", "write it, or set status: draft")
        lint_yaml(doc, diags)
        for b in (preview, rest):
            if b is not None:
                check_body(b, root, ids, diags, limit)
    if pack:  # checked: from here on only the renderer reads the tokens
        preview, rest = preview.packed(), rest.packed() if rest is not None else None
    return CapsuleEntry(doc.id, *place, meta, Loc(doc.file, 1, 1), preview, rest,
                        _minutes(preview, rest),
                        sum(len(b.refs.figures) + len(b.refs.charts)
                            for b in (preview, rest) if b is not None))


def validate(docs: list[RawDoc], root: Path, diags: Diagnostics,
             templates: Path | None = None) -> Catalog | None:
    """Build the catalog, or return None when the documents cannot form one."""
    by_kind: dict[str, list[tuple[RawDoc, Any]]] = {}
    for doc in docs:
        by_kind.setdefault(doc.kind, []).append((doc, _model(doc, diags)))

    site_docs = by_kind.get("site", [])
    site: Site | None = site_docs[0][1] if site_docs else None
    limit = site.max_asset_bytes if site else DEFAULT_MAX_BYTES
    tiers = {t.id for t in site.tiers} if site else set()
    if site:
        _check_site(site, site_docs[0][0], diags)

    def check_access(doc: RawDoc, access: str) -> None:
        if site and access not in tiers:
            diags.error(doc.positions.loc(("access",)), "access.unknown-tier",
                        f"no access tier '{access}'", did_you_mean(access, tiers) or
                        f"tiers: {', '.join(t.id for t in site.tiers)}")

    capsule_docs = [(d, m) for d, m in by_kind.get("capsule", []) if m is not None]
    question_docs = [(d, m) for d, m in by_kind.get("question", []) if m is not None]
    experiment_docs = [(d, m) for d, m in by_kind.get("experiment", []) if m is not None]
    path_docs = [(d, m) for d, m in by_kind.get("path", []) if m is not None]
    ids = {
        "capsule": {d.id for d, _ in by_kind.get("capsule", [])},
        "question": {d.id for d, _ in by_kind.get("question", [])},
        "experiment": {d.id for d, _ in by_kind.get("experiment", [])},
    }

    # Courses and where each capsule sits in them.
    courses: dict[str, CourseEntry] = {}
    placement: dict[str, tuple[str, str, str]] = {}  # capsule -> (course, part, number)
    capsule_course = {d.id: d.course for d, _ in by_kind.get("capsule", [])}
    dup = Counter(d.id for d, _ in by_kind.get("capsule", []))
    for d, _ in by_kind.get("capsule", []):
        if dup[d.id] > 1:
            diags.error(Loc(d.file, 1, 1), "capsule.duplicate-id",
                        f"capsule id '{d.id}' is used by {dup[d.id]} files")
    syllabi = {d.course: (d, m) for d, m in by_kind.get("syllabus", [])}
    broken_courses = {d.id for d, m in by_kind.get("course", []) if m is None}
    for doc, course in by_kind.get("course", []):
        if course is None:
            continue
        _check_course(doc, course, capsule_course, placement, diags)
        lint_yaml(doc, diags)
        syl_doc, syllabus = syllabi.get(doc.id, (None, None))
        if syl_doc is not None and syllabus is not None:
            _check_syllabus(syl_doc, syllabus, course, diags)
            lint_yaml(syl_doc, diags)
        courses[doc.id] = CourseEntry(doc.id, course, doc.positions.loc(()), tuple(course.parts),
                                      syllabus)
    if site:
        for i, cid in enumerate(site.courses):
            if cid not in courses and cid not in {d.id for d, _ in by_kind.get("course", [])}:
                diags.error(site_docs[0][0].positions.loc(("courses", i)), "site.unknown-course",
                            f"no course '{cid}'", did_you_mean(cid, courses))

    # Capsules.
    capsules: dict[str, CapsuleEntry] = {}
    for doc, meta in capsule_docs:
        check_access(doc, meta.access)
        for i, pre in enumerate(meta.prerequisites):
            if pre not in ids["capsule"]:
                diags.error(doc.positions.loc(("prerequisites", i)),
                            "capsule.unknown-prerequisite", f"no capsule '{pre}'",
                            did_you_mean(pre, ids["capsule"]))
        if doc.id not in placement:
            if doc.course in broken_courses:
                continue  # its course.yaml did not validate; that error is enough
            diags.error(Loc(doc.file, 1, 1), "capsule.unlisted",
                        f"capsule '{doc.id}' is in no part of course '{doc.course}'",
                        f"add it to content/courses/{doc.course}/course.yaml")
            continue
        course_id, part_id, number = placement[doc.id]
        capsules[doc.id] = _capsule(doc, meta, (course_id, part_id, number), root, ids, diags,
                                    limit, pack=len(capsule_docs) > PACK_TOKENS_ABOVE)
    _check_cycles(capsule_docs, diags)
    for cid, entry in courses.items():
        syl_doc, syllabus = syllabi.get(cid, (None, None))
        if syl_doc is not None and syllabus is not None:
            check_syllabus_counts(syl_doc, syllabus, entry.meta, capsules, diags)

    # Worked questions.
    site_lowest = site.tiers[0].id if site else ""
    capsule_terms = {cid: _terms(c.meta.title, c.meta.summary, c.meta.tag,
                                 c.preview.text if c.meta.access == site_lowest else "")
                     for cid, c in capsules.items()}
    questions: dict[str, QuestionEntry] = {}
    orders: dict[tuple[str, int], str] = {}
    for doc, meta in question_docs:
        check_access(doc, meta.access)
        key = (meta.track, meta.order)
        if key in orders:
            diags.error(doc.positions.loc(("order",)), "question.duplicate-order",
                        f"track '{meta.track}' already has order {meta.order} ('{orders[key]}')")
        orders[key] = doc.id
        for i, concept in enumerate(meta.concepts):
            if concept not in ids["capsule"]:
                diags.error(doc.positions.loc(("concepts", i)), "question.unknown-concept",
                            f"no capsule '{concept}'", did_you_mean(concept, ids["capsule"]))
        head, tail, at = split_at_marker(doc.body, "answer")
        if tail is None:
            diags.error(Loc(doc.file, doc.body_line, 1), "question.no-answer",
                        "no '<!-- answer -->' line between the question and the answer")
            continue
        q_body = parse_body(head, doc.file, doc.body_line)
        a_body = parse_body(tail, doc.file, doc.body_line + at)
        lint_yaml(doc, diags)
        for b in (q_body, a_body):
            check_body(b, root, ids, diags, limit)
        q_terms = _terms(meta.title, meta.summary, q_body.text)
        related = rank_related(q_terms, {c: capsule_terms[c] for c in meta.concepts
                                         if c in capsule_terms})
        questions[doc.id] = QuestionEntry(doc.id, meta, Loc(doc.file, 1, 1), q_body, a_body, related)

    # Experiments.
    experiments: dict[str, ExperimentEntry] = {}
    for doc, meta in experiment_docs:
        check_access(doc, meta.access)
        script = (templates or root / "templates") / "static/js/experiments" / f"{meta.script}.js"
        if not script.is_file():
            diags.error(doc.positions.loc(("script",)), "experiment.no-script",
                        f"no script templates/static/js/experiments/{meta.script}.js")
        head, tail, at = split_at_marker(doc.body, "more")
        preview = parse_body(head, doc.file, doc.body_line)
        rest = parse_body(tail, doc.file, doc.body_line + at) if tail is not None else None
        lint_yaml(doc, diags)
        for b in (preview, rest):
            if b is not None:
                check_body(b, root, ids, diags, limit)
        experiments[doc.id] = ExperimentEntry(doc.id, meta, Loc(doc.file, 1, 1), preview, rest)

    # Paths.
    paths: dict[str, PathEntry] = {}
    for doc, meta in path_docs:
        lint_yaml(doc, diags)
        for i, step in enumerate(meta.steps):
            kind, target = step.target
            if target not in ids[kind]:
                diags.error(doc.positions.loc(("steps", i, kind)), "step.unknown-ref",
                            f"no {kind} '{target}'", did_you_mean(target, ids[kind]))
        paths[doc.id] = PathEntry(doc.id, meta, doc.positions.loc(()))

    # Practice ladder.
    ladder: Ladder | None = None
    ladder_loc: Loc | None = None
    for doc, lad in by_kind.get("ladder", []):
        if lad is None:
            continue
        ladder, ladder_loc = lad, doc.positions.loc(())
        lint_yaml(doc, diags)
        _check_ladder(doc, lad, ids["capsule"], diags)

    placement: Placement | None = None
    placement_loc: Loc | None = None
    for doc, check in by_kind.get("placement", []):
        if check is None:
            continue
        placement, placement_loc = check, doc.positions.loc(())
        lint_yaml(doc, diags)
        _check_placement(doc, check, courses, broken_courses, capsules,
                         {d.id for d, _ in by_kind.get("path", [])}, diags)

    from curriculum.puzzle.content import check_puzzles

    check_puzzles(root, [t.id for t in site.tiers] if site else [], ids, diags, limit)

    if site is None or diags.errors:
        return None
    return Catalog(
        site=site,
        courses=MappingProxyType(courses),
        capsules=MappingProxyType(capsules),
        questions=MappingProxyType(questions),
        experiments=MappingProxyType(experiments),
        paths=MappingProxyType(paths),
        ladder=ladder,
        ladder_loc=ladder_loc,
        placement=placement,
        placement_loc=placement_loc,
    )


def _check_site(site: Site, doc: RawDoc, diags: Diagnostics) -> None:
    tier_ids = [t.id for t in site.tiers]
    for i, t in enumerate(tier_ids):
        if tier_ids.index(t) != i:
            diags.error(doc.positions.loc(("tiers", i, "id")), "site.duplicate-tier",
                        f"tier '{t}' is declared twice")
    for i, e in enumerate(site.editions):
        if e.max_tier not in tier_ids:
            diags.error(doc.positions.loc(("editions", i, "max_tier")), "access.unknown-tier",
                        f"no access tier '{e.max_tier}'", did_you_mean(e.max_tier, tier_ids))
    for i, t in enumerate(site.tiers):
        if i > 0 and t.offer is None:
            diags.error(doc.positions.loc(("tiers", i), prefer_key=True), "tier.no-offer",
                        f"tier '{t.id}' says nothing about what it gives or where to get it",
                        "add offer: {gives, price, join_label, join_url, sign_in_url}")
    if not site.base_url.endswith("/"):
        diags.error(doc.positions.loc(("base_url",)), "site.base-url", "base_url must end in '/'")


def _check_placement(doc: RawDoc, check: Placement, courses: dict[str, CourseEntry],
                     broken_courses: set[str], capsules: dict[str, CapsuleEntry],
                     path_ids: set[str], diags: Diagnostics) -> None:
    course = courses.get(check.course)
    if course is None:
        if check.course in broken_courses:
            return  # its course.yaml did not validate; that error is enough
        diags.error(doc.positions.loc(("course",)), "placement.unknown-course",
                    f"no course '{check.course}'", did_you_mean(check.course, courses))
        return
    parts = [p.id for p in course.parts]
    seen: set[str] = set()
    for i, item in enumerate(check.items):
        if item.id in seen:
            diags.error(doc.positions.loc(("items", i, "id")), "placement.duplicate-id",
                        f"item '{item.id}' is declared twice")
        seen.add(item.id)
        if item.part not in parts:
            diags.error(doc.positions.loc(("items", i, "part")), "placement.unknown-part",
                        f"no part '{item.part}' in course '{course.id}'",
                        did_you_mean(item.part, parts))
        cap = capsules.get(item.capsule)
        if cap is None:
            diags.error(doc.positions.loc(("items", i, "capsule")), "placement.unknown-capsule",
                        f"no capsule '{item.capsule}'", did_you_mean(item.capsule, capsules))
        elif cap.draft:
            diags.warning(doc.positions.loc(("items", i, "capsule")), "placement.draft-capsule",
                          f"capsule '{item.capsule}' is a draft; a reader who misses this item "
                          "is sent to its course page", "point the item at a ready capsule")
        if item.answer >= len(item.choices):
            diags.error(doc.positions.loc(("items", i, "answer")), "placement.answer-range",
                        f"answer {item.answer} but only {len(item.choices)} choices "
                        f"(counted from 0)")
    for i, rule in enumerate(check.suggest):
        if rule.path not in path_ids:
            diags.error(doc.positions.loc(("suggest", i, "path")), "placement.unknown-path",
                        f"no path '{rule.path}'", did_you_mean(rule.path, path_ids))
        for part in rule.min:
            if part not in parts:
                diags.error(doc.positions.loc(("suggest", i, "min", part), prefer_key=True),
                            "placement.unknown-part", f"no part '{part}' in course '{course.id}'",
                            did_you_mean(part, parts))
    last = check.suggest[-1]
    if last.min or last.min_total:
        diags.error(doc.positions.loc(("suggest", len(check.suggest) - 1)),
                    "placement.no-default", "the last rule has minimums, so a score may match none",
                    "end with a rule that has only path and reason")


def _check_course(doc: RawDoc, course: Course, capsule_course: dict[str, str | None],
                  placement: dict[str, tuple[str, str, str]], diags: Diagnostics) -> None:
    if course.id != doc.id:
        diags.error(doc.positions.loc(("id",)), "course.id-mismatch",
                    f"course id '{course.id}' differs from its folder '{doc.id}'")
    seen_parts: set[str] = set()
    for pi, part in enumerate(course.parts):
        if part.id in seen_parts:
            diags.error(doc.positions.loc(("parts", pi, "id")), "course.duplicate-part",
                        f"part id '{part.id}' is used twice")
        seen_parts.add(part.id)
        for ci, cid in enumerate(part.capsules):
            loc = doc.positions.loc(("parts", pi, "capsules", ci))
            if cid in placement:
                diags.error(loc, "course.duplicate-capsule",
                            f"capsule '{cid}' is already listed as {placement[cid][2]}")
            elif capsule_course.get(cid) != doc.id:
                diags.error(loc, "course.unknown-capsule",
                            f"no capsule '{cid}' in content/courses/{doc.id}/capsules/",
                            did_you_mean(cid, [c for c, k in capsule_course.items() if k == doc.id])
                            or f"create content/courses/{doc.id}/capsules/{cid}.md")
            else:
                placement[cid] = (doc.id, part.id, f"{pi + 1}.{ci + 1}")


def _check_syllabus(doc: RawDoc, syllabus: Syllabus, course: Course, diags: Diagnostics) -> None:
    in_course = {c for p in course.parts for c in p.capsules}
    for ui, unit in enumerate(syllabus.units):
        for li, lesson in enumerate(unit.lessons):
            if lesson.capsule not in in_course:
                diags.error(doc.positions.loc(("units", ui, "lessons", li, "capsule")),
                            "syllabus.unknown-capsule",
                            f"no capsule '{lesson.capsule}' in course '{course.id}'",
                            did_you_mean(lesson.capsule, in_course))


def _check_ladder(doc: RawDoc, ladder: Ladder, capsule_ids: set[str], diags: Diagnostics) -> None:
    modules: set[str] = set()
    drills: set[str] = set()
    for mi, module in enumerate(ladder.modules):
        if module.id in modules:
            diags.error(doc.positions.loc(("modules", mi, "id")), "ladder.duplicate-id",
                        f"module '{module.id}' is declared twice")
        modules.add(module.id)
        for di, drill in enumerate(module.drills):
            if drill.id in drills:
                diags.error(doc.positions.loc(("modules", mi, "drills", di, "id")),
                            "ladder.duplicate-id", f"drill '{drill.id}' is declared twice")
            drills.add(drill.id)
            if drill.lesson not in capsule_ids:
                diags.error(doc.positions.loc(("modules", mi, "drills", di, "lesson")),
                            "drill.unknown-lesson", f"no capsule '{drill.lesson}'",
                            did_you_mean(drill.lesson, capsule_ids))


def _check_cycles(capsule_docs: list[tuple[RawDoc, CapsuleMeta]], diags: Diagnostics) -> None:
    graph = {d.id: [p for p in m.prerequisites] for d, m in capsule_docs}
    docs = {d.id: d for d, _ in capsule_docs}
    state: dict[str, int] = {}  # 1 visiting, 2 done
    reported: set[frozenset[str]] = set()

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):]
                key = frozenset(cycle)
                if key not in reported:
                    reported.add(key)
                    first = min(cycle)
                    d = docs[first]
                    diags.error(d.positions.loc(("prerequisites",)), "capsule.prerequisite-cycle",
                                "prerequisites form a cycle: " +
                                " -> ".join([*_rotate(cycle, first), first]))
            elif nxt in graph and state.get(nxt) is None:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if state.get(node) is None:
            visit(node, [])


def _rotate(cycle: list[str], first: str) -> list[str]:
    i = cycle.index(first)
    return cycle[i:] + cycle[:i]


def revalidate_capsule(base: Catalog, docs: list[RawDoc], doc: RawDoc, root: Path,
                       m: Measurements, diags: Diagnostics) -> Catalog | None:
    """The catalog with capsule `doc` replaced, as `validate` + `measure` would build it.

    Only for an existing, placed capsule whose file still loads; every other
    change goes through the whole pipeline. `docs` is the full, current list.
    Diagnostics land in `diags`: those located in `doc.file`, and the cycle check.
    """
    import dataclasses

    from curriculum.measure import check_body_figures

    old = base.capsules[doc.id]
    meta = _model(doc, diags)
    others = [(d, base.capsules[d.id].meta) for d in docs
              if d.kind == "capsule" and d is not doc and d.id in base.capsules]
    _check_cycles([*others, (doc, meta)] if meta is not None else others, diags)
    if meta is None:
        return None
    tiers = {t.id for t in base.site.tiers}
    if meta.access not in tiers:
        diags.error(doc.positions.loc(("access",)), "access.unknown-tier",
                    f"no access tier '{meta.access}'", did_you_mean(meta.access, tiers) or
                    f"tiers: {', '.join(t.id for t in base.site.tiers)}")
    ids = {kind: {d.id for d in docs if d.kind == kind}
           for kind in ("capsule", "question", "experiment")}
    for i, pre in enumerate(meta.prerequisites):
        if pre not in ids["capsule"]:
            diags.error(doc.positions.loc(("prerequisites", i)), "capsule.unknown-prerequisite",
                        f"no capsule '{pre}'", did_you_mean(pre, ids["capsule"]))
    entry = _capsule(doc, meta, (old.course, old.part, old.number), root, ids, diags,
                     base.site.max_asset_bytes, pack=len(base.capsules) > PACK_TOKENS_ABOVE)
    if meta.status == "ready":
        known = {c.id for r in m.results.values() for c in r.cases}
        for b in (entry.preview, entry.rest):
            if b is not None:
                check_body_figures(m, b, f"capsule '{doc.id}'", known, diags)
    if diags.errors:
        return None
    capsules = {cid: (entry if cid == doc.id else c) for cid, c in base.capsules.items()}
    questions = dict(base.questions)
    for qid, q in base.questions.items():
        if doc.id in q.meta.concepts:
            terms = {c: _terms(x.meta.title, x.meta.summary, x.meta.tag,
                               x.preview.text if x.meta.access == base.lowest_tier else "")
                     for c in q.meta.concepts if (x := capsules.get(c)) is not None}
            related = rank_related(_terms(q.meta.title, q.meta.summary, q.question.text), terms)
            questions[qid] = dataclasses.replace(q, related=related)
    return dataclasses.replace(base, capsules=MappingProxyType(capsules),
                               questions=MappingProxyType(questions))


def revalidate_course(base: Catalog, docs: list[RawDoc], doc: RawDoc,
                      diags: Diagnostics) -> tuple[bool, Catalog | None]:
    """The catalog with course.yaml `doc` replaced, when the edit keeps the same capsules
    in the course (titles, summaries, parts and order may change).

    Returns (False, None) when the edit needs the whole pipeline (a capsule added to or
    removed from the course, or a course that did not validate before); else (True, the
    catalog), the catalog None when the course no longer validates (`diags` says why).
    Capsules that keep their part and number keep their entries.
    """
    import dataclasses

    old = base.courses.get(doc.id)
    if old is None:
        return False, None
    course = _model(doc, diags)
    if course is None:
        return True, None
    capsule_course = {d.id: d.course for d in docs if d.kind == "capsule"}
    placement: dict[str, tuple[str, str, str]] = {}
    _check_course(doc, course, capsule_course, placement, diags)
    lint_yaml(doc, diags)
    if diags.errors:
        return True, None
    if set(placement) != {cid for cid, c in base.capsules.items() if c.course == doc.id}:
        return False, None
    capsules = dict(base.capsules)
    for cid, (_, part, number) in placement.items():
        cap = capsules[cid]
        if (cap.part, cap.number) != (part, number):
            capsules[cid] = dataclasses.replace(cap, part=part, number=number)
    courses = dict(base.courses)
    courses[doc.id] = CourseEntry(doc.id, course, doc.positions.loc(()), tuple(course.parts),
                                  old.syllabus)
    syllabus_doc = next((d for d in docs if d.kind == "syllabus" and d.course == doc.id), None)
    if syllabus_doc is not None and old.syllabus is not None:
        _check_syllabus(syllabus_doc, old.syllabus, course, diags)
        check_syllabus_counts(syllabus_doc, old.syllabus, course, capsules, diags)
    placement_doc = next((d for d in docs if d.kind == "placement"), None)
    if placement_doc is not None and base.placement is not None:
        _check_placement(placement_doc, base.placement, courses, set(), capsules,
                         {d.id for d in docs if d.kind == "path"}, diags)
    if diags.errors:
        return True, None
    return True, dataclasses.replace(base, courses=MappingProxyType(courses),
                                     capsules=MappingProxyType(capsules))
