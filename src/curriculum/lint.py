"""Prose lints: a performance number must say what kind of number it is.

A number with a performance unit (s, ms, µs, us, ns, GB/s, TB/s, GFLOP/s,
TFLOP/s, PFLOP/s, FLOP/B, FLOP/byte, "N% of ...", and the same units spelled
out: "FLOP per byte", "TB per second", "milliseconds") written as plain text in
prose is either measured, estimated or read off a spec sheet, and the reader
cannot tell which. `prose.typed-number` (a warning; an error under `--strict`)
asks for one of `{fig:...}`, `{est:value | arithmetic}` or
`{spec:value | source}`.

Not read: fenced and indented code, inline code, `$...$` and `$$...$$` math,
fig/est/spec markup, link and image URLs, HTML comments, and the id-like
fields of YAML (ids, references, tiers). The text is masked rather than parsed
again, so every warning has the exact line and column of the number.

`check_markup` reports malformed `{est:...}` / `{spec:...}` markup
(`estimate.syntax`, `spec.syntax`) found by the parser.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from curriculum.errors import Diagnostics, Loc
from curriculum.load import RawDoc
from curriculum.markdown import FIG_RE, TYPED_OPEN, Body, typed_markup

HINT = "cite it as {fig:…}, or write {est:value | arithmetic} or {spec:value | source}"
YAML_HINT = ("YAML fields are plain text, where no markup renders: say it without the number, "
             "or move it into the Markdown body where it can be cited")

_SPACE = r"[ \u00a0\u2009\u202f]?"
# The first digit comes first, then the look behind it: a pattern that opens with a
# character (not a lookaround) lets the engine skip ahead to where a match can start.
_NUMBER = r"\d(?<![\w.,/\-]\d)\d*(?:[.,]\d+)*"
# Spelled-out forms ("FLOP per byte", "TB per second", "milliseconds") are the same units.
_UNITS = (
    r"(?:[GTP]FLOP/s|[GTP]FLOPS|FLOPs?/B|FLOPs?/byte|FLOPs? per byte|[GT]i?B/s"
    r"|[GTP]FLOPs? per second|[GT]i?B per second|(?:milli|micro|nano)?seconds?"
    r"|ms|[µμu]s|ns|s)"
)
# A unit ends at the end of a word: "2 steps", "5 sms" and "3 nsight" are no times.
TYPED_NUMBER = re.compile(
    rf"(?P<num>{_NUMBER}){_SPACE}(?:(?P<unit>{_UNITS})(?![\w/])"
    rf"|(?P<pct>%){_SPACE}of\b)"
)
# "1990s", "the 80s", "10s of microseconds": a round number with an "s" stuck to it is a
# decade or a plural, not seconds.
_PLURAL = re.compile(r"\d*0s")

_FENCE_TYPES = ("fence", "code_block", "math_block", "math_block_label", "comment")
# A pattern that opens with a lookaround is tried at every position (a lookahead in front
# of a lookbehind helps a little); one that opens with its first character, the lookbehind
# after it, lets the engine skip to the next place that character occurs (five to fifteen
# times as fast).
_CODE_SPAN = re.compile(r"(`(?<!``)`*)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_DISPLAY_MATH = re.compile(r"\$\$.+?\$\$", re.S)
_INLINE_MATH = re.compile(r"\$(?<![\\$\w]\$)(?![\s$])(?:\\.|[^$\n])+?(?<![\s\\])\$(?!\d)")
_LINK_URL = re.compile(r"\]\(\s*<?[^)\s>]*>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*\S+.*$", re.M)
_AUTOLINK = re.compile(r"<[a-zA-Z][a-zA-Z0-9+.-]*:[^\s<>]*>|https?://[^\s)>\]]+")
_COMMENT = re.compile(r"<!--.*?-->", re.S)

# YAML keys whose values are ids, references or settings, never prose.
ID_KEYS = frozenset({
    "id", "capsule", "question", "experiment", "lesson", "category", "access", "track",
    "script", "tag", "kind", "status", "default_from", "concepts", "prerequisites", "level",
    "max_tier", "courses", "capsules", "unit", "base_url", "language", "order", "hours",
    "minutes", "widgets", "labs", "authors",
})


def _blank(text: str, start: int, end: int) -> str:
    """`text[start:end]` replaced by spaces, newlines kept (positions stay put)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def _typed_spans(text: str) -> Iterator[tuple[int, int]]:
    for m in FIG_RE.finditer(text):
        yield m.start(), m.end()
    for m in TYPED_OPEN.finditer(text):
        found = typed_markup(text, m.start())
        if found is not None:
            yield m.start(), found[0]


def _blank_all(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """`_blank` of every span at once: one copy of the text, not one per span."""
    pieces: list[str] = []
    pos = 0
    for start, end in sorted(spans):
        start = max(start, pos)
        if end <= start:
            continue
        segment = text[start:end]
        pieces += [text[pos:start], " " * len(segment) if "\n" not in segment
                   else "\n".join(" " * len(line) for line in segment.split("\n"))]
        pos = end
    if not pieces:
        return text
    pieces.append(text[pos:])
    return "".join(pieces)


def mask(text: str, code_lines: set[int] | None = None, markup: bool = True) -> str:
    """`text` with everything that is not prose blanked out, positions unchanged
    (fig/est/spec markup too, unless `markup` is false).

    Each pattern in turn looks at the text as the patterns before it left it, so a
    link inside a code span, say, is gone before links are looked for."""
    if code_lines:
        lines = text.split("\n")
        for i in code_lines:
            if 0 <= i < len(lines):
                lines[i] = " " * len(lines[i])
        text = "\n".join(lines)
    for pattern in (_COMMENT, _CODE_SPAN):
        text = _blank_all(text, (m.span() for m in pattern.finditer(text)))
    if markup:
        text = _blank_all(text, list(_typed_spans(text)))
    for pattern in (_DISPLAY_MATH, _INLINE_MATH, _LINK_URL, _REF_DEF, _AUTOLINK):
        text = _blank_all(text, (m.span() for m in pattern.finditer(text)))
    return text


def typed_numbers(text: str, code_lines: set[int] | None = None, markup: bool = True
                  ) -> Iterator[tuple[int, int, str]]:
    """(0-based line, 0-based column, the number with its unit) of every untyped
    performance number in `text` (see `mask` for `markup`)."""
    masked = mask(text, code_lines, markup)
    starts = [0] + [m.end() for m in re.finditer("\n", masked)]
    line = 0
    for m in TYPED_NUMBER.finditer(masked):
        if m.group("unit") == "s" and masked[m.end("num"):m.start("unit")] == "" \
                and _PLURAL.fullmatch(m.group(0)):
            continue
        while line + 1 < len(starts) and starts[line + 1] <= m.start():
            line += 1
        yield line, m.start() - starts[line], m.group(0)


def _code_lines(tokens: Iterable[Any]) -> set[int]:
    """Lines (0-based, in the body) of code blocks, math blocks and comments."""
    lines: set[int] = set()
    for tok in tokens:
        if tok.type in _FENCE_TYPES and tok.map:
            lines.update(range(tok.map[0], tok.map[1]))
    return lines


def _warn(diags: Diagnostics, loc: Loc, found: str, hint: str = HINT) -> None:
    diags.warning(loc, "prose.typed-number", f"'{found}' in prose is neither a measured figure, an estimate "
                  "nor a spec-sheet constant", hint)


def typed_number_spots(text: str, tokens: Iterable[Any]) -> list[tuple[int, int, str]]:
    """What `lint_body` finds in a body of this text, parsed into these tokens: (0-based
    line in the body, 0-based column, the number with its unit) of each untyped number.
    The process that parses a body elsewhere lints it there too."""
    return list(typed_numbers(text, _code_lines(tokens)))


def lint_body(body: Body, diags: Diagnostics,
              spots: Iterable[tuple[int, int, str]] | None = None) -> None:
    """`prose.typed-number` over one Markdown body (its `typed_number_spots`, when given,
    are not looked for again)."""
    if spots is None:
        spots = typed_numbers(body.text, _code_lines(body.tokens))
    for line, col, found in spots:
        _warn(diags, Loc(body.file, body.line + line, col + 1), found)


def check_markup(body: Body, diags: Diagnostics) -> None:
    """Malformed `{est:...}` / `{spec:...}` markup, at its line and column."""
    lines = body.text.split("\n")
    for meta, line in body.refs.typed:
        if "code" not in meta:
            continue
        text = lines[line] if line < len(lines) else ""
        col = text.find(meta["text"].split("\n")[0])
        loc = Loc(body.file, body.line + line, col + 1 if col >= 0 else 1)
        if meta["kind"] == "est":
            diags.error(loc, "estimate.syntax", meta["message"])
        else:
            diags.error(loc, "spec.syntax", meta["message"])


def lint_yaml(doc: RawDoc, diags: Diagnostics) -> None:
    """`prose.typed-number` over the prose fields of a YAML file or front matter. They
    are shown as plain text, so fig/est/spec markup does not count there."""
    for path, value in _strings(doc.data, ()):
        loc = doc.positions.loc(path)
        for _line, col, found in typed_numbers(value, markup=False):
            # A plain one-line scalar sits at its position; otherwise name the value's start.
            at = Loc(loc.path, loc.line, loc.col + col) if "\n" not in value else loc
            _warn(diags, at, found, YAML_HINT)


def _strings(data: Any, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], str]]:
    if isinstance(data, dict):
        for key, value in data.items():
            if key not in ID_KEYS:
                yield from _strings(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _strings(value, (*path, i))
    elif isinstance(data, str):
        yield path, data
