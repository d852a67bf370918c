"""YAML with source positions.

PyYAML's safe loader drops positions and lets a repeated key silently win.
Here a document is composed into nodes and converted by hand, so that:

- every value's position is kept, keyed by its path (`("parts", 0, "title")`),
  and every mapping key's position too (for "unknown key" messages);
- a duplicate key is an error at the second occurrence;
- scalars are resolved by YAML 1.1 rules as usual (`3.10` is a float, a bare
  `no` is a boolean), and the strict models then refuse them in a string field
  with a hint to quote, instead of storing 3.1 or False.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from curriculum.errors import Diagnostics, Loc

PathKey = tuple[str | int, ...]


@dataclass
class Positions:
    """Where each value (and each mapping key) of a document sits."""

    file: str
    values: dict[PathKey, tuple[int, int]] = field(default_factory=dict)
    keys: dict[PathKey, tuple[int, int]] = field(default_factory=dict)
    line_offset: int = 0

    def loc(self, path: PathKey, prefer_key: bool = False) -> Loc:
        """The location of `path`, or of its nearest ancestor that exists."""
        probe = tuple(path)
        while True:
            table = (self.keys, self.values) if prefer_key else (self.values, self.keys)
            for t in table:
                if probe in t:
                    line, col = t[probe]
                    return Loc(self.file, line + self.line_offset, col)
            if not probe:
                return Loc(self.file, 1 + self.line_offset, 1)
            probe = probe[:-1]


class _Loader(yaml.SafeLoader):
    """Safe loader used only to compose and to construct scalars."""


class _FastLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The same, composing in libyaml where PyYAML has it. Its error messages say less
    ("did not find expected ','" without what it found), so a document it refuses is
    read again by `_Loader` for the message."""


def _convert(loader: Any, node: yaml.Node, path: PathKey, pos: Positions,
             diags: Diagnostics) -> Any:
    pos.values[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                diags.error(_mark(pos, key_node), "yaml.key", "mapping keys must be plain strings")
                continue
            key = loader.construct_object(key_node)
            if not isinstance(key, str):
                key = str(key_node.value)
            child = (*path, key)
            if key in out:
                first = pos.keys.get(child, (0, 0))
                diags.error(
                    _mark(pos, key_node),
                    "yaml.duplicate-key",
                    f"key '{key}' appears twice in one mapping (first at line "
                    f"{first[0] + pos.line_offset})",
                    "remove one of them",
                )
                continue
            pos.keys[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            out[key] = _convert(loader, value_node, child, pos, diags)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(loader, item, (*path, i), pos, diags) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


def _mark(pos: Positions, node: yaml.Node) -> Loc:
    return Loc(pos.file, node.start_mark.line + 1 + pos.line_offset, node.start_mark.column + 1)


def load_yaml(text: str, file: str, diags: Diagnostics, line_offset: int = 0
              ) -> tuple[Any, Positions]:
    """Parse one YAML document; problems go to `diags`, never raised.

    `line_offset` shifts reported lines (front matter starts below a `---`).
    Returns `(None, positions)` when the text does not parse.
    """
    if _FastLoader is not _Loader:
        found = Diagnostics()
        try:
            result = _load(_FastLoader, text, file, found, line_offset, report=False)
        except yaml.YAMLError:
            pass  # read again below, for the fuller message
        else:
            diags.extend(found.items)
            return result
    return _load(_Loader, text, file, diags, line_offset)


def _load(loader_class: type[Any], text: str, file: str, diags: Diagnostics, line_offset: int,
          report: bool = True) -> tuple[Any, Positions]:
    pos = Positions(file=file, line_offset=line_offset)
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, pos
        if node.tag == "tag:yaml.org,2002:merge" or _has_alias(node):
            diags.error(_mark(pos, node), "yaml.alias", "anchors, aliases and merge keys are not allowed",
                        "write the value out")
            return None, pos
        return _convert(loader, node, (), pos, diags), pos
    except yaml.MarkedYAMLError as exc:
        if not report:
            raise
        mark = exc.problem_mark or exc.context_mark
        line = (mark.line + 1) if mark else 1
        col = (mark.column + 1) if mark else 1
        message = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        diags.error(Loc(file, line + line_offset, col), "yaml.syntax", message or "invalid YAML")
        return None, pos
    except yaml.YAMLError as exc:
        if not report:
            raise
        diags.error(Loc(file, 1 + line_offset, 1), "yaml.syntax", str(exc))
        return None, pos
    finally:
        loader.dispose()


def _has_alias(node: yaml.Node) -> bool:
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            return True
        seen.add(id(n))
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                if k.tag == "tag:yaml.org,2002:merge":
                    return True
                stack.extend((k, v))
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)
    return False
