"""Layout of every page type of the shipped site, in every edition, at a phone (390 px), a
tablet (768 px) and a desktop (1280 px) width: the page never scrolls sideways (wide math,
tables and code scroll inside their own box), sidebar numbers and badges are never clipped
and never overlap text, and axe-core reports no serious or critical violation."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Tab
from .test_a11y import serious

WIDTHS = (390, 768, 1280)
EDITIONS = ("public", "account", "member")
COURSE = "courses/kernel-engineering/"
# One page of each type; the shipped site has no separate part pages: a part is a section of
# the course contents page, checked there.
PAGE_TYPES = {
    "home": "index.html",
    "course contents": COURSE + "index.html",
    "capsule": COURSE + "roofline/index.html",
    "capsule with code": COURSE + "gemm-smem-tiling/index.html",
    "syllabus": COURSE + "syllabus/index.html",
    "question": "questions/decode-128k/index.html",
    "questions index": "questions/index.html",
    "experiment": "experiments/roofline-explorer/index.html",
    "experiments index": "experiments/index.html",
    "measurements": "measurements/index.html",
    "path": "paths/gpu-kernels/index.html",
    "ladder": "ladder/index.html",
    "search": "search/index.html?q=roofline",
    "puzzles": "puzzles/index.html",
    "puzzle": "puzzles/11-matmul/index.html",
    "join": "join/index.html",
    "placement": "placement/index.html",
    "review": "review/index.html",
    "not found": "404.html",
}

# Everything that sticks out past the viewport and has no ancestor that scrolls or clips it;
# title/number/badge boxes that overlap inside a contents row or a page's eyebrow; sidebar
# list numbers wider than the room the list leaves them.
PROBE = """() => {
  const vw = document.documentElement.clientWidth, out = {page: null, loose: [], overlap: [], clipped: []};
  if (document.documentElement.scrollWidth > vw + 1)
    out.page = document.documentElement.scrollWidth + ' > ' + vw;
  const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
    (e.className && typeof e.className === 'string' ? '.' + e.className.trim().split(/\\s+/).join('.') : '');
  const contained = e => {
    for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
      const s = getComputedStyle(p);
      if (s.overflowX !== 'visible' || s.clip !== 'auto' && s.position === 'absolute') return true;
    }
    return false;
  };
  for (const e of document.body.querySelectorAll('*')) {
    if (e.closest('dialog:not([open]), [hidden], .visually-hidden, .skip-link, .est-why, .spec-why, .fig-prov')) continue;
    const r = e.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    if ((r.right > vw + 1 || r.left < -1) && !contained(e)) out.loose.push(name(e) + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
  }
  const hit1 = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const hit = (a, b) => [...a.getClientRects()].some(r => [...b.getClientRects()].some(q => hit1(r, q)));
  for (const row of document.querySelectorAll('.capsule-row, .page-head, .page-head .eyebrow, .list li, .index-table tr')) {
    const parts = [...row.children].filter(c => c.getBoundingClientRect().width > 0);
    for (let i = 0; i < parts.length; i++) for (let j = i + 1; j < parts.length; j++)
      if (hit(parts[i], parts[j]))
        out.overlap.push((row.id || name(row)) + ': ' + name(parts[i]) + ' / ' + name(parts[j]));
    const title = row.querySelector(':scope > a, :scope > .title');
    if (title && row.classList.contains('capsule-row')) {
      const lh = parseFloat(getComputedStyle(title).lineHeight) || 27;
      if (title.getBoundingClientRect().height > 3.2 * lh) out.overlap.push(row.id + ': title squeezed');
    }
  }
  for (const ol of document.querySelectorAll('.sidebar ol')) {
    const n = ol.children.length; if (!n || !ol.getBoundingClientRect().width) continue;
    const probe = document.createElement('span');
    probe.textContent = n + '. '; probe.style.position = 'absolute'; probe.style.whiteSpace = 'pre';
    ol.firstElementChild.appendChild(probe);
    const need = probe.getBoundingClientRect().width; probe.remove();
    const room = parseFloat(getComputedStyle(ol).paddingLeft);
    if (need > room + 1) out.clipped.push(ol.closest('details')?.dataset.part + ': ' + need.toFixed(1) + ' > ' + room);
  }
  return out;
}"""


def problems(page: Any) -> dict[str, Any]:
    found = page.evaluate(PROBE)
    return {k: v for k, v in found.items() if v}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("edition", EDITIONS)
def test_every_page_type_holds_its_layout(shipped_site: str, browser: Any, edition: str,
                                          width: int) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900})
    tab = Tab(context)
    found: dict[str, Any] = {}
    # axe at every width in the public edition, and at the phone width in the member one
    # (its pages add the unlocked bodies); the account edition adds no page type of its own.
    axe_here = edition == "public" or (edition == "member" and width == 390)
    try:
        for kind, rel in PAGE_TYPES.items():
            page = tab.goto(f"{shipped_site}{edition}/{rel}")
            if rel.startswith("search/"):
                page.wait_for_function(
                    "document.querySelector('[data-search-status]').textContent.includes('match')")
            for details in page.locator(".sidebar details").all():
                details.evaluate("d => d.open = true")
            bad = problems(page)
            axe = serious(page) if axe_here else []
            if axe:
                bad["axe"] = axe
            if bad:
                found[kind] = bad
    finally:
        context.close()
    assert found == {}
    assert tab.errors == []


def test_every_capsule_fits_a_phone(shipped_site: str, browser: Any) -> None:
    """Each capsule's own math, tables and code, at 390 px, in the member edition (full text)."""
    context = browser.new_context(viewport={"width": 390, "height": 900})
    tab = Tab(context)
    found: dict[str, Any] = {}
    try:
        page = tab.goto(f"{shipped_site}member/{COURSE}index.html")
        hrefs = page.eval_on_selector_all(".capsule-row > a", "els => els.map(a => a.href)")
        assert len(hrefs) > 20
        for href in hrefs:
            bad = problems(tab.goto(href))
            if bad:
                found[href.rsplit("/", 2)[-2]] = bad
    finally:
        context.close()
    assert found == {}
