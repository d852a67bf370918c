"""The index pages of the shipped site (worked questions, experiments, every measurement) and
the footer: what they list, the measurement table filtered with and without JavaScript, and
every control reached by the keyboard alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .conftest import REPO, Tab


def results_cases() -> int:
    return sum(len(json.loads(p.read_text())["cases"])
               for p in (REPO / "kernels" / "results").glob("*.json"))


def test_questions_index_lists_every_question_by_track_with_grades(shipped_site: str,
                                                                    tab: Tab) -> None:
    base = shipped_site + "public/"
    page = tab.goto(base + "questions/index.html")
    items = page.locator("li[data-review]")
    shipped = len(list((REPO / "content" / "questions").glob("*.md")))
    assert items.count() == shipped > 0
    assert page.locator("section h2").count() >= 2  # one section per track
    assert page.locator("li[data-review] .badge").count() == shipped  # access on every row
    first = items.first
    key = first.get_attribute("data-review")
    page.evaluate(f"""() => {{ const p = JSON.parse(localStorage.getItem('curriculum.progress')
        || 'null') || {{version: 1, done: {{}}, grades: {{}}, last: null, lastByCourse: {{}}}};
        p.grades[{json.dumps(key)}] = 'hire'; localStorage.setItem('curriculum.progress',
        JSON.stringify(p)); }}""")
    page.reload()
    grade = page.locator(f"li[data-review='{key}'] [data-review-grade]").inner_text()
    assert grade.lower() != "not graded yet", grade


def test_experiments_index_links_every_experiment(shipped_site: str, tab: Tab) -> None:
    page = tab.goto(shipped_site + "public/experiments/index.html")
    shipped = len(list((REPO / "content" / "experiments").glob("*.md")))
    assert page.locator(".card h2 a").count() == shipped > 0
    href = page.locator(".card h2 a").first.get_attribute("href") or ""
    assert href.endswith("/index.html") and not href.startswith("http")


def test_measurement_table_without_javascript(shipped_site: str, browser: Any) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(shipped_site + "public/measurements/index.html")
        assert page.locator("#measurements tbody tr").count() == results_cases()
        assert not page.locator("form[data-table-filter]").is_visible()
        head = page.locator("#measurements thead th").all_inner_texts()
        assert head[:5] == ["Kernel", "Shape", "GPU", "Date", "Median time"]
        assert "Library" in head and "Cited in" in head
        assert page.locator("#measurements tbody td a[href*='courses/']").count() > 0
    finally:
        context.close()


def test_measurement_table_filters_with_javascript(shipped_site: str, tab: Tab) -> None:
    page = tab.goto(shipped_site + "public/measurements/index.html")
    rows = page.locator("#measurements tbody tr")
    total = rows.count()
    page.fill("[data-filter-text]", "gemm")
    visible = page.locator("#measurements tbody tr:not([hidden])")
    assert 0 < visible.count() < total
    assert all("gemm" in t.lower() for t in visible.all_inner_texts())
    assert f"of {total} cases shown" in page.inner_text("[data-filter-status]")
    page.fill("[data-filter-text]", "")
    topic = page.locator("#filter-topic option").nth(1).inner_text()
    page.select_option("#filter-topic", topic)
    assert all(r.get_attribute("data-topic") == topic
               for r in page.locator("#measurements tbody tr:not([hidden])").all())


def test_footer_names_edition_date_and_methods(shipped_site: str, tab: Tab) -> None:
    words = {"public": "Free edition", "account": "Account edition", "member": "Members edition"}
    for edition, name in words.items():
        page = tab.goto(f"{shipped_site}{edition}/index.html")
        text = page.inner_text("footer")
        assert name in text
        assert "edition." in text and "max_tier" not in text
        assert "latest run 20" in text
        page.click("footer a:has-text('how they were measured')")
        page.wait_for_url("**/measurements/index.html#methods")


def test_keyboard_reaches_every_control(shipped_site: str, tab: Tab) -> None:
    """Tab alone visits every link, button, field and scrolling box a page shows, in order."""
    for rel in ("experiments/roofline-explorer/index.html",
                "courses/kernel-engineering/roofline/index.html", "questions/index.html"):
        page = tab.goto(shipped_site + "public/" + rel)
        wanted = page.evaluate("""() => [...document.querySelectorAll(
            'a[href], button, input, select, textarea, summary, [tabindex="0"]')]
            .filter(e => e.offsetParent !== null && !e.closest('[hidden], dialog:not([open])')
                    && getComputedStyle(e).visibility !== 'hidden' && !e.closest('details:not([open]) > :not(summary)'))
            .length""")
        seen = set()
        for _ in range(wanted + 5):
            page.keyboard.press("Tab")
            seen.add(page.evaluate("""() => { const e = document.activeElement;
                return e.tagName + '|' + (e.getAttribute('href') || e.id || e.className) + '|'
                    + Math.round(e.getBoundingClientRect().top + scrollY); }"""))
        assert len(seen) >= wanted, f"{rel}: {len(seen)} of {wanted} reached"


def test_reduced_motion_turns_off_animation(shipped_site: str, browser: Any) -> None:
    context = browser.new_context(reduced_motion="reduce")
    try:
        page = context.new_page()
        page.goto(shipped_site + "public/index.html")
        assert page.evaluate("getComputedStyle(document.documentElement).scrollBehavior") == "auto"
        assert page.evaluate("matchMedia('(prefers-reduced-motion: reduce)').matches")
    finally:
        context.close()


def test_index_pages_in_every_edition(shipped_build: Path) -> None:
    for edition in ("public", "account", "member"):
        for rel in ("questions/index.html", "experiments/index.html", "measurements/index.html"):
            assert (shipped_build / edition / rel).is_file(), f"{edition}/{rel}"


def test_keyboard_reaches_the_measurement_filter_and_table(shipped_site: str, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 900})
    try:
        keyboard_to_table(context.new_page(), shipped_site)
    finally:
        context.close()


def keyboard_to_table(page: Any, shipped_site: str) -> None:
    page.goto(shipped_site + "public/measurements/index.html")
    reached = []
    for _ in range(60):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("document.activeElement.id || document.activeElement.className"))
        if "table-scroll" in reached[-1]:
            break
    assert {"filter-text", "filter-topic", "filter-gpu"} <= set(reached)
    assert "table-scroll" in reached[-1]
    page.keyboard.press("ArrowRight")  # the focused box scrolls the wide table
    page.wait_for_function("document.querySelector('.table-scroll').scrollLeft > 0")
