"""Each course as an EPUB 3 book, per edition, from the chapters the edition rendered.

The book holds what the edition's pages hold and nothing more: a capsule above the
edition's tier keeps its preview and a note, because its chapter was rendered from the
filtered catalog. Chapters are the capsules' HTML fragments (MathML, highlighted code,
SVG charts) turned into XHTML; links to other capsules of the course stay inside the
book, every other link points at the site. The zip is deterministic: fixed entry order,
timestamps from the build date (SOURCE_DATE_EPOCH).
"""

from __future__ import annotations

import posixpath
import re
import uuid
import zipfile
from collections.abc import Callable
from html import escape, unescape
from html.parser import HTMLParser
from io import BytesIO
from xml.parsers import expat

from curriculum.catalog import Catalog
from curriculum.charts import valid_svg
from curriculum.output import Chapter, Output, epub_path

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
         "track", "wbr"}
# MathML and SVG element names keep their case in XHTML; HTMLParser lower-cases them.
_CASED = {name.lower(): name for name in (
    "linearGradient", "radialGradient", "clipPath", "textPath", "foreignObject", "viewBox",
    "preserveAspectRatio", "definitionURL")}
_MEDIA = {".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg",
          ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}

_DOCTYPE = re.compile(rb"<!DOCTYPE[^>]*>\s*")
# What the fast path rewrites: link attributes, and void elements written without their slash.
# A link attribute's value is found from its `="`, a literal the engine skips ahead to,
# and the name behind it is looked at after (`\s(?:href|src)="` first would try a match
# at every space of the prose); on a whole fragment both find the same values.
_LINK = re.compile(r'=(?:(?<=\shref=)|(?<=\ssrc=))"([^"]*)"')
_OPEN_VOID = re.compile(r"<({})((?:\s[^<>]*)?)(?<!/)>".format("|".join(sorted(_VOID))))

CSS = """body { font-family: serif; line-height: 1.5; }
h1, h2, h3 { font-family: sans-serif; line-height: 1.2; }
pre { white-space: pre-wrap; font-size: 0.85em; }
code { font-family: monospace; }
table { border-collapse: collapse; }
th, td { border: 1px solid #999; padding: 0.2em 0.4em; }
figure img { max-width: 100%; }
.header-anchor { display: none; }
.fig-prov { display: block; font-size: 0.75em; color: #555; }
.summary { font-style: italic; }
.locked, .admonition { border-left: 3px solid #777; padding-left: 0.8em; }
"""


class _Xhtml(HTMLParser):
    """Re-serialises an HTML fragment as well-formed XHTML, rewriting its links."""

    def __init__(self, rewrite: dict[str, object]) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.open: list[str] = []
        self.rewrite = rewrite

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, void=tag in _VOID)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, void=True)

    def _start(self, tag: str, attrs: list[tuple[str, str | None]], void: bool) -> None:
        fix = self.rewrite["link"]
        out = []
        for name, value in attrs:
            value = name if value is None else value
            if name in ("href", "src") and callable(fix):
                value = fix(value)
            out.append(f' {_CASED.get(name, name)}="{escape(value, quote=True)}"')
        name = _CASED.get(tag, tag)
        self.parts.append(f"<{name}{''.join(out)}{' /' if void else ''}>")
        if not void:
            self.open.append(name)

    def handle_endtag(self, tag: str) -> None:
        name = _CASED.get(tag, tag)
        if name in self.open:
            while self.open:
                top = self.open.pop()
                self.parts.append(f"</{top}>")
                if top == name:
                    break

    def handle_data(self, data: str) -> None:
        self.parts.append(escape(data, quote=False))

    def result(self) -> str:
        self.close()
        while self.open:
            self.parts.append(f"</{self.open.pop()}>")
        return "".join(self.parts)


def _xhtml_fast(fragment: str, fix: Callable[[str], str]) -> str | None:
    """The fragment as XHTML without parsing it as HTML, or None when that is unsafe.

    The renderer already writes nearly well-formed markup: closed elements, quoted
    attributes and the XML escapes. Only void elements lack their slash and links their
    book targets. The result is accepted only if an XML parser reads it whole (no bare
    attributes, no HTML-only entities); otherwise `_Xhtml` re-serialises the fragment.
    """
    if "<!" in fragment or "<?" in fragment:
        return None
    body = _LINK.sub(lambda m: f'="{escape(fix(unescape(m.group(1))), quote=True)}"', fragment)
    body = _OPEN_VOID.sub(r"<\1\2 />", body)
    checker = expat.ParserCreate()
    try:
        checker.Parse(f"<div>{body}</div>", True)
    except expat.ExpatError:
        return None
    return body


def _page(title: str, language: str, body: str) -> str:
    return ('<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n'
            f'<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" '
            f'lang="{language}" xml:lang="{language}">\n<head>\n<meta charset="utf-8" />\n'
            f'<title>{escape(title)}</title>\n<link rel="stylesheet" href="style.css" />\n'
            f"</head>\n<body>\n{body}\n</body>\n</html>\n")


def _chapter_file(chapter: Chapter) -> str:
    return f"c-{chapter.capsule}.xhtml"


class _Book:
    def __init__(self, out: Output, catalog: Catalog, course_id: str, edition: str) -> None:
        self.out = out
        self.cat = catalog
        self.course = catalog.courses[course_id]
        self.edition = edition
        order = {cap.id: cap.number for cap in catalog.capsules_of(course_id)}
        self.chapters = sorted((c for c in out.chapters if c.course == course_id),
                               key=lambda c: order[c.capsule])
        self.by_path = {c.path: _chapter_file(c) for c in self.chapters}
        self.media: dict[str, bytes] = {}
        self.links: dict[tuple[str, str], str] = {}

    def link(self, page: str, href: str) -> str:
        """A link from a chapter: inside the book where it can, else to the site."""
        if not href or href.startswith("#") or ":" in href.split("/")[0]:
            return href
        # Each chapter's page has a folder of its own, and its siblings link to the same
        # places: a link that leaves the folder ("../x" from a/b/) resolves as "x" from a/,
        # so it is worked out once for all the siblings.
        key = (posixpath.dirname(posixpath.dirname(page)), href[3:]) \
            if href.startswith("../") and page.count("/") >= 2 else (page, href)
        found = self.links.get(key)
        if found is None:
            found = self.links[key] = self._resolve(page, href)
        return found

    def _resolve(self, page: str, href: str) -> str:
        target, _, frag = href.partition("#")
        site_path = posixpath.normpath(posixpath.join(posixpath.dirname(page), target))
        if site_path.endswith("/") or not posixpath.splitext(site_path)[1]:
            site_path = site_path.rstrip("/") + "/index.html"
        suffix = f"#{frag}" if frag else ""
        if site_path in self.by_path:
            return self.by_path[site_path] + suffix
        ext = posixpath.splitext(site_path)[1].lower()
        if ext in _MEDIA and site_path in self.out.files:
            name = "media/" + site_path.replace("/", "-")
            data = self.out.files[site_path]
            if ext == ".svg":  # EPUB 3 forbids the external DTD that SVG writers declare.
                data = _DOCTYPE.sub(b"", data, count=1)
                data = valid_svg(data.decode("utf-8")).encode("utf-8")
            self.media[name] = data
            return name
        return self.cat.site.base_url + site_path.removesuffix("index.html") + suffix

    def chapter(self, c: Chapter) -> str:
        def fix(href: str) -> str:
            return self.link(c.path, href)

        body = _xhtml_fast(c.html, fix)
        if body is None:
            parser = _Xhtml({"link": fix})
            parser.feed(c.html)
            body = parser.result()
        if c.locked:
            cap = self.cat.capsules[c.capsule]
            body += (f'\n<p class="locked"><strong>The rest of this chapter is for '
                     f"{escape(self.cat.tier_label(cap.access))}.</strong> "
                     f"{escape(self.cat.site.upgrade_text)}</p>")
        head = (f'<section epub:type="chapter" aria-labelledby="title">\n<p>{escape(c.part)}</p>\n'
                f'<h1 id="title">{escape(c.title)}</h1>\n<p class="summary">{escape(c.summary)}</p>\n')
        return _page(c.title, self.cat.site.language, head + body + "\n</section>")

    def title_page(self) -> str:
        meta = self.course.meta
        body = (f'<section epub:type="titlepage">\n<h1>{escape(meta.title)}</h1>\n'
                f"<p>{escape(meta.subtitle)}</p>\n<p>{escape(meta.description)}</p>\n"
                f"<p>By {escape(', '.join(meta.authors))}. {escape(self.cat.site.title)}, "
                f"{escape(self.edition)} edition. Measured figures carry their provenance "
                f"beside them.</p>\n</section>")
        return _page(meta.title, self.cat.site.language, body)

    def nav(self) -> str:
        items = ['<li><a href="title.xhtml">About this book</a></li>']
        for part in self.course.meta.parts:
            inner = [f'<li><a href="{_chapter_file(c)}">{escape(c.title)}</a></li>'
                     for c in self.chapters if c.part == part.title]
            if inner:
                first = next(c for c in self.chapters if c.part == part.title)
                items.append(f'<li><a href="{_chapter_file(first)}">{escape(part.title)}</a>'
                             f"<ol>{''.join(inner)}</ol></li>")
        body = (f'<nav epub:type="toc" id="toc"><h1>Contents</h1><ol>{"".join(items)}</ol></nav>')
        return _page("Contents", self.cat.site.language, body)

    def package(self, files: dict[str, str], modified: str) -> str:
        meta = self.course.meta
        book_id = uuid.uuid5(uuid.NAMESPACE_URL,
                             f"{self.cat.site.base_url}{epub_path(meta.id, self.edition)}")
        creators = "".join(f"<dc:creator>{escape(a)}</dc:creator>" for a in meta.authors)
        manifest = ['<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" '
                    'properties="nav"/>',
                    '<item id="css" href="style.css" media-type="text/css"/>',
                    '<item id="title" href="title.xhtml" media-type="application/xhtml+xml"/>']
        spine = ['<itemref idref="title"/>', '<itemref idref="nav"/>']
        for i, c in enumerate(self.chapters, start=1):
            props = ' properties="mathml"' if "<math" in files[_chapter_file(c)] else ""
            manifest.append(f'<item id="c{i}" href="{_chapter_file(c)}" '
                            f'media-type="application/xhtml+xml"{props}/>')
            spine.append(f'<itemref idref="c{i}"/>')
        for i, name in enumerate(sorted(self.media), start=1):
            mime = _MEDIA[posixpath.splitext(name)[1].lower()]
            manifest.append(f'<item id="m{i}" href="{name}" media-type="{mime}"/>')
        return ('<?xml version="1.0" encoding="utf-8"?>\n'
                '<package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
                f'unique-identifier="book-id" xml:lang="{self.cat.site.language}">\n'
                '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">\n'
                f'<dc:identifier id="book-id">urn:uuid:{book_id}</dc:identifier>\n'
                f"<dc:title>{escape(meta.title)}</dc:title>\n"
                f"<dc:language>{self.cat.site.language}</dc:language>\n{creators}\n"
                f"<dc:publisher>{escape(self.cat.site.title)}</dc:publisher>\n"
                f"<dc:description>{escape(meta.description)}</dc:description>\n"
                f'<meta property="dcterms:modified">{modified}</meta>\n</metadata>\n'
                f"<manifest>\n{chr(10).join(manifest)}\n</manifest>\n"
                f"<spine>\n{chr(10).join(spine)}\n</spine>\n</package>\n")

    def build(self, build_date: str) -> bytes:
        files = {_chapter_file(c): self.chapter(c) for c in self.chapters}
        files["title.xhtml"] = self.title_page()
        files["nav.xhtml"] = self.nav()
        files["style.css"] = CSS + self.code_css()
        opf = self.package(files, f"{build_date}T00:00:00Z")
        container = ('<?xml version="1.0" encoding="utf-8"?>\n'
                     '<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
                     '<rootfiles><rootfile full-path="OEBPS/package.opf" '
                     'media-type="application/oebps-package+xml"/></rootfiles></container>\n')
        entries: list[tuple[str, bytes]] = [("META-INF/container.xml", container.encode()),
                                            ("OEBPS/package.opf", opf.encode())]
        entries += [(f"OEBPS/{n}", files[n].encode()) for n in sorted(files)]
        entries += [(f"OEBPS/{n}", self.media[n]) for n in sorted(self.media)]
        return _zip(entries, build_date)

    @staticmethod
    def code_css() -> str:
        from pygments.formatters import HtmlFormatter

        return str(HtmlFormatter(style="default").get_style_defs(".highlight"))


def _zip(entries: list[tuple[str, bytes]], build_date: str) -> bytes:
    year, month, day = (int(x) for x in build_date.split("-"))
    stamp = (max(year, 1980), month, day, 0, 0, 0)
    buf = BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        # The mimetype entry comes first, stored uncompressed, as EPUB requires.
        for name, data, method in [("mimetype", b"application/epub+zip", zipfile.ZIP_STORED),
                                   *((n, d, zipfile.ZIP_DEFLATED) for n, d in entries)]:
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = method
            info.create_system = 3
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
    return buf.getvalue()


def add_epubs(out: Output, catalog: Catalog, build_date: str) -> None:
    """One EPUB per course of the edition, at `epub_path`."""
    for course_id in catalog.site.courses:
        book = _Book(out, catalog, course_id, out.edition)
        out.add(epub_path(course_id, out.edition), book.build(build_date))

