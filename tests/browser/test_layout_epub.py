"""The course's real EPUBs, one per edition, built from this repository's content: each passes
epubcheck, and every SVG chart inside is well-formed XML with no path lacking its `d`."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

EDITIONS = ("public", "account", "member")


def books(shipped_build: Path, edition: str) -> list[Path]:
    found = sorted((shipped_build / edition / "courses").glob("*/*.epub"))
    assert found, f"no EPUB in the {edition} edition"
    return found


def test_every_edition_epub_passes_epubcheck(shipped_build: Path) -> None:
    from test_epub import epubcheck

    epubcheck([b for e in EDITIONS for b in books(shipped_build, e)])


@pytest.mark.parametrize("edition", EDITIONS)
def test_charts_in_the_epub_are_valid_svg(shipped_build: Path, edition: str) -> None:
    svg_ns = "{http://www.w3.org/2000/svg}"
    for book in books(shipped_build, edition):
        with zipfile.ZipFile(book) as z:
            charts = [n for n in z.namelist() if n.endswith(".svg")]
            for name in charts:
                text = z.read(name).decode("utf-8")
                assert "<!DOCTYPE" not in text, name
                root = ET.fromstring(text)
                assert root.tag == f"{svg_ns}svg", name
                empty = [p.attrib for p in root.iter(f"{svg_ns}path") if not p.get("d")]
                assert empty == [], f"{book.name}:{name}: <path> without d"
                assert not re.search(r"<path(?![^>]*\sd=)[^>]*/>", text), name
