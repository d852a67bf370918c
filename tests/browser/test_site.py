"""Learner features in a real browser, on the sample site: search, progress, theme, the
worked-question reveal and self-grade, keyboard shortcuts, and pages free of console errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .conftest import Tab

CAPSULE = "courses/demo/bandwidth/index.html"
PAGE_KINDS = ["index.html", "courses/demo/index.html", CAPSULE, "courses/demo/tiling/index.html",
              "courses/demo/syllabus/index.html", "paths/starter/index.html",
              "questions/is-it-bound/index.html", "experiments/bound/index.html",
              "ladder/index.html", "search/index.html", "404.html", "join/index.html",
              "review/index.html", "placement/index.html"]


def search(tab: Tab, base: str, query: str) -> Any:
    page = tab.goto(f"{base}search/index.html?q={query.replace(' ', '+')}")
    page.wait_for_function(
        "document.querySelector('[data-search-status]').textContent.includes('match')")
    return page


def test_search_finds_free_body_text_and_no_premium_text(sample_site: str, tab: Tab) -> None:
    page = search(tab, sample_site + "public/", "reads and writes every byte")
    results = page.locator(".search-result")
    assert results.count() >= 1
    first = results.first
    assert first.locator("a").inner_text() == "Bandwidth in numbers"
    assert first.locator(".meta").inner_text() == "Capsule · Demo Course · Free"
    first.locator("a").click()
    page.wait_for_url("**/courses/demo/bandwidth/index.html")

    page = search(tab, sample_site + "public/", "premium readers learn")
    assert page.locator(".search-result").count() == 0
    assert "No page matches" in page.inner_text("[data-search-status]")


def test_search_over_several_bundles_finds_only_pages_holding_every_word(
        sample_site: str, tab: Tab) -> None:
    """The public index is two bundles: the edition's own pages, and the pages every edition
    shows alike. Pagefind leaves out a word that its bundle lacks, so the search page asks a
    bundle only if it holds every word some bundle holds: no page holds both words here, so
    nothing matches, as one index of the whole edition would say."""
    base = sample_site + "public/"

    def found(query: str) -> set[str]:
        page = search(tab, base, query)
        return set(page.locator(".search-result a").evaluate_all("links => links.map(a => a.href)"))

    readers, learn = found("readers"), found("learn")
    assert readers and learn and not readers & learn
    page = search(tab, base, "readers learn")
    assert page.locator(".search-result").count() == 0
    entry = page.evaluate("fetch('../static/pagefind/pagefind-entry.json').then(r => r.json())")
    assert entry["curriculum_bundles"] == ["../pagefind-common/"]


def test_member_search_finds_premium_text(sample_site: str, tab: Tab) -> None:
    """Positive control: the phrase the public index lacks is found in the member edition."""
    page = search(tab, sample_site + "member/", "premium readers learn")
    assert page.locator(".search-result a").first.inner_text() == "Tiling for reuse"
    assert "Members" in page.locator(".search-result .meta").first.inner_text()


def test_search_filters_by_kind(sample_site: str, tab: Tab) -> None:
    page = search(tab, sample_site + "public/", "bandwidth")
    page.select_option("#search-kind", "Experiment")
    page.wait_for_function("[...document.querySelectorAll('.search-result .meta')]"
                           ".every(m => m.textContent.startsWith('Experiment'))")
    assert page.locator(".search-result a").first.inner_text() == "Bandwidth bound"


def test_progress_survives_reload_and_shows_on_course_and_path(sample_site: str, tab: Tab) -> None:
    base = sample_site + "public/"
    page = tab.goto(base + CAPSULE)
    button = page.locator("[data-mark-done]")
    assert button.get_attribute("aria-pressed") == "false"
    button.click()
    page.reload()
    assert page.locator("[data-mark-done]").get_attribute("aria-pressed") == "true"

    page = tab.goto(base + "courses/demo/index.html")
    assert page.locator(".course-progress .progress-text").inner_text() == "1 of 3 done"
    assert page.locator("#part-basics .progress-text").inner_text() == "1 of 2 done"
    assert "is-done" in (page.locator("#bandwidth").get_attribute("class") or "")
    assert page.locator("[data-resume] a").inner_text() == "Bandwidth in numbers"

    page = tab.goto(base + "paths/starter/index.html")
    assert page.locator(".progress-text").inner_text() == "1 of 3 done"

    # The sidebar lists the capsules of the page's own part: bandwidth's sibling shows it.
    page = tab.goto(base + "courses/demo/copy-kernel/index.html")
    sidebar = page.locator(".sidebar li:has(> a[href='../bandwidth/index.html'])")
    assert sidebar.locator(".done-mark").count() == 1  # the key comes from the link
    assert page.locator(".sidebar .done-mark").count() == 1
    page = tab.goto(base + "courses/demo/tiling/index.html")
    assert page.locator(".prereqs [data-progress='capsule:bandwidth'] .done-mark").count() == 1

    page = tab.goto(base + "index.html")
    page.locator("[data-resume] a").click()
    page.wait_for_url("**/courses/demo/tiling/index.html")


def test_progress_export_and_import(sample_site: str, tab: Tab, browser: Any,
                                    tmp_path: Path) -> None:
    base = sample_site + "public/"
    page = tab.goto(base + CAPSULE)
    page.keyboard.press("d")
    page = tab.goto(base + "index.html")
    with page.expect_download() as info:
        page.click("[data-progress-export]")
    saved = tmp_path / "progress.json"
    info.value.save_as(saved)
    data = json.loads(saved.read_text())
    assert list(data["done"]) == ["capsule:bandwidth"]

    other = Tab(browser.new_context())
    try:
        page = other.goto(base + "index.html")
        assert "0 pages marked done" in page.inner_text("[data-progress-summary]")
        page.set_input_files("[data-progress-import]", str(saved))
        page.wait_for_function(
            "document.querySelector('[data-progress-summary]').textContent.startsWith('1 page')")
        page = other.goto(base + CAPSULE)
        assert page.locator("[data-mark-done]").get_attribute("aria-pressed") == "true"
        bad = tmp_path / "bad.json"
        bad.write_text('{"version": 9}')
        page = other.goto(base + "index.html")
        page.set_input_files("[data-progress-import]", str(bad))
        page.wait_for_function(
            "document.querySelector('[data-progress-summary]').textContent.includes('not a progress')")
        assert other.errors == []
    finally:
        other.context.close()


def test_theme_follows_system_and_toggle_persists(sample_site: str, dark_tab: Tab) -> None:
    page = dark_tab.goto(sample_site + "public/" + CAPSULE)
    bg = "getComputedStyle(document.body).backgroundColor"
    assert page.evaluate(bg) == "rgb(20, 22, 26)"
    page.click("[data-theme-toggle]")
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    assert page.evaluate(bg) == "rgb(251, 251, 248)"
    page.reload()
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    assert page.evaluate(bg) == "rgb(251, 251, 248)"
    page = dark_tab.goto(sample_site + "public/index.html")
    assert page.evaluate(bg) == "rgb(251, 251, 248)"


def test_reveal_and_self_grade_are_remembered(sample_site: str, tab: Tab) -> None:
    page = tab.goto(sample_site + "member/questions/is-it-bound/index.html")
    answer = page.locator(".answer")
    assert not answer.is_visible()
    assert not page.locator("[data-self-grade]").is_visible()
    page.click(".reveal summary")
    assert answer.is_visible()
    assert "a quarter FLOP per byte" in answer.inner_text()
    page.check("input[name=self-grade][value=hire]")
    assert "Hire" in page.inner_text("[data-self-grade-status]")
    page.reload()
    assert page.locator("[data-self-grade]").is_visible()
    assert page.is_checked("input[name=self-grade][value=hire]")
    assert page.locator("[data-mark-done]").get_attribute("aria-pressed") == "true"


def test_public_question_has_no_reveal(sample_site: str, tab: Tab) -> None:
    page = tab.goto(sample_site + "public/questions/is-it-bound/index.html")
    assert page.locator(".reveal").count() == 0
    assert page.locator("[data-self-grade]").count() == 0


def test_keyboard_shortcuts_and_help(sample_site: str, tab: Tab) -> None:
    page = tab.goto(sample_site + "public/" + CAPSULE)
    page.keyboard.press("?")
    assert page.locator("#help").is_visible()
    assert "Next page" in page.inner_text("#help")
    page.keyboard.press("Escape")
    assert not page.locator("#help").is_visible()
    page.keyboard.press("n")
    page.wait_for_url("**/courses/demo/copy-kernel/index.html")
    page.keyboard.press("p")
    page.wait_for_url("**/courses/demo/bandwidth/index.html")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "site-search-q"
    page.keyboard.type("n")  # typing in a field is not a shortcut
    assert page.url.endswith("bandwidth/index.html")


def test_every_page_kind_has_up_next_and_no_console_errors(sample_site: str, tab: Tab) -> None:
    for edition in ("public", "account", "member"):
        for rel in PAGE_KINDS:
            page = tab.goto(f"{sample_site}{edition}/{rel}")
            assert page.locator("a[data-key=next]").count() == 1, f"{edition}/{rel}"
    assert tab.errors == []
