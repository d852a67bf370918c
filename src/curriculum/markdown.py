"""Markdown: one configured markdown-it parser, the project's syntax rules,
and the references a document makes.

Syntax beyond CommonMark, each added as a markdown-it rule:

- tables, footnotes, definition lists, admonitions (`!!! note "Title"`),
  heading anchors, `$math$` / `$$math$$` (MathML at build time);
- `[text](capsule:id)`, `question:id`, `experiment:id` links to content;
- `{fig:topic/version.field}` / `{fig:topic/version.field@k=v,...}` /
  `{fig:ceiling/copy.tbps}`: a measured figure (see `measure`);
- `{est:VALUE | ARITHMETIC}`: an estimate, shown as one, its arithmetic on hover
  or focus; `{spec:VALUE | SOURCE}`: a published constant and where it is from.
  Malformed markup becomes a `typed_error` token that `validate` reports;
- a fenced block with info `chart`: a YAML chart spec (see `charts`);
- fenced blocks with info `artifact` (an excerpt of a committed compiler output) and
  `ncu` (a table of stored Nsight Compute figures), see `artifacts`;
- HTML comments are dropped; `<!-- more -->` and `<!-- answer -->` are markers.

Raw HTML is never passed through (`html=False`) and only known link schemes
are turned into links.
"""

from __future__ import annotations

import pickle
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from mdit_py_plugins.admon import admon_plugin
from mdit_py_plugins.anchors import anchors_plugin
from mdit_py_plugins.deflist import deflist_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.footnote import footnote_plugin

EXTERNAL_SCHEMES = frozenset({"http", "https", "mailto"})
CONTENT_SCHEMES = frozenset({"capsule", "question", "experiment"})
LANGUAGES = {
    "cuda": "cuda", "cu": "cuda", "c++": "cpp", "cpp": "cpp", "c": "c", "python": "python",
    "py": "python", "bash": "bash", "sh": "bash", "console": "console", "text": "text",
    "yaml": "yaml", "json": "json", "ptx": "text", "sass": "text", "": "text",
}
FIG_RE = re.compile(
    r"\{fig:(?P<case>[a-z0-9_-]+/[A-Za-z0-9_-]+)\.(?P<field>[a-z0-9_]+)"
    r"(?:@(?P<shape>[a-z0-9_]+=\d+(?:,[a-z0-9_]+=\d+)*))?(?:#(?P<gpu>[a-z0-9-]+))?\}"
)
TYPED_OPEN = re.compile(r"\{(est|spec):")
TYPED_KINDS = {
    "est": ("estimate.syntax", "arithmetic", "{est:2.1 ms | 32 layers × 64 µs}"),
    "spec": ("spec.syntax", "source", "{spec:4.8 TB/s | NVIDIA H200 datasheet}"),
}
SCHEME_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")
_INVISIBLE = re.compile(r"[\x00-\x20\x7f]+")


def link_scheme(url: str) -> str | None:
    """The scheme of a URL as a browser would read it, lower-cased, or None."""
    m = SCHEME_RE.match(_INVISIBLE.sub("", url))
    return m.group(1).lower() if m else None


def is_allowed_link(url: str) -> bool:
    """Only relative links and known schemes; checked on the URL as written and
    percent-decoded, so an encoded control character cannot hide a scheme."""
    from urllib.parse import unquote

    allowed = EXTERNAL_SCHEMES | CONTENT_SCHEMES
    for form in (url, unquote(url)):
        scheme = link_scheme(form)
        if scheme is not None and scheme not in allowed:
            return False
    return True


# --- rules ---------------------------------------------------------------------


def _comment_block(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """`<!-- ... -->` starting a line: dropped, except markers kept as tokens."""
    pos = state.bMarks[start] + state.tShift[start]
    if state.sCount[start] - state.blkIndent >= 4 or not state.src.startswith("<!--", pos):
        return False
    line = start
    while line < end:
        text = state.src[state.bMarks[line]:state.eMarks[line]]
        if "-->" in text:
            break
        line += 1
    if line >= end:
        return False
    if silent:
        return True
    inner = state.src[pos:state.eMarks[line]]
    token = state.push("comment", "", 0)
    token.content = inner[4:inner.rfind("-->")].strip()
    token.map = [start, line + 1]
    token.hidden = True
    state.line = line + 1
    return True


def _comment_inline(state: StateInline, silent: bool) -> bool:
    if not state.src.startswith("<!--", state.pos):
        return False
    close = state.src.find("-->", state.pos + 4)
    if close < 0:
        return False
    state.pos = close + 3
    return True


def _figure_inline(state: StateInline, silent: bool) -> bool:
    if not state.src.startswith("{fig:", state.pos):
        return False
    m = FIG_RE.match(state.src, state.pos)
    if not m:
        return False
    if not silent:
        token = state.push("figure_ref", "", 0)
        token.meta = {k: v for k, v in m.groupdict().items()}
        token.meta["offset"] = state.pos
        token.content = m.group(0)
    state.pos = m.end()
    return True


def typed_markup(src: str, pos: int) -> tuple[int, dict[str, Any]] | None:
    """`{est:VALUE | WHY}` or `{spec:VALUE | SOURCE}` at `pos`: (end, meta), or None when
    no such markup starts there. Malformed markup gives meta with `code` and `message`
    (and ends at its closing brace, or right after the opening `{est:` when none)."""
    m = TYPED_OPEN.match(src, pos)
    if not m:
        return None
    kind = m.group(1)
    code, second, example = TYPED_KINDS[kind]
    close = src.find("}", m.end())
    nested = src.find("{", m.end())
    if close < 0 or 0 <= nested < close:
        why = ("is never closed with '}' (in a table cell, write its bar as '\\|')" if close < 0
               else "holds a '{' (markup cannot nest)")
        return m.end(), {"kind": kind, "code": code, "offset": pos,
                         "message": f"'{{{kind}:' {why}; write it as {example}"}
    inner = " ".join(src[m.end():close].replace("\\|", "|").split())  # `\|` in a table
    value, bar, reason = (part.strip() for part in inner.partition("|"))
    meta: dict[str, Any] = {"kind": kind, "offset": pos, "value": value, "why": reason}
    problem = ("has no '|' between the value and its " + second if not bar else
               "has an empty value" if not value else f"has an empty {second}" if not reason
               else None)
    if problem:
        meta.update(code=code, message=f"'{src[pos:close + 1]}' {problem}; write it as {example}")
    return close + 1, meta


def _typed_inline(state: StateInline, silent: bool) -> bool:
    if state.src[state.pos] != "{":
        return False
    found = typed_markup(state.src, state.pos)
    if found is None:
        return False
    end, meta = found
    meta["text"] = state.src[state.pos:end]
    if not silent:
        token = state.push("typed_error" if "code" in meta else "typed_number", "", 0)
        token.meta = meta
        token.content = state.src[state.pos:end]
    state.pos = end
    return True


def _math_renderer(content: str, options: dict[str, Any]) -> str:
    return to_mathml(content, bool(options.get("display_mode")))


_MATHML: dict[tuple[str, bool], str] = {}  # converted in this process
_STORED_MATHML: dict[tuple[str, bool], str] = {}  # from an earlier build (`add_stored`)


def to_mathml(latex: str, display: bool) -> str:
    """A formula as MathML; each distinct formula is converted once, and not at all when
    an earlier build's store has it."""
    key = (latex, display)
    found = _MATHML.get(key)
    if found is None:
        found = _STORED_MATHML.get(key)
        if found is None:
            from latex2mathml.converter import convert

            found = convert(latex.strip(), display="block" if display else "inline")
        _MATHML[key] = found
    return found


@lru_cache(maxsize=1)
def parser() -> MarkdownIt:
    """The one parser every document goes through (token rules only; output
    rules that need a page's context are installed by `render`)."""
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.validateLink = is_allowed_link
    md.use(footnote_plugin).use(deflist_plugin).use(admon_plugin)
    md.use(anchors_plugin, min_level=2, max_level=3, permalink=True, permalinkSymbol="#")
    md.use(dollarmath_plugin, allow_digits=False, renderer=_math_renderer)
    md.block.ruler.before("html_block", "comment", _comment_block,
                          {"alt": ["paragraph", "reference", "blockquote"]})
    md.inline.ruler.before("html_inline", "comment_inline", _comment_inline)
    md.inline.ruler.before("link", "figure_ref", _figure_inline)
    md.inline.ruler.before("link", "typed_number", _typed_inline)
    return md


def parse(text: str) -> list[Token]:
    return parser().parse(text, {})


# Tokens as plain tuples, for `marshal` to carry between processes: several times as fast
# to write and read back as pickling the Token objects (see `bodies.parse_capsule_files`).


def flat_tokens(tokens: list[Token]) -> list[tuple[Any, ...]]:
    return [_flat(t) for t in tokens]


def _flat(t: Token) -> tuple[Any, ...]:
    return (t.type, t.tag, t.nesting, t.attrs, t.map, t.level,
            None if t.children is None else [_flat(c) for c in t.children],
            t.content, t.markup, t.info, t.meta, t.block, t.hidden)


def tokens_from_flat(rows: list[tuple[Any, ...]]) -> list[Token]:
    return [_token(row) for row in rows]


def _token(row: tuple[Any, ...]) -> Token:
    t = object.__new__(Token)  # every field is set below; the constructor's checks ran once
    (t.type, t.tag, t.nesting, t.attrs, t.map, t.level, children, t.content, t.markup,
     t.info, t.meta, t.block, t.hidden) = row
    t.children = None if children is None else [_token(c) for c in children]
    return t


# --- what a document refers to ------------------------------------------------------


@dataclass
class Refs:
    """References found in one document, each with a 0-based line in the body."""

    links: list[tuple[str, int]] = field(default_factory=list)  # href, line
    figures: list[tuple[dict[str, Any], int]] = field(default_factory=list)
    charts: list[tuple[str, int]] = field(default_factory=list)  # YAML text, line of the fence
    artifacts: list[tuple[str, str, int]] = field(default_factory=list)  # kind, YAML, fence line
    images: list[tuple[str, str, int]] = field(default_factory=list)  # src, alt, line
    code_langs: list[tuple[str, int]] = field(default_factory=list)
    math: list[tuple[str, bool, int]] = field(default_factory=list)
    markers: list[tuple[str, int]] = field(default_factory=list)  # comment text, line
    typed: list[tuple[dict[str, Any], int]] = field(default_factory=list)  # est/spec, line
    words: int = 0
    code_lines: int = 0


@dataclass(frozen=True)
class Body:
    """A Markdown text, where it starts in its file, and its tokens, parsed once."""

    text: str
    file: str
    line: int  # 1-based line of the text's first line
    refs: Refs = field(default_factory=Refs, compare=False)
    parsed: tuple[Token, ...] | bytes = field(default=(), compare=False, repr=False)

    @property
    def tokens(self) -> tuple[Token, ...]:
        if isinstance(self.parsed, bytes):
            return pickle.loads(zlib.decompress(self.parsed))  # type: ignore[no-any-return]
        return self.parsed

    def packed(self) -> Body:
        """The same body with its tokens pickled and compressed."""
        if isinstance(self.parsed, bytes):
            return self
        data = zlib.compress(pickle.dumps(self.parsed, protocol=pickle.HIGHEST_PROTOCOL), 1)
        return Body(self.text, self.file, self.line, self.refs, data)


_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’-]*")


def collect_refs(tokens: list[Token]) -> Refs:
    refs = Refs()
    for tok in tokens:
        line = tok.map[0] if tok.map else 0
        if tok.type == "fence":
            info = tok.info.strip().split()[0] if tok.info.strip() else ""
            if info == "chart":
                refs.charts.append((tok.content, line))
            elif info in ("artifact", "ncu"):
                refs.artifacts.append((info, tok.content, line))
            else:
                refs.code_langs.append((info, line))
                refs.code_lines += tok.content.count("\n")
        elif tok.type == "code_block":
            refs.code_lines += tok.content.count("\n")
        elif tok.type == "math_block":
            refs.math.append((tok.content, True, line))
        elif tok.type == "comment":
            refs.markers.append((tok.content, line))
        elif tok.type == "inline" and tok.children:
            _collect_inline(tok, line, refs)
    return refs


def _collect_inline(tok: Token, line: int, refs: Refs) -> None:
    src = tok.content
    assert tok.children is not None
    for child in tok.children:
        if child.type == "text":
            refs.words += len(_WORD.findall(child.content))
        elif child.type == "link_open":
            href = str(child.attrs.get("href", ""))
            refs.links.append((href, line + _line_of(src, href)))
        elif child.type == "image":
            src_attr = str(child.attrs.get("src", ""))
            alt = "".join(c.content for c in (child.children or []))
            refs.images.append((src_attr, alt, line + _line_of(src, src_attr)))
        elif child.type == "figure_ref":
            refs.figures.append((child.meta, line + src.count("\n", 0, child.meta["offset"])))
        elif child.type in ("typed_number", "typed_error"):
            refs.typed.append((child.meta, line + src.count("\n", 0, child.meta["offset"])))
        elif child.type == "math_inline":
            refs.math.append((child.content, False, line + _line_of(src, child.content)))


def _line_of(src: str, needle: str) -> int:
    at = src.find(needle) if needle else -1
    return src.count("\n", 0, at) if at > 0 else 0


def split_at_marker(body: str, marker: str) -> tuple[str, str | None, int]:
    """Split Markdown at a `<!-- marker -->` line outside fenced code.

    Returns (text before, text after or None, 0-based line index where the
    text after starts)."""
    lines = body.split("\n")
    fence: str | None = None
    for i, raw in enumerate(lines):
        stripped = raw.strip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            continue
        if re.fullmatch(rf"<!--\s*{re.escape(marker)}\s*-->", stripped):
            return "\n".join(lines[:i]), "\n".join(lines[i + 1:]), i + 1
    return body, None, len(lines)


Renderer = Callable[[list[Token], dict[str, Any]], str]


# --- output rules: a page's context arrives through `env` ------------------------------


_HIGHLIGHTED: dict[tuple[str, str], str] = {}
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)\n(?P<code>.*?)^(?P=fence)[`~]*[ \t]*$",
                    re.M | re.S)


_STORED_HIGHLIGHTED: dict[tuple[str, str], str] = {}  # from an earlier build (`add_stored`)


def highlight(code: str, lang: str) -> str:
    """A code block as highlighted HTML; each distinct block is highlighted once, and not
    at all when an earlier build's store has it."""
    key = (code, lang)
    html = _HIGHLIGHTED.get(key)
    if html is None:
        html = _STORED_HIGHLIGHTED.get(key)
        if html is None:
            from pygments import highlight as pyg_highlight

            name = LANGUAGES.get(lang.lower(), "text")
            html = f'<div class="code" data-lang="{name}">{pyg_highlight(code, _lexer(name), _formatter())}</div>\n'
        _HIGHLIGHTED[key] = html
    return html


def highlight_files(paths: list[Path]) -> dict[tuple[str, str], str]:
    """Every top-level fenced block of these Markdown files, highlighted ahead of the render
    (a block found differently here than by the parser is simply highlighted again later)."""
    found: dict[tuple[str, str], str] = {}
    for path in paths:
        for m in _FENCE.finditer(path.read_text(encoding="utf-8")):
            words = m.group("info").split()
            lang = words[0] if words else ""
            if lang not in ("chart", "artifact", "ncu"):
                found[(m.group("code"), lang)] = highlight(m.group("code"), lang)
    return found


def add_highlighted(blocks: dict[tuple[str, str], str]) -> None:
    """Blocks highlighted elsewhere (another process), for `highlight` to reuse."""
    _HIGHLIGHTED.update(blocks)


def converted() -> tuple[dict[tuple[str, str], str], dict[tuple[str, bool], str]]:
    """The code blocks highlighted and the formulas converted by this process so far."""
    return dict(_HIGHLIGHTED), dict(_MATHML)


def stored() -> tuple[dict[tuple[str, str], str], dict[tuple[str, bool], str]]:
    """What an earlier build's store offered this process (`add_stored`)."""
    return _STORED_HIGHLIGHTED, _STORED_MATHML


def add_stored(blocks: dict[tuple[str, str], str], math: dict[tuple[str, bool], str]) -> None:
    """What an earlier build highlighted and converted (see `store.py`): used when the same
    block or formula comes again, and kept only if it does."""
    _STORED_HIGHLIGHTED.update(blocks)
    _STORED_MATHML.update(math)


@cache
def _lexer(name: str) -> Any:
    from pygments.lexers import get_lexer_by_name

    return get_lexer_by_name(name, stripnl=False)


@lru_cache(maxsize=1)
def _formatter() -> Any:
    """One formatter for every block: building one builds its whole style sheet."""
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(cssclass="highlight", wrapcode=True)


def _render_fence(self: Any, tokens: list[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    tok = tokens[idx]
    info = tok.info.strip().split()[0] if tok.info.strip() else ""
    if info == "chart":
        return env["chart"](tok.content, tok.map[0] if tok.map else 0)
    if info in ("artifact", "ncu"):
        return env["artifact"](info, tok.content, tok.map[0] if tok.map else 0)
    return highlight(tok.content, info)


def _render_code_block(self: Any, tokens: list[Token], idx: int, options: Any,
                       env: dict[str, Any]) -> str:
    return highlight(tokens[idx].content, "text")


def _render_link_open(self: Any, tokens: list[Token], idx: int, options: Any,
                      env: dict[str, Any]) -> str:
    from html import escape

    tok = tokens[idx]
    href = str(tok.attrs.get("href", ""))
    attrs = {**tok.attrs, "href": env["link"](href)}
    if link_scheme(href) in ("http", "https"):
        attrs["rel"] = "noopener"
    return "<a" + "".join(f' {k}="{escape(str(v))}"' for k, v in attrs.items()) + ">"


def _render_image(self: Any, tokens: list[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    tok = tokens[idx]
    from html import escape

    alt = escape("".join(c.content for c in (tok.children or [])))
    src = escape(env["image"](str(tok.attrs.get("src", ""))))
    title = tok.attrs.get("title")
    img = f'<img src="{src}" alt="{alt}" loading="lazy">'
    if not title:
        return img
    return f'<span class="image">{img}<span class="caption">{escape(str(title))}</span></span>'


def _render_figure_ref(self: Any, tokens: list[Token], idx: int, options: Any,
                       env: dict[str, Any]) -> str:
    return env["figure"](tokens[idx].meta)


def render_typed(kind: str, value: str, why: str) -> str:
    """An estimate or a spec-sheet constant: the value, marked, and what it rests on in a
    note that shows on hover or focus (and that screen readers, print and e-readers without
    the site's styles read inline, in parentheses)."""
    from html import escape

    if kind == "est":
        return (f'<span class="est" tabindex="0"><span class="est-mark">\u2248</span>'
                f'<span class="est-value">{escape(value)}</span>'
                f'<span class="est-why" role="tooltip"><span class="paren"> (</span>estimate: '
                f'{escape(why)}<span class="paren">)</span></span></span>')
    return (f'<span class="spec" tabindex="0"><span class="spec-value">{escape(value)}</span>'
            f'<span class="spec-why" role="tooltip"><span class="paren"> (</span>spec: '
            f'{escape(why)}<span class="paren">)</span></span></span>')


def _render_typed(self: Any, tokens: list[Token], idx: int, options: Any,
                  env: dict[str, Any]) -> str:
    meta = tokens[idx].meta
    return render_typed(meta["kind"], meta["value"], meta["why"])


def _render_typed_error(self: Any, tokens: list[Token], idx: int, options: Any,
                        env: dict[str, Any]) -> str:
    from html import escape

    return escape(tokens[idx].content)


def _render_nothing(self: Any, tokens: list[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    return ""


@lru_cache(maxsize=1)
def renderer_parser() -> MarkdownIt:
    """The parser with output rules installed; `render_tokens` needs env keys
    link, image, figure and chart (callables)."""
    md = parser()
    md.add_render_rule("fence", _render_fence)
    md.add_render_rule("code_block", _render_code_block)
    md.add_render_rule("link_open", _render_link_open)
    md.add_render_rule("image", _render_image)
    md.add_render_rule("figure_ref", _render_figure_ref)
    md.add_render_rule("typed_number", _render_typed)
    md.add_render_rule("typed_error", _render_typed_error)
    md.add_render_rule("comment", _render_nothing)
    return md


def render_tokens(tokens: list[Token], env: dict[str, Any]) -> str:
    md = renderer_parser()
    return md.renderer.render(tokens, md.options, env)


def headings(tokens: list[Token]) -> list[tuple[int, str, str]]:
    """(level, id, text) of every h2/h3, for a page's table of contents."""
    out = []
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.tag in ("h2", "h3") and "id" in tok.attrs:
            inline = tokens[i + 1]
            text = "".join(_plain(c) for c in (inline.children or []))
            out.append((int(tok.tag[1]), str(tok.attrs["id"]), text.strip()))
    return out


def _plain(tok: Token) -> str:
    """A heading's inline token as text for a table of contents."""
    if tok.type in ("text", "code_inline", "math_inline"):
        return tok.content
    if tok.type == "typed_number":
        return ("\u2248" if tok.meta["kind"] == "est" else "") + tok.meta["value"]
    return ""
