"""Editions and access: the one place that decides who sees what.

`for_edition` filters the catalog once, before anything is rendered: a page
above the edition's tier keeps its title, summary, metadata and the preview
before `<!-- more -->`; its remaining body (and a question's answer, rubric and
editor's note) is dropped from the catalog the renderer receives. Nothing
later can leak text it never sees.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass
from types import MappingProxyType

from pydantic import BaseModel

from curriculum.catalog import Body, Catalog
from curriculum.models import Edition


@dataclass(frozen=True)
class EditionView:
    """The catalog as one edition may show it."""

    edition: Edition
    catalog: Catalog
    locked: frozenset[str]  # "capsule:id", "question:id", "experiment:id" above the tier

    def is_locked(self, kind: str, item_id: str) -> bool:
        return f"{kind}:{item_id}" in self.locked

    def tier_allowed(self, tier: str) -> bool:
        rank = self.catalog.tier_rank
        return rank[tier] <= rank[self.edition.max_tier]


def for_edition(catalog: Catalog, edition: Edition) -> EditionView:
    rank = catalog.tier_rank
    limit = rank[edition.max_tier]
    locked: set[str] = set()

    capsules = {}
    for cid, cap in catalog.capsules.items():
        if rank[cap.access] > limit:
            locked.add(f"capsule:{cid}")
            cap = dataclasses.replace(cap, rest=None)
        capsules[cid] = cap

    questions = {}
    for qid, q in catalog.questions.items():
        if rank[q.access] > limit:
            locked.add(f"question:{qid}")
            q = dataclasses.replace(
                q,
                answer=Body("", q.answer.file, q.answer.line),
                meta=q.meta.model_copy(update={"rubric": None, "editor_note": ""}),
            )
        questions[qid] = q

    experiments = {}
    for eid, exp in catalog.experiments.items():
        if rank[exp.access] > limit:
            locked.add(f"experiment:{eid}")
            exp = dataclasses.replace(exp, rest=None)
        experiments[eid] = exp

    filtered = dataclasses.replace(
        catalog,
        capsules=MappingProxyType(capsules),
        questions=MappingProxyType(questions),
        experiments=MappingProxyType(experiments),
    )
    return EditionView(edition, filtered, frozenset(locked))


def public_texts(view: EditionView) -> Iterator[str]:
    """Every text the edition may show in full (for the leak check): the bodies
    at or below its tier, previews, and all metadata, which every edition shows.
    Made as they are read: the leak check may stop early (`LeakCheck.leaks`)."""
    cat = view.catalog
    texts: list[str] = [_metadata_text(cat.site)]
    for entry in (*cat.courses.values(), *cat.paths.values()):
        texts.append(_metadata_text(entry.meta))
    for course in cat.courses.values():
        if course.syllabus is not None:
            texts.append(_metadata_text(course.syllabus))
    if cat.ladder is not None:
        texts.append(_metadata_text(cat.ladder))
    if cat.placement is not None:
        texts.append(_metadata_text(cat.placement))
    for item in (*cat.capsules.values(), *cat.questions.values(), *cat.experiments.values()):
        texts.extend([item.meta.title, item.meta.summary])
    bodies: list[str] = []
    for cap in cat.capsules.values():
        if not cap.draft:
            bodies.append(cap.preview.text)
            if cap.rest is not None:
                bodies.append(cap.rest.text)
    for q in cat.questions.values():
        bodies.extend([q.question.text, q.answer.text])
        if q.meta.rubric is not None:  # shown on its page and on the review page
            texts.append(_metadata_text(q.meta.rubric))
            texts.append(q.meta.editor_note)
    for exp in cat.experiments.values():
        bodies.append(exp.preview.text)
        if exp.rest is not None:
            bodies.append(exp.rest.text)
    yield from texts
    yield from bodies
    yield from (_as_read(b) for b in bodies)


_MARKUP_ONLY = re.compile(r"\]\([^)]*\)|\{fig:[^}]*\}|[*_`#|>]+")


def _as_read(text: str) -> str:
    """Markdown as a reader sees its words: link targets and figure references
    dropped, so a run of words that crosses a link still counts as shown."""
    return _MARKUP_ONLY.sub(" ", text)


def withheld_texts(full: Catalog, view: EditionView) -> list[str]:
    """Every text of the full catalog that the edition must not contain, as a
    reader would see it (link targets and figure references are not shown)."""
    texts: list[str] = []
    for key in sorted(view.locked):
        kind, item_id = key.split(":", 1)
        if kind == "capsule":
            rest = full.capsules[item_id].rest
            if rest is not None:
                texts.append(rest.text)
        elif kind == "question":
            q = full.questions[item_id]
            texts.append(q.answer.text)
            if q.meta.rubric is not None:
                r = q.meta.rubric
                texts.extend([*r.weak, *r.hire, *r.strong_hire])
            texts.append(q.meta.editor_note)
        elif kind == "experiment":
            rest = full.experiments[item_id].rest
            if rest is not None:
                texts.append(rest.text)
    return [_as_read(t) for t in texts]


def _metadata_text(model: BaseModel) -> str:
    """Every string inside a model, one per line."""
    out: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, BaseModel):
            for name in type(value).model_fields:
                walk(getattr(value, name))
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk(model)
    return "\n".join(out)
