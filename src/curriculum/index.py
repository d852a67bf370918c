"""Stage 6, `index`: what machines read — search index, sitemap, Atom feed.

Built from the pages the edition rendered, so each holds only what that
edition shows: titles, summaries and the visible text of each page.
"""

from __future__ import annotations

import html
import json
import re
from xml.sax.saxutils import escape as xml_escape

from curriculum.catalog import Catalog
from curriculum.render import Output, page_url

_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")
_MAIN = re.compile(r"<main[^>]*>(.*?)</main>", re.S)


def visible_text(page_html: str) -> str:
    """The text of a page's <main>, tags removed and entities decoded."""
    m = _MAIN.search(page_html)
    body = m.group(1) if m else page_html
    body = re.sub(r"<(script|style|math)[^>]*>.*?</\1>", " ", body, flags=re.S)
    return _SPACE.sub(" ", html.unescape(_TAG.sub(" ", body))).strip()


def add_indexes(out: Output, catalog: Catalog, build_date: str) -> None:
    base = catalog.site.base_url
    records = []
    for page in sorted(out.pages, key=lambda p: p["path"]):
        text = visible_text(out.files[page["path"]].decode("utf-8"))
        records.append({"url": page["path"], "title": page["title"], "kind": page["kind"],
                        "access": page.get("access", "free"), "course": page.get("course"),
                        "summary": page["summary"], "text": text})
    out.add("search-index.json", json.dumps(records, ensure_ascii=False, sort_keys=True,
                                            separators=(",", ":")) + "\n")

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
