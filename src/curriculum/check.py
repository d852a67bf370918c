"""Stage 7, `check`: the built edition, before it is swapped in.

- Internal links: every relative `href`/`src` in every HTML file points at a
  file of the edition, and every `#fragment` at an id on the target page.
- Leaks: no run of eight words from text withheld from this edition (the
  bodies above its tier) appears in any of its files, unless the same run
  also occurs in text the edition may show.
"""

from __future__ import annotations

import html
import posixpath
import re
from collections.abc import Iterable

from curriculum.errors import Diagnostics, Loc
from curriculum.index import visible_text

_ATTR = re.compile(r"""\s(?:href|src)="([^"]*)\"""")
_ID = re.compile(r"""\sid="([^"]+)\"""")
_WORDS = re.compile(r"[a-z0-9]+")
SHINGLE = 8


def check_links(files: dict[str, bytes], edition: str, diags: Diagnostics) -> None:
    ids: dict[str, set[str]] = {}
    html_files = {p: d.decode("utf-8") for p, d in files.items() if p.endswith(".html")}
    for path, text in html_files.items():
        ids[path] = set(_ID.findall(text))
    for path, text in sorted(html_files.items()):
        for m in _ATTR.finditer(text):
            href = html.unescape(m.group(1))
            if not href or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", href) or href.startswith("//"):
                continue
            target, _, frag = href.partition("#")
            line = text.count("\n", 0, m.start()) + 1
            loc = Loc(f"build/{edition}/{path}", line, 1)
            if target.startswith("/"):
                diags.error(loc, "link.absolute", f"'{href}' is absolute; links must be relative")
                continue
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target)) \
                if target else path
            if resolved.endswith("/"):
                resolved += "index.html"
            if resolved not in files:
                diags.error(loc, "link.broken", f"'{href}' points at no file of the edition")
            elif frag and resolved in ids and frag not in ids[resolved]:
                diags.error(loc, "link.fragment", f"'{href}': no id '{frag}' on {resolved}")


def shingles(text: str) -> set[int]:
    words = _WORDS.findall(text.lower())
    return {hash(tuple(words[i:i + SHINGLE])) for i in range(len(words) - SHINGLE + 1)}


def check_leaks(files: dict[str, bytes], withheld: Iterable[str], allowed: Iterable[str],
                edition: str, diags: Diagnostics) -> None:
    secret: set[int] = set()
    for text in withheld:
        secret |= shingles(text)
    for text in allowed:
        secret -= shingles(text)
    if not secret:
        return
    for path, data in sorted(files.items()):
        if path.endswith((".png", ".woff2", ".ico")):
            continue
        text = data.decode("utf-8", errors="replace")
        plain = visible_text(text) if path.endswith(".html") else html.unescape(text)
        if shingles(plain) & secret or shingles(text) & secret:
            diags.error(Loc(f"build/{edition}/{path}", 1, 1), "leak.withheld-text",
                        "holds text withheld from this edition")
