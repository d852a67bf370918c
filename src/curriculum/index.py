"""Stage 6, `index`: what machines and e-readers read — the Pagefind search index,
sitemap, Atom feed and each course's EPUB.

Built from the pages and chapters the edition rendered, so each holds only what
that edition shows: titles, summaries and the visible text of each page.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import html
import json
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape as xml_escape

from curriculum.catalog import Catalog
from curriculum.epub import add_epubs
from curriculum.errors import UsageError
from curriculum.output import KIND_LABELS, Output, StagedFiles, page_url
from curriculum.write import memory_folder

PAGEFIND_DIR = "static/pagefind/"
# The runtime files the search page loads; Pagefind's bundled UI widgets are not used.
_PAGEFIND_KEEP = re.compile(
    r"^(pagefind\.js|pagefind-worker\.js|pagefind-entry\.json|wasm\.[a-z-]+\.pagefind"
    r"|pagefind\.[^/]+\.pf_meta|fragment/[^/]+|index/[^/]+|filter/[^/]+)$")

_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")
_MAIN = re.compile(r"<main[^>]*>(.*?)</main>", re.S)


def visible_text(page_html: str, fold_spaces: bool = True) -> str:
    """The text of a page's <main>, tags removed and entities decoded; runs of white
    space folded into one space unless `fold_spaces` is false (the leak check splits it
    into words, and folding took it a fifth of its time)."""
    start = page_html.find("<main")
    inner = page_html.find(">", start) + 1 if start >= 0 else 0
    end = page_html.find("</main>", inner) if inner else -1
    if end >= 0:  # what `_MAIN` finds, without its character-by-character scan
        body = page_html[inner:end]
    else:
        m = _MAIN.search(page_html)
        body = m.group(1) if m else page_html
    body = re.sub(r"<(script|style|math)[^>]*>.*?</\1>", " ", body, flags=re.S)
    text = html.unescape(_TAG.sub(" ", body))
    return _SPACE.sub(" ", text).strip() if fold_spaces else text


# Left out of the index, so excerpts come from prose: navigation and labels, code blocks
# and tool output, charts and figure markup, math, heading anchors, and the notes a figure,
# estimate or spec constant shows on hover (its value stays).
_EXCLUDE = [".pager", ".breadcrumbs", ".eyebrow", ".badge", ".meta",
            ".code", "pre", ".artifact", "figure", "svg", "math", ".header-anchor",
            ".fig-prov", ".est-why", ".est-mark", ".spec-why", ".source"]

TITLES_FILE = "static/search-titles.json"


def search_titles(out: Output) -> str:
    """Every indexed page's title, kind and address, for the search page's suggestions when a
    query finds nothing (the titles are on every listing page already)."""
    rows = [{"title": p["title"], "url": p["path"],
             "kind": KIND_LABELS.get(p["kind"], str(p["kind"]).capitalize())}
            for p in sorted(out.pages, key=lambda p: p["path"])]
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":")) + "\n"


class _Pagefind:
    """Pagefind's bundle for some pages, from one run of its command line, started at once
    and collected by `result()`, so that the edition's other work runs meanwhile.

    The pages go to a scratch folder, not the site, one at a time as they are read; the
    bundle is written there and read back. (Pagefind's Python service costs about twice
    the command's time: it reads each reply after a pause, and sends bundles through one
    pipe message.)
    """

    def __init__(self, pages: Iterable[tuple[str, str]], language: str) -> None:
        try:
            from pagefind.service import _must_get_executable
        except ImportError as exc:
            raise UsageError("the search index needs Pagefind: pip install 'pagefind[extended]'") from exc
        try:
            binary = str(_must_get_executable())
        except Exception as exc:  # noqa: BLE001 - the wrapper raises its own kinds
            raise UsageError(f"Pagefind is installed but its program was not found: {exc}") from exc
        self.scratch = tempfile.TemporaryDirectory(prefix="curriculum-search-",
                                                   dir=memory_folder())
        site = Path(self.scratch.name, "site")
        for path, page_html in pages:
            target = site / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(page_html, encoding="utf-8")
        self.bundle = Path(self.scratch.name, "_pagefind")
        command = [binary, "--site", str(site), "--output-path", str(self.bundle),
                   "--root-selector", "main", "--keep-index-url", "--silent",
                   "--force-language", language.split("-")[0].lower(),
                   "--exclude-selectors", ", ".join(_EXCLUDE)]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)

    def result(self, cancelled: Callable[[], bool] | None = None) -> dict[str, bytes]:
        try:
            while cancelled is not None and self.process.poll() is None:
                if cancelled():
                    self.cancel()
                    raise Cancelled
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=0.05)
            stdout, stderr = self.process.communicate()
            if self.process.returncode != 0:
                raise UsageError(f"Pagefind failed (exit {self.process.returncode}): "
                                 f"{(stderr or stdout).strip()[-2000:]}")
            return {p.relative_to(self.bundle).as_posix(): p.read_bytes()
                    for p in sorted(self.bundle.rglob("*")) if p.is_file()}
        finally:
            self.scratch.cleanup()

    def cancel(self) -> None:
        """Stop the run and remove its scratch folder (the pages changed meanwhile)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate()
        self.scratch.cleanup()


class Cancelled(Exception):
    """The indexes being made were asked for no longer (a newer edit is on its way)."""


# Pagefind holds every page it indexes in memory (about 350 KB a page of prose), so an
# edition of more pages is indexed in bundles of at most this many, one bundle at a time
# (and, where editions are built side by side, one edition's bundles at a time:
# `PAGEFIND_LOCK`). The first bundle is static/pagefind/; its entry file names the others,
# static/pagefind-2/ and on, which the search page merges into it.
PAGEFIND_CHUNK = 1200
PAGEFIND_LOCK: Any = None  # a lock shared by forked edition workers, set by the build


def _searchable(page_html: str) -> str:
    """The part of a page Pagefind reads: its title and <main>. Sending only that
    keeps each message to the Pagefind service small (a course sidebar lists
    every capsule, and a thousand full pages through its pipe stalled it)."""
    # The first <title>...</title> and <main ...>...</main>, found with `str.find` (a lazy
    # `.*?` pattern steps through a page character by character).
    start = page_html.find("<main")
    while start >= 0 and page_html[start + 5:start + 6] not in (" ", ">"):
        start = page_html.find("<main", start + 5)
    end = page_html.find("</main>", start) if start >= 0 else -1
    if end < 0:
        return page_html
    main = _without_excluded(page_html[start:end + len("</main>")])
    open_at = page_html.find("<title>")
    close_at = page_html.find("</title>", open_at) if open_at >= 0 else -1
    head = page_html[open_at:close_at + len("</title>")] if close_at >= 0 else ""
    return f"<!doctype html><html><head>{head}</head><body>{main}</body></html>"


# Elements of `_EXCLUDE` that `_searchable` leaves out itself: code blocks, math and
# inline SVG are most of a page's markup, and Pagefind still parses what it then ignores.
# Pagefind joins the text on either side of an ignored element without a space, as
# removing it does, so the bundle is byte-identical (a test checks it). It does keep an
# ignored element's own id as an anchor, so an element with an id anywhere in it stays.
_DROPPED = ("pre", "math", "svg")
_DROPPED_OPEN = re.compile(r"<({})[\s>]".format("|".join(_DROPPED)))
_OPENS = {tag: re.compile(rf"<{tag}[\s>]") for tag in _DROPPED}


def _without_excluded(main: str) -> str:
    """`main` without its `_DROPPED` elements that hold no id; unchanged if one holds
    another of its own kind (the renderer writes none such)."""
    found = _DROPPED_OPEN.search(main)
    if found is None:
        return main
    kept: list[str] = []
    at = 0
    while found is not None:
        tag = found.group(1)
        close = main.find(f"</{tag}>", found.end())
        if close < 0 or _OPENS[tag].search(main, found.end(), close) is not None:
            return main
        end = close + len(tag) + 3
        if main.find(" id=", found.start(), end) < 0:
            kept.append(main[at:found.start()])
            at = end
        found = _DROPPED_OPEN.search(main, end)
    kept.append(main[at:])
    return "".join(kept)


@dataclass(frozen=True)
class SharedBundle:
    """The pages that every edition built together shows alike (the same title and <main>),
    indexed once instead of once per edition: one edition `make`s their bundle and
    `publish`es it, the others `receive` it. Each edition's own bundle names it in its
    entry file, and the search page searches both (`search.js` says how)."""

    paths: frozenset[str]
    make: bool
    # The bundle's files, and the folder where the maker wrote them (None: not written
    # to disk), which the others link them from.
    publish: Callable[[dict[str, bytes], Path | None], None]
    receive: Callable[[], tuple[dict[str, bytes], Path | None]]


SHARED_DIR = "static/pagefind-common/"


def search_digests(out: Output) -> dict[str, bytes]:
    """A digest of what Pagefind reads of each of the edition's indexed pages, for finding
    the pages editions show alike. (`start_search_index` makes that text again for the
    pages it indexes, about 0.06 s an edition at 1,000 capsules, rather than hold every
    page's text until then: some 110 MB an edition at 10,000.)"""
    return {path: hashlib.blake2b(_searchable(out.files[path].decode("utf-8")).encode("utf-8"),
                                  digest_size=16).digest()
            for path in sorted(p["path"] for p in out.pages)}


def start_search_index(out: Output, catalog: Catalog,
                       cancelled: Callable[[], bool] | None = None,
                       shared: SharedBundle | None = None
                       ) -> Callable[[], dict[str, bytes]]:
    """Start indexing the edition's pages; the function returned waits for the bundles,
    puts their files in `out` and returns them.

    Only pages listed for indexing are added, and each only through its <main>, so the
    index holds exactly the text the edition shows. Pagefind works in its own process, so
    the caller can go on with other work before asking for the result. The pages of
    `shared` go to its bundle instead (made here or received), the rest to the edition's
    own. More than `PAGEFIND_CHUNK` pages are indexed in several bundles, one after
    another, when the result is asked for.
    """
    common = shared.paths if shared is not None else frozenset()
    making = shared is not None and shared.make
    own = _chunks(sorted(p["path"] for p in out.pages if p["path"] not in common), PAGEFIND_DIR)
    theirs = _chunks(sorted(common), SHARED_DIR)
    extra = [f"../{folder.removeprefix('static/')}" for folder, _ in own[1:] + theirs]
    runs = (theirs if making else []) + own  # the shared bundle first: others wait for it
    staged = out.files.folder if isinstance(out.files, StagedFiles) else None
    language = catalog.site.language

    def run(chunk: list[str]) -> _Pagefind:
        return _Pagefind(((p, _searchable(out.files[p].decode("utf-8"))) for p in chunk),
                         language)

    # One bundle of each kind at most: all start now, side by side. More (a large
    # edition): one run at a time, and one edition's at a time (`PAGEFIND_LOCK`).
    at_once = len(own) == 1 and len(theirs) <= 1
    started = [run(chunk) for _, chunk in runs] if at_once else []

    def result() -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        made: dict[str, bytes] = {}
        lock = contextlib.nullcontext() if at_once else PAGEFIND_LOCK or contextlib.nullcontext()
        with lock:
            for i, (folder, chunk) in enumerate(runs):
                bundle = _bundle((started[i] if at_once else run(chunk)).result(cancelled),
                                 folder, extra if folder == PAGEFIND_DIR else [])
                if making and i < len(theirs):
                    made.update(bundle)
                    if i == len(theirs) - 1:  # written first, so that the others link it
                        for path, data in made.items():
                            out.add(path, data)
                        shared.publish(made, staged)  # type: ignore[union-attr]
                else:
                    files.update(bundle)
        for path, data in files.items():
            out.add(path, data)
        if shared is not None and not making:
            made, folder = shared.receive()
            for path, data in made.items():
                if folder is None or not isinstance(out.files, StagedFiles) \
                        or not out.files.link(path, folder / path):
                    out.add(path, data)
        return {**files, **made}

    def cancel() -> None:
        for one in started:
            one.cancel()

    result.cancel = cancel  # type: ignore[attr-defined]
    return result


def _chunks(paths: list[str], first: str) -> list[tuple[str, list[str]]]:
    """`paths` in bundles of at most `PAGEFIND_CHUNK`, each with its folder: `first`, then
    the same name with -2, -3, ... (none for no paths, unless `first` is the edition's own
    bundle, which the search page always loads)."""
    chunks = [paths[i:i + PAGEFIND_CHUNK] for i in range(0, len(paths), PAGEFIND_CHUNK)]
    if not chunks and first == PAGEFIND_DIR:
        chunks = [[]]
    base = first.removesuffix("/")
    return [(first if i == 0 else f"{base}-{i + 1}/", chunk) for i, chunk in enumerate(chunks)]


def _bundle(files: dict[str, bytes], folder: str, extra: list[str]) -> dict[str, bytes]:
    """One Pagefind run's files, kept, made deterministic and put under `folder`; `extra`
    names the other bundles (relative to this one) in its entry file."""
    kept = {path: data for path, data in files.items() if _PAGEFIND_KEEP.match(path)}
    made = canonical_pagefind(kept)
    if extra:
        entry = json.loads(made["pagefind-entry.json"])
        entry["curriculum_bundles"] = extra
        made["pagefind-entry.json"] = json.dumps(entry, ensure_ascii=False,
                                                 separators=(",", ":")).encode("utf-8")
    return {folder + path: data for path, data in sorted(made.items())}


# -- making Pagefind's output deterministic ---------------------------------------------
# Pagefind writes each filter's values, and the list of filters, in hash-map order, which
# changes from run to run; file names are hashes of contents, so they change too. The files
# are gzip'd CBOR behind a signature: decode them, sort those lists, and name the files by
# hashes of the sorted contents, so two builds of the same pages are byte-identical.

_SIGNATURE = b"pagefind_dcd"


def _cbor_decode(data: bytes, i: int = 0) -> tuple[Any, int]:
    major, info = data[i] >> 5, data[i] & 0x1F
    i += 1
    if info < 24:
        n = info
    else:
        size = {24: 1, 25: 2, 26: 4, 27: 8}[info]
        n = int.from_bytes(data[i:i + size], "big")
        i += size
    if major == 0:
        return n, i
    if major == 2:
        return data[i:i + n], i + n
    if major == 3:
        return data[i:i + n].decode("utf-8"), i + n
    if major == 4:
        items = []
        for _ in range(n):
            item, i = _cbor_decode(data, i)
            items.append(item)
        return items, i
    raise ValueError(f"unexpected CBOR major type {major} in a Pagefind file")


def _cbor_head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for info, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * size):
            return bytes([major << 5 | info]) + n.to_bytes(size, "big")
    raise ValueError("integer too large for CBOR")


def _cbor_encode(x: Any) -> bytes:
    if isinstance(x, int):
        return _cbor_head(0, x)
    if isinstance(x, bytes):
        return _cbor_head(2, len(x)) + x
    if isinstance(x, str):
        raw = x.encode("utf-8")
        return _cbor_head(3, len(raw)) + raw
    return _cbor_head(4, len(x)) + b"".join(_cbor_encode(item) for item in x)


def _unpack(data: bytes) -> Any:
    raw = gzip.decompress(data)
    assert raw.startswith(_SIGNATURE), "not a Pagefind index file"
    value, end = _cbor_decode(raw, len(_SIGNATURE))
    assert end == len(raw) and _cbor_encode(value) == raw[len(_SIGNATURE):], \
        "Pagefind index file does not round-trip"
    return value


def _pack(value: Any) -> bytes:
    return gzip.compress(_SIGNATURE + _cbor_encode(value), mtime=0)


def _digest(value: Any, length: int) -> str:
    return hashlib.sha256(_cbor_encode(value)).hexdigest()[:length]


def canonical_pagefind(files: dict[str, bytes]) -> dict[str, bytes]:
    """Pagefind's bundle with filter values, filters and file names in a fixed order."""
    entry = json.loads(files["pagefind-entry.json"])
    out = {k: v for k, v in files.items()
           if not k.startswith("filter/") and not k.endswith(".pf_meta")}
    for lang, info in sorted(entry["languages"].items()):
        meta = _unpack(files[f"pagefind.{info['hash']}.pf_meta"])
        # meta: [version, pages, index chunks, filters [name, file], sorts, meta fields]
        filters = []
        for name, old in meta[3]:
            values = _unpack(files[f"filter/{old}.pf_filter"])
            values[1] = sorted(values[1], key=lambda v: v[0])
            new = f"{lang}_{_digest(values, 7)}"
            out[f"filter/{new}.pf_filter"] = _pack(values)
            filters.append([name, new])
        meta[3] = sorted(filters)
        info["hash"] = f"{lang}_{_digest(meta, 10)}"
        out[f"pagefind.{info['hash']}.pf_meta"] = _pack(meta)
    out["pagefind-entry.json"] = json.dumps(entry, ensure_ascii=False,
                                            separators=(",", ":")).encode("utf-8")
    return out


def add_indexes(out: Output, catalog: Catalog, build_date: str,
                meanwhile: Callable[[], None] | None = None,
                cancelled: Callable[[], bool] | None = None,
                shared: SharedBundle | None = None) -> dict[str, bytes]:
    """The search index, EPUBs, sitemap and feed; returns the search index's files
    (with `shared`'s bundle, see `start_search_index`).

    Pagefind indexes in its own process while the rest is made and, if given, while
    `meanwhile` runs (the files are all in `out` by then, but for the search index).
    `cancelled`, if given, is asked between steps and while Pagefind runs; when it says
    yes, Pagefind is stopped and `Cancelled` raised.
    """
    def check() -> None:
        if cancelled is not None and cancelled():
            raise Cancelled

    search = start_search_index(out, catalog, cancelled, shared)
    try:
        out.add(TITLES_FILE, search_titles(out))
        base = catalog.site.base_url
        check()
        add_epubs(out, catalog, build_date)
        check()
    except BaseException:
        with contextlib.suppress(Exception):
            search.cancel()  # type: ignore[attr-defined]
        raise

    urls = sorted(p["path"] for p in out.pages)
    sitemap = ['<?xml version="1.0" encoding="UTF-8"?>',
               '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">']
    for path in urls:
        loc = base + path.removesuffix("index.html")
        sitemap.append(f"  <url><loc>{xml_escape(loc)}</loc><lastmod>{build_date}</lastmod></url>")
    sitemap.append("</urlset>")
    out.add("sitemap.xml", "\n".join(sitemap) + "\n")

    entries = []
    for cap in sorted(catalog.capsules.values(), key=lambda c: (c.course, c.number)):
        if cap.draft:
            continue
        link = base + page_url("capsule", cap.id, catalog).removesuffix("index.html")
        entries.append(
            "  <entry>\n"
            f"    <title>{xml_escape(cap.meta.title)}</title>\n"
            f'    <link href="{xml_escape(link)}"/>\n'
            f"    <id>{xml_escape(link)}</id>\n"
            f"    <updated>{build_date}T00:00:00Z</updated>\n"
            f"    <summary>{xml_escape(cap.meta.summary)}</summary>\n"
            "  </entry>"
        )
    feed = (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<feed xmlns="http://www.w3.org/2005/Atom">\n'
        f"  <title>{xml_escape(catalog.site.title)}</title>\n"
        f'  <link href="{xml_escape(base)}"/>\n'
        f"  <id>{xml_escape(base)}</id>\n"
        f"  <updated>{build_date}T00:00:00Z</updated>\n"
        + "\n".join(entries) + "\n</feed>\n"
    )
    out.add("feed.xml", feed)
    if meanwhile is not None:
        meanwhile()
    return search()
