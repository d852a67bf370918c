"""Loading the puzzle folders and checking them, with file:line for every problem.

    content/puzzles/NN-name/puzzle.md     front matter (`PuzzleMeta`) and the spec in Markdown
    content/puzzles/NN-name/starter.cu    what the reader completes (public)
    content/puzzles/NN-name/solution.cu   the reference solution (its tier: `solution_access`)
    content/puzzles/NN-name/spec.py       binds SPEC to a `Spec`

`load_puzzles` reads every folder once per change (the site renders each
edition from the same load); `check_puzzles` is what `validate` calls.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from curriculum.bodies import check_body, parse_body, schema_errors
from curriculum.catalog import Body
from curriculum.errors import Diagnostics, Loc, did_you_mean
from curriculum.puzzle.spec import Spec

FOLDER = re.compile(r"^(?P<number>\d{2})-(?P<name>[a-z0-9][a-z0-9-]*)$")
PUZZLES_DIR = Path("content") / "puzzles"

Id = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=80)]
Text = Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]


class PuzzleMeta(BaseModel):
    """Front matter of `content/puzzles/NN-name/puzzle.md`."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    title: Text = Field(description="Puzzle title, e.g. 'Map'.")
    number: int = Field(description="Its place in the series; equals the folder's NN.", ge=1)
    difficulty: int = Field(description="1 (first steps) to 5 (hardest).", ge=1, le=5)
    access: Id = Field(description="Tier of the page (spec, shapes, hints, starter).")
    solution_access: Id = Field(
        description="Tier of the reference solution; at or above `access`.")
    summary: Text = Field(description="One sentence: what the kernel computes.")
    hints: list[Text] = Field(description="Hints, mildest first.", min_length=1)
    background: list[Id] = Field(default_factory=list,
                                 description="Capsule ids that teach what the puzzle needs.")


@dataclass(frozen=True)
class Puzzle:
    id: str  # the folder name, e.g. "01-map"
    number: int
    folder: Path
    meta: PuzzleMeta
    body: Body
    spec: Spec

    @property
    def starter(self) -> Path:
        return self.folder / "starter.cu"

    @property
    def solution(self) -> Path:
        return self.folder / "solution.cu"


_cache: dict[Path, tuple[tuple[tuple[str, int, int], ...], list[Puzzle], Diagnostics]] = {}


def _signature(folder: Path) -> tuple[tuple[str, int, int], ...]:
    out = []
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.is_file() and "__pycache__" not in path.parts:
            st = path.stat()
            out.append((path.as_posix(), st.st_mtime_ns, st.st_size))
    return tuple(out)


def load_puzzles(root: Path, diags: Diagnostics | None = None) -> list[Puzzle]:
    """Every puzzle that loads, in number order; problems go to `diags`."""
    root = root.resolve()
    folder = root / PUZZLES_DIR
    sig = _signature(folder)
    hit = _cache.get(root)
    if hit is None or hit[0] != sig:
        found = Diagnostics()
        hit = (sig, _load(root, folder, found), found)
        _cache[root] = hit
    if diags is not None:
        diags.extend(hit[2].items)
    return hit[1]


def find(root: Path, number: int) -> Puzzle | None:
    return next((p for p in load_puzzles(root) if p.number == number), None)


def _load(root: Path, folder: Path, diags: Diagnostics) -> list[Puzzle]:
    from curriculum.load import markdown_doc

    puzzles: list[Puzzle] = []
    if not folder.is_dir():
        return puzzles
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"):
        rel = (PUZZLES_DIR / sub.name).as_posix()
        m = FOLDER.match(sub.name)
        if not m:
            diags.error(Loc(rel, 1, 1), "puzzle.folder-name",
                        f"'{sub.name}': a puzzle folder is NN-name, e.g. 01-map")
            continue
        md = sub / "puzzle.md"
        if not md.is_file():
            diags.error(Loc(rel, 1, 1), "puzzle.missing-file", f"no {rel}/puzzle.md")
            continue
        doc = markdown_doc(root, md, "puzzle", diags)
        if doc is None:
            continue
        try:
            meta = PuzzleMeta.model_validate(doc.data)
        except ValidationError as exc:
            schema_errors(doc, PuzzleMeta, exc, diags)
            continue
        if meta.number != int(m["number"]):
            diags.error(doc.positions.loc(("number",)), "puzzle.number",
                        f"number {meta.number} does not match the folder '{sub.name}'")
        spec = _load_spec(sub, rel, diags)
        if spec is None:
            continue
        for name in ("starter.cu",):
            if not (sub / name).is_file():
                diags.error(Loc(f"{rel}/{name}", 1, 1), "puzzle.missing-file", f"no {rel}/{name}")
        if (sub / "starter.cu").is_file() and not has_entry(
                (sub / "starter.cu").read_text(encoding="utf-8"), spec.entry):
            diags.error(Loc(f"{rel}/starter.cu", 1, 1), "puzzle.no-entry",
                        f"starter.cu declares no kernel '{spec.entry}' (spec.py's entry)")
        body = parse_body(doc.body, doc.file, doc.body_line)
        puzzles.append(Puzzle(sub.name, meta.number, sub, meta, body, spec))
    seen: dict[int, str] = {}
    for p in puzzles:
        if p.number in seen:
            diags.error(Loc(p.body.file, 1, 1), "puzzle.duplicate-number",
                        f"puzzle number {p.number} is also used by '{seen[p.number]}'")
        seen[p.number] = p.id
    return sorted(puzzles, key=lambda p: p.number)


def _load_spec(folder: Path, rel: str, diags: Diagnostics) -> Spec | None:
    path = folder / "spec.py"
    loc = Loc(f"{rel}/spec.py", 1, 1)
    if not path.is_file():
        diags.error(loc, "puzzle.missing-file", f"no {rel}/spec.py")
        return None
    name = "curriculum_puzzle_" + folder.name.replace("-", "_")
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any error in an author's spec is reported
        line = _traceback_line(exc, path)
        diags.error(Loc(loc.path, line, 1), "puzzle.spec-error",
                    f"spec.py raised {type(exc).__name__}: {exc}")
        return None
    spec = getattr(module, "SPEC", None)
    if not isinstance(spec, Spec):
        diags.error(loc, "puzzle.spec-error", "spec.py binds no SPEC = Spec(...)")
        return None
    return spec


def _traceback_line(exc: BaseException, path: Path) -> int:
    tb = exc.__traceback__
    line = 1
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename) == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def has_entry(source: str, entry: str) -> bool:
    """Whether `source` defines `extern "C" __global__ void entry(`."""
    return re.search(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?'
                     + re.escape(entry) + r"\s*\(", source) is not None


def check_puzzles(root: Path, tiers: list[str], ids: dict[str, set[str]],
                  diags: Diagnostics, max_asset_bytes: int) -> None:
    """What `validate` checks of the puzzles: every folder loads, tiers exist and
    the solution's tier is not below the page's, and the bodies pass the same
    checks as a capsule's (links, typed numbers, markup)."""
    rank = {t: i for i, t in enumerate(tiers)}
    for p in load_puzzles(root, diags):
        file = p.body.file
        for key in ("access", "solution_access"):
            tier = getattr(p.meta, key)
            if tiers and tier not in rank:
                diags.error(Loc(file, 1, 1), "access.unknown-tier", f"no access tier '{tier}'",
                            did_you_mean(tier, tiers) or f"tiers: {', '.join(tiers)}")
        if p.meta.access in rank and p.meta.solution_access in rank and \
                rank[p.meta.solution_access] < rank[p.meta.access]:
            diags.error(Loc(file, 1, 1), "puzzle.solution-tier",
                        f"solution_access '{p.meta.solution_access}' is below the page's "
                        f"access '{p.meta.access}'")
        for cid in p.meta.background:
            if cid not in ids.get("capsule", set()):
                diags.error(Loc(file, 1, 1), "puzzle.unknown-capsule",
                            f"background names no capsule '{cid}'",
                            did_you_mean(cid, ids.get("capsule", set())))
        if not p.solution.is_file():
            diags.warning(Loc(file, 1, 1), "puzzle.no-solution",
                          f"no {p.folder.name}/solution.cu: the page and `check` go without one")
        check_body(p.body, root, ids, diags, max_asset_bytes)
