"""Search that helps: excerpts from prose (not code, math or figure notes), results grouped by
kind, and titles close to a query that finds nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import search_fragments

from .conftest import Tab
from .test_site import search


def test_index_holds_prose_not_code_or_figure_notes(shipped_build: Path) -> None:
    pages = search_fragments(shipped_build / "public")
    naive = pages["/courses/kernel-engineering/gemm-naive/index.html"]["content"]
    assert "one thread per element of the output" in naive  # prose stays
    for noise in ("__global__", "threadIdx", "(estimate:", "median of", " # "):
        assert noise not in naive, noise
    decode = pages["/experiments/decode-economics/index.html"]["content"]
    assert "Seeded from a measured figure" not in decode
    assert "(spec:" not in decode


def test_titles_file_lists_the_editions_pages(shipped_build: Path) -> None:
    rows = json.loads((shipped_build / "public" / "static" / "search-titles.json").read_text())
    by_url = {r["url"]: r for r in rows}
    assert by_url["experiments/roofline-explorer/index.html"] == {
        "title": "Roofline explorer", "url": "experiments/roofline-explorer/index.html",
        "kind": "Experiment"}
    assert by_url["courses/kernel-engineering/roofline/index.html"]["kind"] == "Capsule"
    assert all((shipped_build / "public" / r["url"]).is_file() for r in rows)


def group_kinds(page: Any) -> list[str]:
    return [g.get_attribute("data-kind") for g in page.locator(".search-group").all()]


def test_results_are_grouped_by_kind(shipped_site: str, tab: Tab) -> None:
    page = search(tab, shipped_site + "public/", "roofline")
    kinds = group_kinds(page)
    assert kinds[:1] == ["Capsule"] and "Experiment" in kinds and "Worked question" in kinds
    order = ["Capsule", "Worked question", "Puzzle", "Experiment"]
    known = [k for k in kinds if k in order]
    assert known == sorted(known, key=order.index)
    for group in page.locator(".search-group").all():
        kind = group.get_attribute("data-kind")
        metas = group.locator(".search-result .meta").all_inner_texts()
        assert metas and all(m.startswith(kind) for m in metas), (kind, metas)
        assert group.locator("h2").inner_text().endswith(f"({len(metas)})")
    excerpts = " ".join(page.locator(".search-result .excerpt").all_inner_texts())
    assert "__global__" not in excerpts and "(estimate:" not in excerpts


def test_a_typo_gets_title_suggestions(sample_site: str, tab: Tab) -> None:
    page = search(tab, sample_site + "public/", "bandwith")  # one letter left out
    assert "No page matches" in page.inner_text("[data-search-status]")
    page.wait_for_selector(".search-suggestion")
    titles = page.locator(".search-suggestion a").all_inner_texts()
    assert titles == ["Bandwidth bound", "Bandwidth in numbers"], titles
    assert page.locator(".search-result").count() == 0
    page.locator(".search-suggestion a", has_text="Bandwidth in numbers").click()
    page.wait_for_url("**/courses/demo/bandwidth/index.html")


def test_suggestions_from_the_shipped_titles(shipped_site: str, tab: Tab) -> None:
    page = tab.goto(shipped_site + "public/search/index.html")
    url = shipped_site + "public/static/js/search.js"
    titles = page.evaluate(f"""async () => {{
      const m = await import({url!r});
      const rows = await (await fetch({(shipped_site + "public/static/search-titles.json")!r})).json();
      return m.suggest("rpofline", rows).map(t => t.title);
    }}""")
    assert "Roofline explorer" in titles, titles


def test_nonsense_gets_no_suggestions(sample_site: str, tab: Tab) -> None:
    page = search(tab, sample_site + "public/", "zzqxv")
    assert "No page matches" in page.inner_text("[data-search-status]")
    assert page.locator(".search-suggestion").count() == 0


def test_edit_distance_in_the_page(sample_site: str, tab: Tab) -> None:
    page = tab.goto(sample_site + "public/search/index.html")
    url = sample_site + "public/static/js/search.js"
    got = page.evaluate(f"""async () => {{
      const m = await import({url!r});
      return [m.editDistance("kitten", "sitting"), m.editDistance("", "abc"),
              m.titleDistance("bandwith", "Bandwidth in numbers"),
              m.suggest("bandwith", [{{title: "Bandwidth in numbers", url: "a", kind: "Capsule"}},
                                     {{title: "Tiling for reuse", url: "b", kind: "Capsule"}}]).map(t => t.url)];
    }}""")
    assert got == [3, 3, 1, ["a"]]
