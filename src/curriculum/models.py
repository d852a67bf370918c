"""The content model: what authors write, as strict pydantic models.

Two kinds of model live here. *Source* models mirror the YAML files and the
Markdown front matter field for field (unknown keys are errors, strings are
never coerced from numbers or booleans); their JSON Schemas are exported for
editors. *Catalog* models are what `validate` builds from them: resolved,
immutable, and carrying the location every object came from.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

Id = Annotated[
    str,
    StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=80),
    Field(description="Lower-case id: letters, digits and hyphens."),
]
Text = Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]

CapsuleKind = Literal["concept", "experiment", "lab", "worked-question", "practice"]
DrillCategory = Literal[
    "accounting", "benchmarking", "profiling", "kernels", "serving", "systems", "operations"
]
Level = Literal["beginner", "intermediate", "advanced"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


# --- content/site.yaml -------------------------------------------------------


Url = Annotated[
    str,
    StringConstraints(pattern=r"^https?://[^\s]+$"),
    Field(description="An absolute http(s) URL."),
]


class Offer(Strict):
    """What a tier gives and where a reader gets it; every locked page, card and path
    step of that tier shows it."""

    gives: Text = Field(description="What the tier opens, one or two sentences.")
    price: Text = Field(description="What it costs, e.g. 'Free with an account'.")
    join_label: Text = Field(description="Text of the join link, e.g. 'Create a free account'.")
    join_url: Url = Field(description="Where a reader gets the tier (sign-up or checkout page).")
    sign_in_url: Url = Field(
        description="Where a reader who has the tier signs in: the edition deployed for it."
    )


class Tier(Strict):
    id: Id = Field(description="Tier id used in `access:` fields, e.g. free, account, premium.")
    label: Text = Field(description="How the tier is named on pages, e.g. 'Members'.")
    description: Text = Field(description="One sentence on who can read this tier.")
    offer: Offer | None = Field(
        default=None,
        description="What the tier gives and where to get it; required for every tier above "
        "the lowest (tier.no-offer).",
    )


class Edition(Strict):
    id: Id = Field(description="Edition id: the folder under build/, e.g. public, member.")
    max_tier: Id = Field(description="Highest tier whose full text this edition includes.")
    description: Text = Field(description="Who this edition is deployed for.")


class Site(Strict):
    """`content/site.yaml`: the site's identity, tiers and editions."""

    title: Text = Field(description="Site title, shown in the header and the <title>.")
    tagline: Text = Field(description="One line under the title on the home page.")
    description: Text = Field(description="Home-page description; also its meta description.")
    base_url: Text = Field(description="Absolute URL the public edition is served at, ending in /.")
    language: Text = Field(default="en", description="BCP 47 language tag of the content.")
    tiers: list[Tier] = Field(description="Access tiers, lowest first.", min_length=1)
    editions: list[Edition] = Field(description="Editions to build.", min_length=1)
    primary_gpu: Id = Field(
        description="GPU slug (kernels/results/<slug>.json) that figures cite by default."
    )
    courses: list[Id] = Field(description="Course ids in the order the home page lists them.")
    upgrade_text: Text = Field(
        description="Shown under a preview where the rest of a page is above the edition's tier."
    )
    max_asset_bytes: int = Field(
        default=5 * 1024 * 1024, ge=1,
        description="Largest file, in bytes, that a page may pull into the site (an image "
        "or any other asset); a larger one is an error (asset.too-large).",
    )


# --- shared pieces -------------------------------------------------------------


class Check(Strict):
    """An understanding check: a task to do without the answer, and when to redo."""

    task: Text = Field(description="What to do without looking anything up.")
    redo_if: Text = Field(description="The sign that the material needs another pass.")


# --- content/courses/<id>/course.yaml ------------------------------------------


class Part(Strict):
    id: Id = Field(description="Part id, unique within the course.")
    title: Text = Field(description="Part title.")
    summary: Text = Field(description="Two or three sentences on what the part covers.")
    capsules: list[Id] = Field(description="Capsule ids in reading order.", min_length=1)


class Course(Strict):
    """`content/courses/<id>/course.yaml`. Counts are computed, never typed."""

    id: Id = Field(description="Must equal the course folder's name.")
    title: Text = Field(description="Course title.")
    subtitle: Text = Field(description="One line under the title.")
    description: Text = Field(description="A paragraph on what the course teaches.")
    level: Level = Field(description="Who it is pitched at.")
    authors: list[Text] = Field(description="Author names.", min_length=1)
    parts: list[Part] = Field(description="Parts in order.", min_length=1)


# --- capsule front matter ------------------------------------------------------


class CapsuleMeta(Strict):
    """Front matter of `content/courses/<course>/capsules/<id>.md`."""

    title: Text = Field(description="Capsule title.")
    tag: Annotated[str, StringConstraints(pattern=r"^[A-Z0-9][A-Z0-9 +/-]{0,13}$")] = Field(
        description="Short upper-case badge, e.g. ROOFLINE, SMEM, FA2."
    )
    access: Id = Field(description="Access tier (see site.yaml tiers).")
    kind: CapsuleKind = Field(description="concept, experiment, lab, worked-question or practice.")
    summary: Text = Field(description="One or two sentences; public in every edition.")
    prerequisites: list[Id] = Field(default_factory=list, description="Capsule ids to read first.")
    checks: list[Check] = Field(default_factory=list, description="Understanding checks.")
    status: Literal["ready", "draft"] = Field(
        default="ready", description="draft: listed as coming soon, never rendered."
    )


# --- paths/<id>.yaml -------------------------------------------------------------


class Step(Strict):
    """A path step: exactly one of capsule, question or experiment."""

    capsule: Id | None = Field(default=None, description="Capsule id.")
    question: Id | None = Field(default=None, description="Worked-question id.")
    experiment: Id | None = Field(default=None, description="Experiment id.")
    note: Text | None = Field(default=None, description="Why this step is here, one sentence.")

    @model_validator(mode="after")
    def _one_target(self) -> Step:
        if sum(x is not None for x in (self.capsule, self.question, self.experiment)) != 1:
            raise ValueError("a step names exactly one of capsule, question, experiment")
        return self

    @property
    def target(self) -> tuple[str, str]:
        for kind in ("capsule", "question", "experiment"):
            value = getattr(self, kind)
            if value is not None:
                return kind, value
        raise AssertionError("validated above")


class LearningPath(Strict):
    """`paths/<id>.yaml`: an ordered route through capsules, questions, experiments."""

    eyebrow: Text = Field(description="Small label above the title, e.g. 'Learning path'.")
    title: Text = Field(description="Path title.")
    summary: Text = Field(description="What the path gets you, two sentences.")
    bring: list[Text] = Field(description="What to know before starting.", min_length=1)
    work_toward: list[Text] = Field(description="What you will be able to do.", min_length=1)
    fits_if: list[Text] = Field(description="Who the path fits.", min_length=1)
    not_in_path: list[Text] = Field(description="What the path leaves out.", min_length=1)
    checks: list[Check] = Field(default_factory=list, description="Understanding checks.")
    rehearse: list[Text] = Field(
        default_factory=list, description="How to rehearse a worked answer, one line per habit."
    )
    steps: list[Step] = Field(description="Steps in order.", min_length=1)


# --- content/questions/<id>.md ----------------------------------------------------


class Rubric(Strict):
    weak: list[Text] = Field(description="Lines that mark a weak answer.", min_length=1)
    hire: list[Text] = Field(description="Lines that mark a hire answer.", min_length=1)
    strong_hire: list[Text] = Field(description="Lines that mark a strong-hire answer.", min_length=1)


class QuestionMeta(Strict):
    """Front matter of a worked question. The body holds the question, then a
    line `<!-- answer -->`, then the answer."""

    title: Text = Field(description="The question as a title.")
    access: Id = Field(description="Tier of the answer, rubric and editor's note.")
    summary: Text = Field(description="One sentence; public in every edition.")
    track: Id = Field(description="Track the question belongs to.")
    order: int = Field(description="Position in its track, from 1.", ge=1)
    concepts: list[Id] = Field(
        description="Candidate related capsules; the page ranks them by computed overlap.",
        min_length=1,
    )
    rubric: Rubric = Field(description="Scoring rubric.")
    editor_note: Text = Field(description="What the editor looks for, a short paragraph.")


# --- content/ladder.yaml -------------------------------------------------------------


class Drill(Strict):
    id: Id = Field(description="Drill id, unique in the ladder.")
    category: DrillCategory = Field(description="Kind of practice.")
    title: Text = Field(description="Drill title.")
    prompt: Text = Field(description="What to do.")
    artifact: Text = Field(description="What to hand in: a file, a table, a plot.")
    hours: float = Field(description="Expected hours.", gt=0, le=40)
    lesson: Id = Field(description="Capsule id this drill practises.")


class Module(Strict):
    id: Annotated[str, StringConstraints(pattern=r"^M\d{2}$")] = Field(description="M00, M01, ...")
    title: Text = Field(description="Module title.")
    summary: Text = Field(description="What the module drills.")
    drills: list[Drill] = Field(description="Drills in order.", min_length=1)


class Ladder(Strict):
    """`content/ladder.yaml`: the practice ladder."""

    title: Text = Field(description="Page title.")
    summary: Text = Field(description="What the ladder is for.")
    modules: list[Module] = Field(description="Modules in order.", min_length=1)


# --- content/courses/<id>/syllabus.yaml ------------------------------------------------


class Lesson(Strict):
    capsule: Id = Field(description="Capsule id.")
    lab_minutes: int = Field(
        default=0, ge=0,
        description="Hands-on time beyond reading, in minutes; reading time is computed.")
    minutes: int | None = Field(
        default=None, ge=1,
        description="Optional check: must equal reading time plus lab_minutes, as computed.")
    widgets: int | None = Field(
        default=None, ge=0,
        description="Optional check: must equal the experiments the capsule links to.")
    labs: int | None = Field(
        default=None, ge=0,
        description="Optional check: must equal 1 for a lab capsule or one with lab minutes, else 0.")


class Unit(Strict):
    title: Text = Field(description="Unit title.")
    summary: Text = Field(description="What the unit covers.")
    lessons: list[Lesson] = Field(description="Lessons in order.", min_length=1)


class Syllabus(Strict):
    """`content/courses/<id>/syllabus.yaml`: a second, time-boxed view of a course."""

    title: Text = Field(description="Page title.")
    summary: Text = Field(description="Who the schedule is for and how to pace it.")
    units: list[Unit] = Field(description="Units in order.", min_length=1)


# --- content/experiments/<id>.md ---------------------------------------------------------


class ExperimentInput(Strict):
    id: Id = Field(description="Input id; the script reads it as data-input.")
    label: Text = Field(description="Label shown beside the control.")
    unit: str = Field(default="", description="Unit shown after the value.")
    min: float = Field(description="Smallest value.")
    max: float = Field(description="Largest value.")
    step: float = Field(description="Control step.", gt=0)
    default: float | None = Field(default=None, description="Starting value.")
    default_from: str | None = Field(
        default=None,
        description="A measured figure to start from instead, e.g. 'ceiling/copy.tbps'.",
    )

    @model_validator(mode="after")
    def _one_default(self) -> ExperimentInput:
        if (self.default is None) == (self.default_from is None):
            raise ValueError("give exactly one of default, default_from")
        return self


class ExperimentMeta(Strict):
    """Front matter of `content/experiments/<id>.md`."""

    title: Text = Field(description="Experiment title.")
    access: Id = Field(description="Access tier.")
    summary: Text = Field(description="One sentence; public in every edition.")
    script: Id = Field(description="Module in templates/static/js/experiments/<script>.js.")
    inputs: list[ExperimentInput] = Field(description="The controls.", min_length=1)


# --- content/placement.yaml ---------------------------------------------------------------


class PlacementItem(Strict):
    """One multiple-choice item of the placement check, tied to a course part and the
    capsule that teaches it."""

    id: Id = Field(description="Item id, unique in the check.")
    part: Id = Field(description="Course part the item tests (its score area).")
    capsule: Id = Field(description="Ready capsule to start from when the item is missed.")
    prompt: Text = Field(description="The question, plain text.")
    choices: list[Text] = Field(description="Answer choices, plain text.", min_length=2,
                                max_length=6)
    answer: int = Field(description="Index of the right choice, from 0.", ge=0)
    explain: Text = Field(description="Why the right choice is right; shown after checking.")


class PlacementRule(Strict):
    """A path suggestion: the first rule whose minimums the scores meet wins."""

    path: Id = Field(description="Path id (paths/<id>.yaml) to suggest.")
    min_total: float = Field(default=0.0, ge=0, le=1,
                             description="Smallest share of all items answered right.")
    min: dict[Id, float] = Field(default_factory=dict,
                                 description="Smallest share right per part id, 0 to 1.")
    reason: Text = Field(description="Why this path, shown with the suggestion.")


class Placement(Strict):
    """`content/placement.yaml`: a short check that suggests a path and a starting capsule."""

    title: Text = Field(description="Page title.")
    summary: Text = Field(description="What the check is and how long it takes.")
    course: Id = Field(description="Course whose parts the items cover.")
    items: list[PlacementItem] = Field(description="The items, 10 to 15.", min_length=10,
                                       max_length=15)
    suggest: list[PlacementRule] = Field(
        description="Rules in order; the last one has no minimums and always matches.",
        min_length=1,
    )


SOURCE_MODELS: dict[str, type[BaseModel]] = {
    "site": Site,
    "course": Course,
    "capsule": CapsuleMeta,
    "path": LearningPath,
    "question": QuestionMeta,
    "ladder": Ladder,
    "syllabus": Syllabus,
    "experiment": ExperimentMeta,
    "placement": Placement,
}
