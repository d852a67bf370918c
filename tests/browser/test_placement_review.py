"""The placement check, self-grades on the review page, and the way in from a locked page,
in a real browser: a quiz taken, a path suggested, progress exported and imported again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from .conftest import SAMPLE, Tab

PLACEMENT = "placement/index.html"


def answer(page: Any, wrong: set[str] = frozenset()) -> None:
    """Pick the right choice of every item (read from the page), or a wrong one for `wrong`."""
    for item in page.locator("[data-item]").all():
        item_id = item.get_attribute("data-item")
        right = int(item.get_attribute("data-answer"))
        n = item.locator("input[type=radio]").count()
        pick = (right + 1) % n if item_id in wrong else right
        item.locator(f"input[value='{pick}']").check()
    page.click("[data-placement-check]")
    page.wait_for_selector("[data-placement-result]:not([hidden])")


def test_placement_suggests_a_path_and_a_start(sample_site: str, tab: Tab) -> None:
    page = tab.goto(sample_site + "public/" + PLACEMENT)
    assert page.locator("[data-item]").count() == 10
    assert not page.locator(".placement-explain").first.is_visible()  # reasons wait for the check
    answer(page, wrong={"bound-kind", "tile-size"})
    result = page.locator("[data-placement-result]")
    assert "8 of 10 right" in result.inner_text()
    assert result.locator("[data-part-row=basics] [data-part-score]").inner_text() == "4 of 5"
    # basics below the advanced path's minimum: the default rule; start at the first capsule missed
    assert result.locator("[data-placement-path]").inner_text() == "Starter path"
    assert result.locator("[data-placement-start]").inner_text() == "Bandwidth in numbers"
    assert "is-wrong" in (page.locator("[data-item=bound-kind]").get_attribute("class") or "")
    assert page.locator("[data-item=bound-kind] .placement-explain").is_visible()
    result.locator("[data-placement-start]").click()
    page.wait_for_url("**/courses/demo/bandwidth/index.html")

    page = tab.goto(sample_site + "public/" + PLACEMENT)
    answer(page)
    result = page.locator("[data-placement-result]")
    assert result.locator("[data-placement-path]").inner_text() == "Advanced path"
    # nothing missed: start at the suggested path's first step
    assert result.locator("[data-placement-start]").inner_text() == "A copy kernel"
    page.reload()
    assert "Your last check: 10 of 10 right" in page.inner_text("[data-placement-result]")
    result.locator("[data-placement-path]").click()
    page.wait_for_url("**/paths/advanced/index.html")


def test_placement_and_grades_travel_with_progress(sample_site: str, tab: Tab, browser: Any,
                                                   tmp_path: Path) -> None:
    base = sample_site + "member/"
    page = tab.goto(base + PLACEMENT)
    answer(page)
    page = tab.goto(base + "questions/is-it-bound/index.html")
    page.click(".reveal summary")
    page.check("input[name=self-grade][value=weak]")
    page = tab.goto(base + "index.html")
    saved = page.locator("[data-placement-saved]")
    assert "Advanced path" in saved.inner_text() and "A copy kernel" in saved.inner_text()
    with page.expect_download() as info:
        page.click("[data-progress-export]")
    exported = tmp_path / "progress.json"
    info.value.save_as(exported)
    data = json.loads(exported.read_text())
    assert data["placement"]["path"]["id"] == "advanced"
    assert data["placement"]["scores"] == {"basics": [5, 5], "advanced": [5, 5]}
    assert data["grades"] == {"question:is-it-bound": "weak"}

    other = Tab(browser.new_context())
    try:
        page = other.goto(base + "index.html")
        assert page.locator("[data-placement-saved]").is_hidden()
        page.set_input_files("[data-progress-import]", str(exported))
        page.wait_for_selector("[data-placement-saved]:not([hidden])")
        assert "Advanced path" in page.inner_text("[data-placement-saved]")
        page = other.goto(base + PLACEMENT)
        assert page.locator("[data-placement-path]").inner_text() == "Advanced path"
        page = other.goto(base + "review/index.html")
        item = page.locator("[data-review='question:is-it-bound']")
        assert item.locator("[data-review-grade]").inner_text() == "Weak"
        redo = item.locator("[data-redo=weak]")
        assert redo.is_visible() and "Guesses without arithmetic." in redo.inner_text()
        assert item.locator("[data-redo=hire]").is_hidden()
        assert "1 of 1 graded: 1 weak" in page.inner_text("[data-review-summary]")
        assert other.errors == []
    finally:
        other.context.close()


def test_review_lists_a_locked_question_with_its_offer(sample_site: str, tab: Tab) -> None:
    page = tab.goto(sample_site + "public/review/index.html")
    item = page.locator("[data-review='question:is-it-bound']")
    assert item.locator("[data-review-grade]").inner_text() == "not graded yet"
    assert "Guesses without arithmetic." not in page.content()  # the rubric is withheld here
    item.locator("a.offer-link").click()
    page.wait_for_url("**/join/index.html#tier-premium")


def test_locked_page_offers_a_way_in(sample_site: str, tab: Tab) -> None:
    site = yaml.safe_load((SAMPLE / "content/site.yaml").read_text(encoding="utf-8"))
    offer = {t["id"]: t["offer"] for t in site["tiers"] if "offer" in t}
    for edition, rel, tier in (("public", "courses/demo/copy-kernel/index.html", "account"),
                               ("public", "courses/demo/tiling/index.html", "premium"),
                               ("account", "courses/demo/tiling/index.html", "premium")):
        page = tab.goto(f"{sample_site}{edition}/{rel}")
        lock = page.locator("aside.locked")
        assert lock.is_visible()
        assert offer[tier]["gives"] in lock.inner_text()
        join = lock.locator(f"[data-offer-join={tier}]")
        assert join.inner_text() == offer[tier]["join_label"]
        assert join.get_attribute("href") == offer[tier]["join_url"]
        assert lock.locator(f"[data-offer-sign-in={tier}]").get_attribute("href") == \
            offer[tier]["sign_in_url"]
        lock.get_by_role("link", name="What each tier gives").click()
        page.wait_for_url(f"**/{edition}/join/index.html#tier-{tier}")
        target = page.locator(f"#tier-{tier}")
        assert target.is_visible() and offer[tier]["price"] in target.inner_text()
    page = tab.goto(sample_site + "account/courses/demo/copy-kernel/index.html")
    assert page.locator("aside.locked").count() == 0


def test_shipped_placement_check(shipped_site: str, tab: Tab) -> None:
    """The course's own check: every item answered right suggests the interview path."""
    page = tab.goto(shipped_site + "public/" + PLACEMENT)
    n = page.locator("[data-item]").count()
    assert 10 <= n <= 15
    answer(page)
    assert f"{n} of {n} right" in page.inner_text("[data-placement-result]")
    link = page.locator("[data-placement-path]")
    link.click()
    page.wait_for_url("**/paths/interview/index.html")
