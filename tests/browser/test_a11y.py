"""axe-core on every page kind, in both themes and both editions: no serious or critical
violation."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Tab
from .test_site import PAGE_KINDS


def serious(page: Any) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    result = Axe().run(page)
    return [f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:3]}"
            for v in result.response["violations"] if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_no_serious_violations(sample_site: str, browser: Any, theme: str) -> None:
    context = browser.new_context(color_scheme=theme)
    tab = Tab(context)
    found = {}
    try:
        # Every kind in the public edition; the member edition adds unlocked bodies.
        pages = [("public", rel) for rel in PAGE_KINDS] + [
            ("member", "courses/demo/tiling/index.html"), ("member", "questions/is-it-bound/index.html")]
        for edition, rel in pages:
            page = tab.goto(f"{sample_site}{edition}/{rel}")
            if rel == "search/index.html":
                page.fill("#search-q", "bandwidth")
                page.wait_for_selector(".search-result")
            if rel.startswith("questions/") and edition == "member":
                page.click(".reveal summary")
            bad = serious(page)
            if bad:
                found[f"{edition}/{rel}"] = bad
    finally:
        context.close()
    assert found == {}
    assert tab.errors == []


def test_shipped_pages_in_both_themes(shipped_site: str, browser: Any) -> None:
    found = {}
    for theme in ("light", "dark"):
        context = browser.new_context(color_scheme=theme)
        tab = Tab(context)
        try:
            for rel in ("index.html", "courses/kernel-engineering/index.html",
                        "courses/kernel-engineering/roofline/index.html",
                        "experiments/roofline-explorer/index.html",
                        "experiments/decode-economics/index.html"):
                bad = serious(tab.goto(f"{shipped_site}public/{rel}"))
                if bad:
                    found[f"{theme}/{rel}"] = bad
        finally:
            context.close()
    assert found == {}


def test_skip_link_and_focus_are_visible(sample_site: str, tab: Tab) -> None:
    page = tab.goto(sample_site + "public/courses/demo/bandwidth/index.html")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    box = page.locator(".skip-link").bounding_box()
    assert box is not None and box["x"] >= 0
    page.keyboard.press("Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"


def test_reduced_motion_and_landmarks(sample_site: str, browser: Any) -> None:
    context = browser.new_context(reduced_motion="reduce")
    tab = Tab(context)
    try:
        page = tab.goto(sample_site + "public/courses/demo/bandwidth/index.html")
        assert page.locator("header.site-header").count() == 1
        assert page.locator("main#main").count() == 1
        assert page.locator("nav[aria-label]").count() >= 3
        assert page.locator("footer").count() == 1
        assert page.locator("img:not([alt])").count() == 0
    finally:
        context.close()
