"""Stage 1, `load`: read every source file of a project, keeping positions.

Nothing is validated here beyond "is this YAML, is there front matter": the
output is a list of `RawDoc`s for `validate`. Problems are collected, never
raised, so one run reports them all.

Project layout read::

    content/site.yaml
    content/courses/<course>/course.yaml
    content/courses/<course>/syllabus.yaml         (optional)
    content/courses/<course>/capsules/<id>.md
    content/questions/<id>.md
    content/experiments/<id>.md
    content/ladder.yaml                            (optional)
    content/placement.yaml                         (optional)
    paths/<id>.yaml
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curriculum.assets import Refused, confine, read_asset
from curriculum.errors import Diagnostics, Loc, rel
from curriculum.yamlio import Positions, load_yaml

FRONT_MATTER_FENCE = "---"
ID_FILE = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclass(frozen=True)
class RawDoc:
    """One source file, parsed but not validated."""

    kind: str  # site, course, syllabus, capsule, question, experiment, ladder, path, placement
    id: str
    file: str  # project-relative path
    data: Any
    positions: Positions
    body: str = ""  # Markdown after the front matter
    body_line: int = 1  # 1-based line of the body's first line in the file
    course: str | None = None  # for course, syllabus and capsule documents


def split_front_matter(text: str, file: str, diags: Diagnostics) -> tuple[str, str, int] | None:
    """Split `---\\nYAML\\n---\\nbody`; returns (yaml, body, body_line) or None."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != FRONT_MATTER_FENCE:
        diags.error(Loc(file, 1, 1), "front-matter.missing",
                    "a Markdown source must start with front matter between '---' lines")
        return None
    for i in range(1, len(lines)):
        if lines[i].rstrip() == FRONT_MATTER_FENCE:
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1:]), i + 2
    diags.error(Loc(file, 1, 1), "front-matter.unclosed", "front matter has no closing '---' line")
    return None


SOURCE_MAX_BYTES = 16 * 1024 * 1024


def _source_name(path: Path, root: Path) -> str:
    """A source file's project-relative name as found, not where a symlink leads."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return rel(path, root)


def _read_text(root: Path, path: Path, file: str, diags: Diagnostics) -> str | None:
    """A source file's text; like any file the site publishes, it must be a regular file
    inside its folder (`content/` or `paths/`) after following symlinks."""
    folder = root / file.split("/", 1)[0]
    found = confine(file, root, folder, SOURCE_MAX_BYTES, what="source file")
    if isinstance(found, Refused):
        code = "file.read" if found.code == "image.missing" else found.code
        diags.error(Loc(file, 1, 1), code, found.message, found.hint)
        return None
    try:
        return read_asset(found, SOURCE_MAX_BYTES).decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError as exc:
        diags.error(Loc(file, 1, 1), "file.encoding", f"not UTF-8: {exc.reason}")
    except OSError as exc:
        diags.error(Loc(file, 1, 1), "file.read", str(exc))
    return None


def yaml_doc(root: Path, path: Path, kind: str, doc_id: str, diags: Diagnostics,
              course: str | None = None) -> RawDoc | None:
    file = _source_name(path, root)
    text = _read_text(root, path, file, diags)
    if text is None:
        return None
    data, pos = load_yaml(text, file, diags)
    if data is None:
        if not diags.errors or diags.errors[-1].loc.path != file:
            diags.error(Loc(file, 1, 1), "yaml.empty", "the file holds no YAML mapping")
        return None
    return RawDoc(kind, doc_id, file, data, pos, course=course)


def markdown_doc(root: Path, path: Path, kind: str, diags: Diagnostics,
                  course: str | None = None) -> RawDoc | None:
    file = _source_name(path, root)
    if not ID_FILE.match(path.stem):
        diags.error(Loc(file, 1, 1), "file.name",
                    f"'{path.name}': file names are ids: lower-case letters, digits and hyphens")
        return None
    text = _read_text(root, path, file, diags)
    if text is None:
        return None
    parts = split_front_matter(text, file, diags)
    if parts is None:
        return None
    yaml_text, body, body_line = parts
    data, pos = load_yaml(yaml_text, file, diags, line_offset=1)
    if data is None:
        if not any(d.loc.path == file for d in diags.errors):
            diags.error(Loc(file, 2, 1), "front-matter.empty", "front matter is empty")
        return None
    return RawDoc(kind, path.stem, file, data, pos, body=body, body_line=body_line, course=course)


def load_project(root: Path, diags: Diagnostics) -> list[RawDoc]:
    """Read every source file under `root`; see the module docstring."""
    content = root / "content"
    docs: list[RawDoc] = []

    def add(doc: RawDoc | None) -> None:
        if doc is not None:
            docs.append(doc)

    site = content / "site.yaml"
    if not site.is_file():
        diags.error(Loc("content/site.yaml", 1, 1), "project.no-site",
                    "no content/site.yaml here", "run in a project folder or pass --root DIR")
        return docs
    add(yaml_doc(root, site, "site", "site", diags))

    for course_dir in sorted(p for p in (content / "courses").glob("*") if p.is_dir()):
        course_file = course_dir / "course.yaml"
        cid = course_dir.name
        if not course_file.is_file():
            diags.error(Loc(rel(course_dir, root), 1, 1), "course.no-file",
                        f"course folder '{cid}' has no course.yaml")
            continue
        add(yaml_doc(root, course_file, "course", cid, diags, course=cid))
        syllabus = course_dir / "syllabus.yaml"
        if syllabus.is_file():
            add(yaml_doc(root, syllabus, "syllabus", cid, diags, course=cid))
        for md in sorted((course_dir / "capsules").glob("*.md")):
            add(markdown_doc(root, md, "capsule", diags, course=cid))

    for md in sorted((content / "questions").glob("*.md")):
        add(markdown_doc(root, md, "question", diags))
    for md in sorted((content / "experiments").glob("*.md")):
        add(markdown_doc(root, md, "experiment", diags))
    ladder = content / "ladder.yaml"
    if ladder.is_file():
        add(yaml_doc(root, ladder, "ladder", "ladder", diags))
    placement = content / "placement.yaml"
    if placement.is_file():
        add(yaml_doc(root, placement, "placement", "placement", diags))
    for y in sorted((root / "paths").glob("*.yaml")):
        if not ID_FILE.match(y.stem):
            diags.error(Loc(rel(y, root), 1, 1), "file.name",
                        f"'{y.name}': file names are ids: lower-case letters, digits and hyphens")
            continue
        add(yaml_doc(root, y, "path", y.stem, diags))
    return docs
