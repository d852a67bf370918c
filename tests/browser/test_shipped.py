"""The shipped site: its pages load without console errors and its EPUBs pass epubcheck.
The experiments are tested in test_experiments.py."""

from __future__ import annotations

from pathlib import Path

from .conftest import Tab


def test_shipped_pages_have_no_console_errors(shipped_site: str, tab: Tab) -> None:
    for rel in ("index.html", "courses/kernel-engineering/index.html",
                "courses/kernel-engineering/roofline/index.html", "ladder/index.html",
                "experiments/decode-economics/index.html",
                "experiments/roofline-explorer/index.html", "search/index.html?q=roofline"):
        page = tab.goto(f"{shipped_site}public/{rel}")
        page.wait_for_load_state("networkidle")
    assert tab.errors == []


def test_shipped_epubs_pass_epubcheck(shipped_build: Path) -> None:
    from test_epub import epubcheck

    books = sorted((shipped_build / "public" / "courses").glob("*/*.epub"))
    assert books
    epubcheck(books)
