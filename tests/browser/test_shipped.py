"""The shipped site: experiments compute the expected numbers and carry a static table for
readers without JavaScript."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curriculum.pages import roofline_point

from .conftest import Tab


def fill(page: Any, values: dict[str, float]) -> None:
    for name, value in values.items():
        page.fill(f"[data-input={name}]", str(value))


def test_decode_economics_computes_the_bound(shipped_site: str, tab: Tab) -> None:
    page = tab.goto(shipped_site + "public/experiments/decode-economics/index.html")
    fill(page, {"batch": 16, "params": 70, "weight-bytes": 1, "kv-tokens": 8192, "kv-bytes": 2,
                "layers": 80, "kv-heads": 8, "head-dim": 128, "bandwidth": 4.8})
    # 70 GB of weights + 16 x 8192 x 327,680 B of cache = 112.95 GB over 4.8 TB/s.
    text = page.inner_text("[data-output]")
    assert "Weights 70.00 GB + KV cache 42.95 GB" in text
    assert "step time ≥ 23.53 ms" in text
    assert "≤ 680 tokens/s" in text


def test_roofline_explorer_places_a_kernel(shipped_site: str, tab: Tab) -> None:
    page = tab.goto(shipped_site + "public/experiments/roofline-explorer/index.html")
    fill(page, {"gflop": 1, "gbytes": 4, "peak": 50, "bandwidth": 4})
    text = page.inner_text("[data-output]")
    # 1 GFLOP over 4 GB is 0.25 FLOP/B, left of a ridge of 12.5: 1 TFLOP/s, 1000 us.
    assert "Intensity 0.25 FLOP/byte against a ridge of 12.50: memory-bound" in text
    assert "Attainable 1.00 TFLOP/s; time ≥ 1000.0 µs" in text
    assert page.locator("[data-figure] svg[role=img]").count() == 1
    fill(page, {"gflop": 137.439, "gbytes": 0.2013})
    p = roofline_point(137.439, 0.2013, 50, 4)
    assert f"{p['intensity']:.2f} FLOP/byte" in page.inner_text("[data-output]")
    assert "compute-bound" in page.inner_text("[data-output]")


def test_experiments_work_without_javascript(shipped_site: str, browser: Any) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        for eid in ("decode-economics", "roofline-explorer"):
            page.goto(f"{shipped_site}public/experiments/{eid}/index.html")
            rows = page.locator("table[data-precomputed] tbody tr")
            assert rows.count() >= 4, eid
            assert page.locator("[data-output]").inner_text() == ""
    finally:
        context.close()


def test_roofline_table_matches_the_script(shipped_site: str, tab: Tab) -> None:
    """The build's table and the script agree on the starting values."""
    page = tab.goto(shipped_site + "public/experiments/roofline-explorer/index.html")
    first = page.locator("table[data-precomputed] tbody tr").first.locator("td")
    intensity, attainable = first.nth(2).inner_text(), first.nth(4).inner_text()
    out = page.inner_text("[data-output]")
    assert f"Intensity {intensity} FLOP/byte" in out
    assert f"Attainable {attainable} TFLOP/s" in out


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
