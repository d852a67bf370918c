"""`curriculum new`: start a capsule, question, drill or path from a template.

The text comes from `templates/scaffold/` (Jinja, rendered with strict
undefined values). A new capsule is a draft, registered in its course's part
by appending one line (or one list item) to course.yaml; a new drill is
appended to its module in content/ladder.yaml. Both edits touch only the text
they add, so comments and layout survive. Nothing is written unless every
edit applies and the edited YAML still reads back with the new entry in place.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from curriculum.errors import UsageError

ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def scaffold(root: Path, kind: str, item_id: str, options: dict[str, Any],
             templates: Path | None = None) -> list[tuple[str, str]]:
    """Write the new item; returns (path, "created" or "edited") for each file touched."""
    if not ID.match(item_id):
        raise UsageError(f"'{item_id}' is not an id: use lower-case letters, digits and hyphens")
    project = _Project(root.resolve())
    folder = (templates or root / "templates").resolve() / "scaffold"
    if not folder.is_dir():
        raise UsageError(f"no scaffold templates at {folder}")
    render = _renderer(folder)
    opts = {k: v for k, v in options.items() if v not in (None, [])}
    title = opts.get("title") or item_id.replace("-", " ").capitalize()
    access = opts.get("access") or project.tiers[0]
    if access not in project.tiers:
        raise UsageError(f"no access tier '{access}'; tiers: {', '.join(project.tiers)}")
    writes: dict[Path, str] = {}
    if kind == "capsule":
        project.refuse_existing_capsule(item_id)
        course = opts.get("course") or project.default_course()
        course_file = root / "content" / "courses" / course / "course.yaml"
        if not course_file.is_file():
            raise UsageError(f"no course '{course}' (content/courses/{course}/course.yaml)")
        text = course_file.read_text(encoding="utf-8")
        writes[course_file] = register_capsule(text, item_id, opts.get("part"))
        tag = opts.get("tag") or re.sub(r"[^A-Z0-9]", "", item_id.split("-")[0].upper())[:12]
        writes[course_file.parent / "capsules" / f"{item_id}.md"] = render(
            "capsule.md", title=title, tag=tag or "NEW", access=access,
            kind=opts.get("capsule_kind", "concept"),
            summary=opts.get("summary") or f"What {title.lower()} teaches, in one sentence.")
    elif kind == "question":
        target = root / "content" / "questions" / f"{item_id}.md"
        track = opts.get("track") or project.default_track()
        writes[target] = render(
            "question.md", id=item_id, title=title, access=access, track=track,
            order=opts.get("order") or project.next_order(track),
            concepts=opts.get("concept") or [project.first_capsule()],
            summary=opts.get("summary") or f"What question {item_id} asks, in one sentence.")
    elif kind == "path":
        target = root / "paths" / f"{item_id}.yaml"
        steps = [_step(s) for s in opts.get("step", [])] or [
            {"kind": "capsule", "id": project.first_capsule()}]
        writes[target] = render(
            "path.yaml", id=item_id, title=title, steps=steps,
            summary=opts.get("summary") or f"Where the {item_id} path leads, in one sentence.")
    else:
        ladder = root / "content" / "ladder.yaml"
        if not ladder.is_file():
            raise UsageError("no content/ladder.yaml to add a drill to")
        drill = render("drill.yaml", id=item_id, title=title,
                       category=opts.get("category", "kernels"),
                       hours=_number(opts.get("hours", 1.0)),
                       lesson=opts.get("lesson") or project.first_capsule())
        writes[ladder] = add_drill(ladder.read_text(encoding="utf-8"), drill, item_id,
                                   opts.get("module"))
    edited = {p for p in writes if p.name in ("course.yaml", "ladder.yaml")}
    for path in writes:
        if path not in edited and path.exists():
            raise UsageError(f"{path.relative_to(root).as_posix()} already exists")
    for path, text in writes.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return [(p.relative_to(root).as_posix(), "edited" if p in edited else "created")
            for p in writes]


def _renderer(folder: Path) -> Callable[..., str]:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(str(folder)), undefined=StrictUndefined,
                      autoescape=False, trim_blocks=True, lstrip_blocks=True,
                      keep_trailing_newline=True)
    env.filters["yaml"] = lambda value: json.dumps(str(value), ensure_ascii=False)

    def render(name: str, **context: Any) -> str:
        return env.get_template(name).render(**context)

    return render


def _step(text: str) -> dict[str, str]:
    kind, _, target = text.partition(":")
    if kind not in ("capsule", "question", "experiment") or not ID.match(target):
        raise UsageError(f"step '{text}': write capsule:ID, question:ID or experiment:ID")
    return {"kind": kind, "id": target}


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


class _Project:
    """What the defaults need to know, read leniently from the project's files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        site = _read_yaml(root / "content" / "site.yaml")
        if not isinstance(site, dict):
            raise UsageError("no readable content/site.yaml here; run in a project folder "
                             "or pass --root DIR")
        self.tiers = [t["id"] for t in site.get("tiers", []) if isinstance(t, dict) and "id" in t]
        self.courses = [c for c in site.get("courses", []) if isinstance(c, str)]
        if not self.tiers:
            raise UsageError("content/site.yaml declares no access tiers")

    def default_course(self) -> str:
        if not self.courses:
            raise UsageError("no course in content/site.yaml; pass --course")
        return self.courses[0]

    def refuse_existing_capsule(self, item_id: str) -> None:
        for found in (self.root / "content" / "courses").glob(f"*/capsules/{item_id}.md"):
            raise UsageError(f"capsule '{item_id}' already exists: {found.relative_to(self.root)}")

    def first_capsule(self) -> str:
        for course in self.courses:
            data = _read_yaml(self.root / "content" / "courses" / course / "course.yaml")
            for part in (data or {}).get("parts", []):
                for cid in part.get("capsules", []):
                    return str(cid)
        raise UsageError("no capsule in any course yet; write a capsule first")

    def _questions(self) -> list[dict[str, Any]]:
        out = []
        for md in sorted((self.root / "content" / "questions").glob("*.md")):
            head = md.read_text(encoding="utf-8").split("\n---", 1)[0].removeprefix("---")
            try:
                data = yaml.safe_load(head)
            except yaml.YAMLError:
                continue
            if isinstance(data, dict):
                out.append(data)
        return out

    def default_track(self) -> str:
        tracks = [str(q["track"]) for q in self._questions() if "track" in q]
        return max(sorted(set(tracks)), key=tracks.count) if tracks else "main"

    def next_order(self, track: str) -> int:
        orders = [q.get("order", 0) for q in self._questions() if q.get("track") == track]
        return max([o for o in orders if isinstance(o, int)], default=0) + 1


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None


# -- minimal YAML edits -----------------------------------------------------------------


def _mapping_get(node: yaml.Node, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return v
    return None


def _find_item(seq: yaml.Node | None, key: str, value: str | None) -> yaml.Node:
    """The mapping in `seq` whose `key` is `value` (the last one when value is None)."""
    if not isinstance(seq, yaml.SequenceNode) or not seq.value:
        raise UsageError(f"expected a list of items with '{key}'")
    if value is None:
        return seq.value[-1]
    for item in seq.value:
        found = _mapping_get(item, key)
        if isinstance(found, yaml.ScalarNode) and found.value == value:
            return item
    ids = [n.value for item in seq.value if isinstance(n := _mapping_get(item, key),
                                                       yaml.ScalarNode)]
    raise UsageError(f"no {key} '{value}'; there are: {', '.join(ids)}")


def _append_to_list(text: str, seq: yaml.Node, lines_for: Callable[[str], list[str]]) -> str:
    """Insert after the last item of block list `seq` lines made from that item's
    indentation prefix ("    - ")."""
    last = seq.value[-1]
    lines = text.split("\n")
    start = lines[last.start_mark.line]
    dash = start.rfind("-", 0, last.start_mark.column)
    if dash < 0 or start[:dash].strip():
        raise UsageError("cannot tell the list's indentation; add the entry by hand")
    stop = last.end_mark
    ends_line = lines[stop.line][:stop.column].strip() != ""  # else it stopped at the next one
    end = stop.line + 1 if ends_line else stop.line
    def trailing(line: str) -> bool:  # blank, or a comment about what follows the list
        text = line.strip()
        return not text or text.startswith("#") and len(line) - len(line.lstrip()) <= dash

    while end > last.start_mark.line + 1 and trailing(lines[end - 1]):
        end -= 1
    return "\n".join(lines[:end] + lines_for(" " * dash) + lines[end:])


def register_capsule(text: str, capsule_id: str, part_id: str | None) -> str:
    """course.yaml text with `capsule_id` appended to part `part_id` (default: the last)."""
    root = yaml.compose(text)
    part = _find_item(_mapping_get(root, "parts"), "id", part_id)
    seq = _mapping_get(part, "capsules")
    if not isinstance(seq, yaml.SequenceNode):
        raise UsageError("the part has no capsules list")
    if seq.flow_style:
        close = seq.end_mark.index - 1
        if text[close] != "]":
            raise UsageError("cannot find the end of the capsules list; add the id by hand")
        sep = ", " if seq.value else ""
        new = text[:close].rstrip() + sep + capsule_id + text[close:]
    else:
        new = _append_to_list(text, seq, lambda indent: [f"{indent}- {capsule_id}"])
    part_id = _mapping_get(part, "id").value  # type: ignore[union-attr]
    check = _find_item(_mapping_get(yaml.compose(new), "parts"), "id", part_id)
    listed = [n.value for n in _mapping_get(check, "capsules").value]  # type: ignore[union-attr]
    if listed[-1] != capsule_id:
        raise UsageError("editing course.yaml went wrong; add the id by hand")
    return new


def add_drill(text: str, drill_yaml: str, drill_id: str, module_id: str | None) -> str:
    """ladder.yaml text with one drill (YAML of a one-item list) appended to a module."""
    root = yaml.compose(text)
    module = _find_item(_mapping_get(root, "modules"), "id", module_id)
    seq = _mapping_get(module, "drills")
    if not isinstance(seq, yaml.SequenceNode) or seq.flow_style or not seq.value:
        raise UsageError("the module's drills are not a block list; add the drill by hand")
    for other in _mapping_get(root, "modules").value:  # type: ignore[union-attr]
        for item in getattr(_mapping_get(other, "drills"), "value", []):
            found = _mapping_get(item, "id")
            if isinstance(found, yaml.ScalarNode) and found.value == drill_id:
                raise UsageError(f"drill '{drill_id}' already exists")
    body = drill_yaml.rstrip("\n").split("\n")
    new = _append_to_list(text, seq, lambda indent: [indent + line for line in body])
    module_id = _mapping_get(module, "id").value  # type: ignore[union-attr]
    check = _find_item(_mapping_get(yaml.compose(new), "modules"), "id", module_id)
    last = _mapping_get(_mapping_get(check, "drills").value[-1], "id")  # type: ignore[union-attr]
    if not isinstance(last, yaml.ScalarNode) or last.value != drill_id:
        raise UsageError("editing ladder.yaml went wrong; add the drill by hand")
    return new
