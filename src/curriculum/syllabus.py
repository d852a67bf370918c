"""The syllabus view's numbers, computed from the content a unit lists.

A syllabus lesson names a capsule and, for hands-on work, the minutes of lab
time beyond reading (`lab_minutes`). Everything else the page shows is derived
here from the validated capsule: reading minutes, widgets (distinct experiments
the capsule links to), labs (1 for a capsule of kind `lab`, or one with lab
minutes) and measured figures cited. An author may still write `minutes`,
`widgets` or `labs` in the YAML; each must then equal the computed value, so a
typed count can never disagree with the course it describes.
"""

from __future__ import annotations

from dataclasses import dataclass

from curriculum.catalog import CapsuleEntry
from curriculum.errors import Diagnostics
from curriculum.load import RawDoc
from curriculum.models import Course, Lesson, Syllabus

EXPERIMENT_SCHEME = "experiment:"


@dataclass(frozen=True)
class LessonCounts:
    reading: int
    lab_minutes: int
    widgets: int
    labs: int
    figures: int

    @property
    def minutes(self) -> int:
        return self.reading + self.lab_minutes


def lesson_counts(cap: CapsuleEntry, lesson: Lesson) -> LessonCounts:
    """Reading time, lab time, widgets, labs and figures of one syllabus lesson."""
    experiments = {href.split("#", 1)[0] for body in (cap.preview, cap.rest) if body is not None
                   for href, _ in body.refs.links if href.startswith(EXPERIMENT_SCHEME)}
    labs = 1 if cap.meta.kind == "lab" or lesson.lab_minutes > 0 else 0
    return LessonCounts(cap.minutes, lesson.lab_minutes, len(experiments), labs, cap.figures)


def check_syllabus_counts(doc: RawDoc, syllabus: Syllabus, course: Course,
                          capsules: dict[str, CapsuleEntry], diags: Diagnostics) -> None:
    """Typed counts must match the computed ones; every ready capsule of the course is listed."""
    listed: set[str] = set()
    for ui, unit in enumerate(syllabus.units):
        for li, lesson in enumerate(unit.lessons):
            listed.add(lesson.capsule)
            cap = capsules.get(lesson.capsule)
            if cap is None:
                continue  # syllabus.unknown-capsule or capsule.unlisted already says why
            counts = lesson_counts(cap, lesson)
            for name, typed, computed in (("minutes", lesson.minutes, counts.minutes),
                                          ("widgets", lesson.widgets, counts.widgets),
                                          ("labs", lesson.labs, counts.labs)):
                if typed is not None and typed != computed:
                    diags.error(doc.positions.loc(("units", ui, "lessons", li, name)),
                                "syllabus.count-mismatch",
                                f"'{lesson.capsule}' has {name} {computed} by its content, "
                                f"not {typed}",
                                f"delete '{name}:' (it is computed) or change the capsule")
    for part in course.parts:
        for cid in part.capsules:
            cap = capsules.get(cid)
            if cap is not None and not cap.draft and cid not in listed:
                diags.warning(doc.positions.loc(("units",)), "syllabus.missing-capsule",
                            f"capsule '{cid}' (part '{part.id}') is in no unit",
                            "add it to a unit: the syllabus covers the whole course")
