"""Stage 7, `check`: the built edition, before it is swapped in.

- Internal links: every relative `href`/`src` in every HTML file (and every
  `url(...)` in every stylesheet) points at a file of the edition, and every
  `#fragment` at an id on the target page. No link is absolute: not `/x`, not
  `file:`, and never into the build folder on the author's disk.
- Leaks: no run of eight words from text withheld from this edition (the
  bodies above its tier) appears in any of its files, unless the same run
  also occurs in text the edition may show.
- Orphans (`curriculum check --site`): ready capsules that nothing leads to.

`check_links` and `check_leaks` run inside every build; `check_site` runs the
same link check over editions already on disk.
"""

from __future__ import annotations

import bisect
import contextlib
import gzip
import html
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from curriculum.catalog import Body, Catalog
from curriculum.errors import Diagnostics, Loc
from curriculum.index import visible_text

# A link's value, found from its `="` (a literal the engine skips ahead to; a pattern
# opening with `\s` tries a match at every space of a page), with the attribute's name and
# the white space before it looked at behind. Both find the same values in a page and in
# the spans `check_links` reads, whose edges (`<nav`, `</nav>`) no `\shref=` can cross.
_ATTR = re.compile(r'=(?:(?<=\shref=)|(?<=\ssrc=))"([^"]*)"')
_CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]*)['"]?\s*\)""")
_ID = re.compile(r"""id="([^"]+)\"""")  # led by a space: checked per match (faster)
# Every byte but a-z and 0-9 becomes a space, so `split` yields `[a-z0-9]+`'s words.
_NOT_WORD = bytes(c if chr(c) in "abcdefghijklmnopqrstuvwxyz0123456789" else 32
                  for c in range(256))
_MIX = 0x100000001B3  # an odd multiplier (FNV's prime): each word's place changes the hash
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
SHINGLE = 8
_PAGEFIND_SIGNATURE = b"pagefind_dcd"
_SIDEBAR_OPEN = '<nav class="sidebar"'
_CURRENT_MARKS = re.compile(r' (?:open|class="current"|aria-current="page")(?=[ >])')
_TAG = re.compile(r"<[^>]+>")
_MAIN_OPEN = re.compile(r"<main[\s>]")
_ATTR_VALUE = re.compile(r'="([^"]*)"')
_HIDDEN = re.compile(r"<(script|style|math)[\s>](.*?)</\1>", re.S)


class _Lines:
    """Offset -> (line, column), without rescanning the text for each link."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def at(self, offset: int) -> tuple[int, int]:
        i = bisect.bisect_right(self.starts, offset) - 1
        return i + 1, offset - self.starts[i] + 1


def check_links(files: Mapping[str, bytes], edition: str, diags: Diagnostics,
                pages: Iterable[str] | None = None, prefix: str | None = None) -> None:
    """Check the links of `pages` (every HTML and CSS file by default) against `files`.

    `prefix` is how locations name the edition's folder (`build/<edition>` by default).
    """
    where = prefix if prefix is not None else f"build/{edition}"
    wanted = sorted(pages) if pages is not None else sorted(
        p for p in files if p.endswith((".html", ".css")))
    ids: dict[str, set[str]] = {}
    reading = ["", ""]  # the page being checked and its text: its own ids are read from that

    def ids_of(path: str) -> set[str]:
        found = ids.get(path)
        if found is None:
            text = reading[1] if path == reading[0] else \
                files[path].decode("utf-8", errors="replace")
            found = ids[path] = {m.group(1) for m in _ID.finditer(text)
                                 if m.start() and text[m.start() - 1].isspace()}
        return found

    # Pages at one depth share most links (every capsule page has the course
    # sidebar): a link already found good from the same ancestor folder is not
    # resolved again, and line numbers are counted only for the links reported.
    good: set[tuple[str, str]] = set()
    # A course sidebar repeats on every capsule page of the course: once its links
    # are found good from one folder, an identical sidebar in a sibling is skipped.
    navs_seen: set[tuple[str, str]] = set()
    for path in wanted:
        if path not in files or not path.endswith((".html", ".css")):
            continue
        text = files[path].decode("utf-8", errors="replace")
        reading[:] = [path, text]
        is_html = path.endswith(".html")
        pattern = _ATTR if is_html else _CSS_URL
        folder = posixpath.dirname(path)
        parts = folder.split("/")
        depth = len(parts) if folder else 0
        ancestors: dict[int, str | None] = {}  # by how many folders a link goes up
        lines: _Lines | None = None
        spans = [(0, len(text))]
        nav = sidebar_span(text) if is_html else None
        if nav is not None:
            start, end, key = nav
            nav_key = (posixpath.dirname(folder), key)
            spans = [(0, start), (end, len(text))]
            if nav_key not in navs_seen:
                spans.append((start, end))
                if all(h.startswith("../") for h in pattern.findall(text, start, end)):
                    navs_seen.add(nav_key)  # its links do not depend on the page's own folder
        for lo, hi in spans:
            for m in pattern.finditer(text, lo, hi):
                raw = m.group(1)
                if not raw or raw.startswith("data:"):
                    continue
                href = (html.unescape(raw) if "&" in raw else raw).strip()
                ups = 0
                while href.startswith("../", 3 * ups):
                    ups += 1
                rest = href[3 * ups:] if ups else href
                if ups not in ancestors:
                    ancestors[ups] = "/".join(parts[:depth - ups]) if ups <= depth else None
                key = (ancestors[ups], rest)
                if key[0] is not None and key in good:
                    continue
                problem = _link_problem(href, path, files, ids_of)
                if problem is None:
                    if key[0] is not None:
                        good.add(key)
                    continue
                lines = lines or _Lines(text)
                line, col = lines.at(m.start(1))
                code, message, hint = problem
                diags.error(Loc(f"{where}/{path}", line, col), code, message, hint)


def sidebar_span(text: str) -> tuple[int, int, str] | None:
    """Where a page's course sidebar starts and ends, and its text without the marks of
    the current page (the same for every capsule page of a course); None without one."""
    start = text.find(_SIDEBAR_OPEN)
    if start < 0:
        return None
    end = text.find("</nav>", start)
    if end < 0:
        return None
    end += len("</nav>")
    return start, end, _CURRENT_MARKS.sub("", text[start:end])


def _link_problem(href: str, path: str, files: dict[str, bytes],
                  ids_of: Callable[[str], set[str]]) -> tuple[str, str, str | None] | None:
    """What is wrong with one link of `path`, or None when it resolves."""
    if href.lower().startswith("file:") or href.startswith("/") and not href.startswith("//"):
        return "link.absolute", f"'{href}' is absolute; links must be relative", None
    if _SCHEME.match(href) or href.startswith("//"):
        return None
    target, _, frag = href.partition("#")
    target = target.split("?", 1)[0]
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target)) \
        if target else path
    if target.endswith("/") or (target and resolved + "/index.html" in files
                                and resolved not in files):
        resolved = resolved.rstrip("/") + "/index.html"
    if resolved.startswith("../") or resolved == "..":
        return "link.outside", f"'{href}' leaves the edition's folder", \
            "link only to files of the site"
    if resolved not in files:
        return "link.broken", f"'{href}' points at no file of the edition", \
            _nearest(resolved, files)
    if frag and resolved.endswith(".html") and frag not in ids_of(resolved):
        return "link.fragment", f"'{href}': no id '{frag}' on {resolved}", \
            _nearest_id(frag, ids_of(resolved))
    return None


def _nearest(path: str, files: dict[str, bytes]) -> str | None:
    from curriculum.errors import did_you_mean

    hint = did_you_mean(path, [p for p in files if p.endswith(posixpath.splitext(path)[1])])
    return hint


def _nearest_id(frag: str, ids: set[str]) -> str | None:
    from curriculum.errors import did_you_mean

    return did_you_mean(frag, ids)


def read_edition(folder: Path) -> dict[str, bytes]:
    """A built edition on disk as the path -> bytes map the checks read."""
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def check_site(folder: Path, edition: str, diags: Diagnostics, prefix: str) -> int:
    """The link check over one edition already on disk; returns the files checked.

    Besides `check_links`, any page naming the build folder by its path on this
    disk (a link that works only on the author's machine) is an error.
    """
    files = read_edition(folder)
    check_links(files, edition, diags, prefix=prefix)
    disk = folder.resolve().as_posix()
    for path, data in sorted(files.items()):
        if not path.endswith((".html", ".css", ".js", ".json", ".xml")):
            continue
        text = data.decode("utf-8", errors="replace")
        at = text.find(disk)
        if at >= 0:
            line, col = _Lines(text).at(at)
            diags.error(Loc(f"{prefix}/{path}", line, col), "link.build-folder",
                        f"names the build folder on this disk ({disk})",
                        "a page must not depend on where it was built")
    return len(files)


def check_orphans(catalog: Catalog, diags: Diagnostics) -> None:
    """Warn about ready capsules that no path, other capsule, question, experiment
    or drill leads to: a reader finds them only through the course page."""
    reached: set[str] = set()
    for cap in catalog.capsules.values():
        if cap.draft:
            continue  # a draft is not published, so its links lead nowhere yet
        targets: set[str] = set(cap.meta.prerequisites)
        for body in (cap.preview, cap.rest):
            targets |= _capsule_links(body)
        reached |= targets - {cap.id}  # a link to itself leads nowhere new
    for q in catalog.questions.values():
        reached.update(q.meta.concepts)
        reached |= _capsule_links(q.question) | _capsule_links(q.answer)
    for exp in catalog.experiments.values():
        reached |= _capsule_links(exp.preview) | _capsule_links(exp.rest)
    for p in catalog.paths.values():
        reached.update(step.capsule for step in p.meta.steps if step.capsule is not None)
    if catalog.ladder is not None:
        reached.update(d.lesson for m in catalog.ladder.modules for d in m.drills)
    for cid, cap in sorted(catalog.capsules.items()):
        if not cap.draft and cid not in reached:
            diags.warning(cap.loc, "capsule.orphan",
                          f"capsule '{cid}' is reached only from its course page: no path, "
                          "question, drill or other capsule leads to it",
                          "add it to a path, or link it from a capsule that comes before it")


def _capsule_links(body: Body | None) -> set[str]:
    if body is None:
        return set()
    return {href.split(":", 1)[1].split("#", 1)[0] for href, _ in body.refs.links
            if href.startswith("capsule:")}


def _hidden_text(page: str) -> str:
    """What of a page `visible_text` leaves out: everything outside <main>, and inside it
    attribute values and the contents of script, style and math elements (tag and
    attribute names come along; they are no reader's words)."""
    start = _MAIN_OPEN.search(page)
    end = page.find("</main>", start.end()) if start is not None else -1
    if start is None or end < 0:
        return page
    end += len("</main>")
    main = page[start.start():end]
    inner = [*_ATTR_VALUE.findall(main), *(body for _, body in _HIDDEN.findall(main))]
    return f"{page[:start.start()]} {' '.join(inner)} {page[end:]}"


def _words(text: str) -> list[bytes]:
    """The words of `text`, lower-cased: its runs of ASCII letters and digits (what
    `[a-z0-9]+` finds), split by the bytes methods, which are several times as fast."""
    return text.lower().encode("ascii", "replace").translate(_NOT_WORD).split()


def _run_hashes(words: list[bytes]) -> Any:
    """A hash of each run of eight words of `words`, in order (an int64 array): the
    words' hashes combined with a multiplier, in whole-array steps. A withheld text of a
    large course has millions of runs; an int64 is eight bytes of them. (Two different
    runs sharing a 64-bit hash would at worst flag a page for a look.)"""
    import numpy as np

    n = len(words) - SHINGLE + 1
    if n <= 0:
        return np.zeros(0, np.int64)
    w = np.fromiter(map(hash, words), dtype=np.int64, count=len(words))
    h = w[:n].copy()
    for k in range(1, SHINGLE):
        h *= _MIX  # wraps around, as intended
        h += w[k:k + n]
    return h


def shingle_hashes(text: str) -> Any:
    """The hashes of `text`'s runs of eight words (an int64 array; a run that recurs
    is there as often as it recurs)."""
    return _run_hashes(_words(text))


def check_leaks(files: dict[str, bytes], withheld: Iterable[str], allowed: Iterable[str],
                edition: str, diags: Diagnostics) -> None:
    """Every file of `files` against the runs of eight words withheld from the edition."""
    LeakCheck(withheld, allowed).scan(files, edition, diags)


class _Runs:
    """A set of run hashes as one sorted array: eight bytes a run, where a set of Python
    ints costs about sixty (a 10,000-capsule course withholds millions of runs).

    Beside it, a table of 2**24 flags, one for each value of a hash's low 24 bits: most
    runs of a page are withheld from nowhere, and one look-up in the table rules each of
    those out, where a binary search of the array would take twenty."""

    _BITS = 24

    def __init__(self, parts: Iterable[Any]) -> None:
        self.mask = (1 << self._BITS) - 1
        arrays = [part for part in parts if part.size]
        if not arrays:  # an edition that withholds nothing needs no numpy (0.1 s to import)
            self.sorted, self.size, self.table = (), 0, ()
            return
        import numpy as np

        runs = np.sort(np.concatenate(arrays))
        # Distinct values (sorting then comparing neighbours beats np.unique).
        self.sorted = runs[np.concatenate(([True], runs[1:] != runs[:-1]))]
        self.size = int(self.sorted.size)
        self.table = np.zeros(1 << self._BITS, dtype=bool)
        self.table[self.sorted & self.mask] = True

    def among(self, found: Any) -> Any:
        """The hashes of `found` that are in this set (each as often as it is in `found`)."""
        if not found.size or not self.size:
            return found[:0]
        import numpy as np

        maybe = found[self.table[found & self.mask]]
        if not maybe.size:
            return maybe
        at = np.minimum(np.searchsorted(self.sorted, maybe), self.size - 1)
        return maybe[self.sorted[at] == maybe]


class LeakCheck:
    """The withheld runs of one edition, worked out once; `scan` may be called for several
    sets of an edition's files (pages first, the search index when it is ready)."""

    def __init__(self, withheld: Iterable[str],
                 allowed: Iterable[str] | Callable[[], Iterable[str]]) -> None:
        self.secret = _Runs(shingle_hashes(text) for text in withheld)
        # Runs that the edition may show anyway (a sentence both in a preview and in the
        # withheld rest, a code block every capsule holds) are looked for in the texts it
        # may show only once some page holds a withheld run, and only as far as needed
        # (`leaks`); given as a function, the texts are gathered only then too.
        self.allowed = allowed
        self.unread: Iterator[str] | None = None  # the allowed texts not read yet
        self.shown: set[int] = set()  # the withheld runs found in those read
        # A course sidebar repeats on every capsule page; each distinct one is read once
        # (the per-page marks of the current capsule are ignored).
        self.seen_navs: dict[str, bool] = {}

    def leaks(self, found: Any) -> bool:
        """Whether any of `found` (withheld runs a file holds) is not shown anyway.

        The allowed texts are read in order until each run of `found` has turned up in
        one, and the next call goes on from there: most pages that hold a withheld run
        hold one that a text early in the list shows too. Only a run that is never shown
        makes this read every text (so after a leak, `shown` is complete)."""
        if not found.size:
            return False
        missing = {h for h in found.tolist() if h not in self.shown}
        if missing and self.unread is None:
            self.unread = iter(self.allowed() if callable(self.allowed) else self.allowed)
        while missing:
            text = next(self.unread, None)  # type: ignore[arg-type]
            if text is None:
                return True
            runs = self.secret.among(shingle_hashes(text)).tolist()
            self.shown.update(runs)
            missing.difference_update(runs)
        return False

    def scan(self, files: Mapping[str, bytes], edition: str, diags: Diagnostics) -> None:
        secret = self.secret
        if not secret.size:
            return
        for path in sorted(files):  # one file at a time: they may be read from disk
            if path.endswith((".png", ".woff2", ".ico", ".epub")):
                continue
            data = files[path]
            packed = data[:2] == b"\x1f\x8b"  # the search index: gzip'd records of page text
            if packed:
                with contextlib.suppress(OSError, EOFError):  # not gzip after all: read as it is
                    data = gzip.decompress(data).removeprefix(_PAGEFIND_SIGNATURE)
            text = data.decode("utf-8", errors="replace")
            leaked = False
            if packed:
                plain, raw = text, ""
            elif path.endswith(".html"):
                nav = sidebar_span(text)
                if nav is not None:
                    start, end, key = nav
                    if key not in self.seen_navs:
                        self.seen_navs[key] = self.leaks(
                            secret.among(shingle_hashes(html.unescape(_TAG.sub(" ", key)))))
                    leaked = self.seen_navs[key]
                    text = f"{text[:start]} {text[end:]}"
                plain = visible_text(text, fold_spaces=False)
                raw = _hidden_text(text)
            else:
                plain = html.unescape(text)
                raw = text
            if leaked or self.leaks(secret.among(shingle_hashes(plain))) or \
                    self.leaks(secret.among(shingle_hashes(raw))):
                run = self.first_run(plain) or self.first_run(raw)
                where = f": \"{run}\"" if run else " (in its sidebar)"
                diags.error(Loc(f"build/{edition}/{path}", 1, 1), "leak.withheld-text",
                            f"holds text withheld from this edition{where}; reword one of the "
                            "two places, or move the sentence above the page's <!-- more -->")

    def first_run(self, text: str) -> str | None:
        """One run of eight words of `text` (the first in sorted order) that is withheld and
        not shown anyway, for the message: the author needs the words to find both places."""
        import numpy as np

        words = _words(text)
        hashes = _run_hashes(words)
        if not hashes.size:
            return None
        withheld = self.secret.among(hashes)
        if self.shown:
            withheld = withheld[~np.isin(withheld, np.fromiter(self.shown, np.int64,
                                                               len(self.shown)))]
        at = np.flatnonzero(np.isin(hashes, withheld))
        runs = sorted(b" ".join(words[i:i + SHINGLE]).decode("ascii") for i in at.tolist())
        return runs[0] if runs else None
