"""What stage 2 (`validate`) checks of one document on its own: a YAML mapping against
its model, and one Markdown body, parsed once.

`validate` puts whole catalogs together from these; the puzzles (`puzzle.content`) check
their pages with the same functions. Both import this module, and it imports neither.
"""

from __future__ import annotations

import contextlib
import marshal
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markdown_it.token import Token

from curriculum.assets import DEFAULT_MAX_BYTES, Refused, confine
from curriculum.errors import Diagnostics, Loc, did_you_mean
from curriculum.lint import check_markup, lint_body, typed_number_spots
from curriculum.load import RawDoc, markdown_doc
from curriculum.markdown import (
    CONTENT_SCHEMES,
    LANGUAGES,
    Body,
    collect_refs,
    flat_tokens,
    is_allowed_link,
    link_scheme,
    parse,
    split_at_marker,
    to_mathml,
    tokens_from_flat,
)

if TYPE_CHECKING:  # pydantic is imported where a schema error is read: a process that
    # only parses bodies (`parse_capsule_files`) starts without it
    from pydantic import BaseModel, ValidationError

# --- schema errors --------------------------------------------------------------


def schema_errors(doc: RawDoc, model: type[BaseModel], exc: ValidationError,
                   diags: Diagnostics) -> None:
    for err in exc.errors(include_url=False):
        path = tuple(p for p in err["loc"] if isinstance(p, str | int))
        kind = err["type"]
        value = err.get("input")
        where = ".".join(str(p) for p in path) or "(document)"
        if kind == "extra_forbidden":
            key = str(path[-1]) if path else "?"
            fields = _fields_at(model, path[:-1])
            diags.error(doc.positions.loc(path, prefer_key=True), "schema.unknown-key",
                        f"unknown key '{key}'", did_you_mean(key, fields) or
                        (f"allowed here: {', '.join(sorted(fields))}" if fields else None))
        elif kind == "missing":
            diags.error(doc.positions.loc(path[:-1], prefer_key=True), "schema.missing",
                        f"missing required key '{path[-1]}'" if path else "missing value")
        elif kind in {"string_type", "int_type", "float_type", "bool_type", "list_type",
                      "dict_type", "model_type", "int_from_float"}:
            hint = None
            if kind == "string_type" and isinstance(value, bool | int | float) or \
                    kind == "string_type" and value is not None and not isinstance(value, str | list | dict):
                hint = f"YAML read {value!r} as {type(value).__name__}; quote it to keep it text"
            diags.error(doc.positions.loc(path), "schema.type",
                        f"{where}: {err['msg'].lower()}, got {describe(value)}", hint)
        else:
            msg = err["msg"].removeprefix("Value error, ")
            diags.error(doc.positions.loc(path), "schema.value", f"{where}: {msg}")


def describe(value: Any) -> str:
    """A YAML value as a message names it: "number 3", "text 'x'", "nothing"."""
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"number {value!r}"
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return f"text {value!r}"
    return type(value).__name__


def _fields_at(model: type[BaseModel], path: tuple[str | int, ...]) -> list[str]:
    """Field names of the model reached by `path` (skipping list indices)."""
    current: Any = model
    for part in path:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        current = _inner_model(field.annotation)
        if current is None:
            return []
    return list(getattr(current, "model_fields", {}))


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


# --- Markdown bodies --------------------------------------------------------------


def parse_body(text: str, file: str, line: int) -> Body:
    tokens = _ELSEWHERE.take(text, file)
    if tokens is None:
        tokens = parse(text)
    return Body(text, file, line, collect_refs(tokens), tuple(tokens))


# --- bodies parsed by another process ---------------------------------------------
#
# Parsing is most of validating a large course, and it needs nothing from the rest of the
# project: while this process loads and validates, a second one (`workers.ParseAhead`)
# parses the bodies of the later capsule files in load order (`parse_capsule_files`), in
# batches, and `parse_body` takes each from its batch when validation reaches it. A body
# found differently there (or not at all) is parsed here, so the tokens are those of
# `parse(text)` either way.


def parse_capsule_files(root: Path, paths: list[Path]) -> dict[str, bytes]:
    """The bodies of these capsule files, split at `<!-- more -->` as `validate` splits
    them, parsed and linted, each under its text as its `marshal`'d `flat_tokens` and
    `typed_number_spots`."""
    found: dict[str, bytes] = {}
    for path in paths:
        doc = markdown_doc(root, path, "capsule", Diagnostics())
        if doc is None:
            continue  # validation reports it
        head, tail, _ = split_at_marker(doc.body, "more")
        for text in (head, tail):
            if text is not None and text not in found:
                tokens = parse(text)
                with contextlib.suppress(ValueError):  # what marshal cannot write: parse there
                    found[text] = marshal.dumps((flat_tokens(tokens),
                                                 typed_number_spots(text, tokens)))
    return found


Batch = tuple[Iterable[str], Callable[[], dict[str, bytes]]]


class _Elsewhere:
    """The files whose bodies another process is parsing, by batch, and how to wait for
    each batch."""

    def __init__(self) -> None:
        self.batch_of: dict[str, int] = {}
        self.results: list[Callable[[], dict[str, bytes]]] = []
        self.parsed: list[dict[str, bytes] | None] = []
        self.spots: dict[str, list[tuple[int, int, str]]] = {}  # by text, for `check_body`

    def take(self, text: str, file: str) -> list[Token] | None:
        at = self.batch_of.get(file)
        if at is None:
            return None
        parsed = self.parsed[at]
        if parsed is None:
            try:
                parsed = self.results[at]()
            except Exception:  # noqa: BLE001 - the other process failed: parse here instead
                parsed = {}
            self.parsed[at] = parsed
        blob = parsed.pop(text, None)
        if blob is None:
            return None
        rows, self.spots[text] = marshal.loads(blob)
        return tokens_from_flat(rows)


_ELSEWHERE = _Elsewhere()


@contextlib.contextmanager
def parsed_elsewhere(*batches: Batch) -> Iterator[None]:
    """While inside, `parse_body` takes the bodies of each batch's files (source names, as
    a RawDoc's `file`) from its `result()`, which waits for `parse_capsule_files` in
    another process; a batch is waited for only when a body of it is first asked for."""
    _ELSEWHERE.batch_of = {file: at for at, (files, _) in enumerate(batches) for file in files}
    _ELSEWHERE.results = [result for _, result in batches]
    _ELSEWHERE.parsed = [None] * len(batches)
    try:
        yield
    finally:
        _ELSEWHERE.batch_of, _ELSEWHERE.results, _ELSEWHERE.parsed = {}, [], []
        _ELSEWHERE.spots = {}


def check_body(body: Body, root: Path, ids: dict[str, set[str]], diags: Diagnostics,
                max_asset_bytes: int = DEFAULT_MAX_BYTES) -> None:
    refs = body.refs
    check_markup(body, diags)
    lint_body(body, diags, _ELSEWHERE.spots.pop(body.text, None))  # linted there, if parsed there
    for href, line in refs.links:
        loc = Loc(body.file, body.line + line, 1)
        scheme = link_scheme(href)
        if scheme in CONTENT_SCHEMES:
            target = href.split(":", 1)[1].split("#", 1)[0]
            if target not in ids[scheme]:
                diags.error(loc, "link.unknown-ref", f"no {scheme} '{target}'",
                            did_you_mean(target, ids[scheme]))
    for match in re.finditer(r"\]\(\s*<?([^)\s>]*)", body.text):
        if not is_allowed_link(match.group(1)):
            line = body.text.count("\n", 0, match.start())
            diags.error(Loc(body.file, body.line + line, 1), "link.scheme",
                        f"link scheme '{link_scheme(match.group(1))}' is not allowed",
                        "use http, https, mailto, capsule:, question: or experiment:")
    for src, alt, line in refs.images:
        loc = Loc(body.file, body.line + line, 1)
        if not alt.strip():
            diags.error(loc, "image.no-alt", f"image '{src}' has no alt text",
                        "write ![what the figure shows](path)")
        if link_scheme(src) is None and src:
            found = confine(src, root / Path(body.file).parent, root / "content", max_asset_bytes)
            if isinstance(found, Refused):
                diags.error(_image_loc(body, line, src), found.code, found.message, found.hint)
    for lang, line in refs.code_langs:
        if lang.lower() not in LANGUAGES:
            diags.error(Loc(body.file, body.line + line, 1), "code.unknown-language",
                        f"unknown code language '{lang}'", did_you_mean(lang, LANGUAGES))
    if refs.artifacts:
        from curriculum.artifacts import check_blocks

        check_blocks(body, root, diags)
    for latex, display, line in refs.math:
        try:
            to_mathml(latex, display)
        except Exception as exc:  # latex2mathml raises several types
            diags.error(Loc(body.file, body.line + line, 1), "math.invalid",
                        f"cannot render math '{latex.strip()[:40]}': "
                        f"{str(exc) or type(exc).__name__}")


def _image_loc(body: Body, line: int, src: str) -> Loc:
    """Where an image's path is written: its line, and the column of the path on it."""
    lines = body.text.split("\n")
    text = lines[line] if 0 <= line < len(lines) else ""
    col = text.find(f"]({src}")
    col = col + 2 if col >= 0 else text.find(src)
    return Loc(body.file, body.line + line, col + 1 if col >= 0 else 1)
