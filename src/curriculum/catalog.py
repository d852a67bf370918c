"""The validated, resolved content of a project: what `validate` builds and
every later stage reads. Entries are frozen; lists are tuples."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from curriculum.errors import Loc
from curriculum.markdown import Body
from curriculum.models import (
    CapsuleMeta,
    Course,
    ExperimentMeta,
    Ladder,
    LearningPath,
    Part,
    Placement,
    QuestionMeta,
    Site,
    Syllabus,
)

# Above this many capsules, validation keeps each body's parsed tokens pickled and
# compressed (about a tenth of their size) and the renderer unpacks them when it renders the
# body: a 10,000-capsule course would otherwise hold about a gigabyte of tokens per process.
# Each edition keeps its EPUB chapters compressed above the same size (`Chapter.of`).
PACK_TOKENS_ABOVE = 2000


@dataclass(frozen=True)
class CapsuleEntry:
    id: str
    course: str
    part: str
    number: str  # "2.3": part 2, third capsule
    meta: CapsuleMeta
    loc: Loc
    preview: Body  # the text before <!-- more --> (the whole body when there is no marker)
    rest: Body | None  # the text after the marker
    minutes: int
    figures: int  # figures and charts cited in the whole body

    @property
    def draft(self) -> bool:
        return self.meta.status == "draft"

    @property
    def access(self) -> str:
        return self.meta.access


@dataclass(frozen=True)
class CourseEntry:
    id: str
    meta: Course
    loc: Loc
    parts: tuple[Part, ...]
    syllabus: Syllabus | None


@dataclass(frozen=True)
class QuestionEntry:
    id: str
    meta: QuestionMeta
    loc: Loc
    question: Body
    answer: Body
    related: tuple[tuple[str, float], ...]  # (capsule id, overlap score 0..1), best first

    @property
    def access(self) -> str:
        return self.meta.access


@dataclass(frozen=True)
class ExperimentEntry:
    id: str
    meta: ExperimentMeta
    loc: Loc
    preview: Body
    rest: Body | None

    @property
    def access(self) -> str:
        return self.meta.access


@dataclass(frozen=True)
class PathEntry:
    id: str
    meta: LearningPath
    loc: Loc


@dataclass(frozen=True)
class Catalog:
    site: Site
    courses: Mapping[str, CourseEntry]
    capsules: Mapping[str, CapsuleEntry]
    questions: Mapping[str, QuestionEntry]
    experiments: Mapping[str, ExperimentEntry]
    paths: Mapping[str, PathEntry]
    ladder: Ladder | None
    ladder_loc: Loc | None
    placement: Placement | None = None
    placement_loc: Loc | None = None

    @property
    def tier_rank(self) -> Mapping[str, int]:
        return MappingProxyType({t.id: i for i, t in enumerate(self.site.tiers)})

    def tier_label(self, tier: str) -> str:
        return next(t.label for t in self.site.tiers if t.id == tier)

    @property
    def lowest_tier(self) -> str:
        """The tier every edition shows in full (site.yaml lists tiers lowest first)."""
        return self.site.tiers[0].id

    def capsules_of(self, course: str) -> list[CapsuleEntry]:
        entry = self.courses[course]
        return [self.capsules[c] for p in entry.parts for c in p.capsules]
