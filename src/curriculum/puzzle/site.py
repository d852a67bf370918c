"""The puzzle pages of one edition: an index and one page per puzzle.

Every edition gets every puzzle page the edition's tier allows (spec, arguments
and launch, hints, the starter and a download of it). The reference solution is
read from disk only when the edition's tier reaches the puzzle's
`solution_access`; below it the section says which tier holds it, and the
solution's text is never loaded, so nothing later in the build can leak it.
As a second line of defence the puzzle files of an edition are scanned, like
every other withheld text, for runs of the solutions it must not show (the
search index is built from these pages, so it cannot hold what they do not).
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from curriculum.check import LeakCheck
from curriculum.markdown import highlight
from curriculum.puzzle.content import Puzzle, load_puzzles
from curriculum.puzzle.spec import argument_rows, launch_text
from curriculum.render import JOIN_PAGE, Renderer, page_url, relative

INDEX = "puzzles/index.html"


def page_path(p: Puzzle) -> str:
    return f"puzzles/{p.id}/index.html"


def puzzles_href(r: Renderer, page: str) -> str | None:
    """The link from `page` to the puzzles index, or None when there are no puzzles."""
    return relative(page, INDEX) if load_puzzles(r.root) else None


def _tier(r: Renderer, tier: str, locked: bool) -> dict[str, Any]:
    """How a tier shows on a puzzle page: its label, whether this edition withholds
    it, and its offer from site.yaml."""
    t = next(t for t in r.cat.site.tiers if t.id == tier)
    return {"tier": tier, "label": t.label, "locked": locked,
            "lowest": tier == r.cat.site.tiers[0].id, "offer": getattr(t, "offer", None),
            "join": f"{JOIN_PAGE}#tier-{tier}"}


def puzzle_pages(r: Renderer) -> None:
    """Render the index and every puzzle page (nothing when there are no puzzles)."""
    puzzles = load_puzzles(r.root)
    if not puzzles:
        return
    # `serve` renders these pages with a catalog emptied of content (they are no unit of
    # their own); links from them resolve against the edition's whole catalog either way.
    shown, r.cat = r.cat, r.view.catalog
    try:
        _pages(r, puzzles)
    finally:
        r.cat = shown


def _pages(r: Renderer, puzzles: list[Puzzle]) -> None:
    rows = []
    for p in puzzles:
        rows.append({"p": p, "href": relative(INDEX, page_path(p)),
                     "access": _tier(r, p.meta.access, not r.view.tier_allowed(p.meta.access))})
    r.page("puzzles.html", INDEX, "CUDA puzzles",
           f"{len(puzzles)} CUDA puzzles, from a one-line map to a row softmax.",
           index={"kind": "puzzle", "access": r.cat.site.tiers[0].id}, puzzles=rows,
           up_next={"title": puzzles[0].meta.title, "href": rows[0]["href"],
                    "label": "Start with"})
    before = set(r.out.files)
    for i, p in enumerate(puzzles):
        _page(r, p, puzzles[i - 1] if i > 0 else None,
              puzzles[i + 1] if i + 1 < len(puzzles) else None, len(puzzles))
    _scan(r, puzzles, {path: data for path, data in r.out.files.items()
                       if path not in before})


def _background(r: Renderer, p: Puzzle, path: str) -> list[dict[str, str]]:
    """Links to the capsules the puzzle builds on (those this catalog holds and shows)."""
    out = []
    for cid in p.meta.background:
        cap = r.cat.capsules.get(cid)
        if cap is not None and not cap.draft:
            out.append({"title": cap.meta.title,
                        "href": relative(path, page_url("capsule", cid, r.cat))})
    return out


def _scan(r: Renderer, puzzles: list[Puzzle], files: dict[str, bytes]) -> None:
    """Refuse puzzle pages that hold a solution the edition withholds; decided from the
    tier ranks directly, not by the code that chose what to render."""
    rank = r.cat.tier_rank
    limit = rank[r.view.edition.max_tier]
    withheld = [p.solution.read_text(encoding="utf-8") for p in puzzles
                if p.solution.is_file() and rank[p.meta.solution_access] > limit]
    if not withheld:
        return
    shown = [p.starter.read_text(encoding="utf-8") for p in puzzles if p.starter.is_file()]
    shown += [p.body.text for p in puzzles] + [h for p in puzzles for h in p.meta.hints]
    LeakCheck(withheld, shown).scan(files, r.view.edition.id, r.diags)


def _page(r: Renderer, p: Puzzle, prev: Puzzle | None, nxt: Puzzle | None, count: int
          ) -> None:
    path = page_path(p)
    page_locked = not r.view.tier_allowed(p.meta.access)
    solution_locked = page_locked or not r.view.tier_allowed(p.meta.solution_access)
    starter_html = solution_html = Markup("")
    starter_href = None
    if not page_locked:
        starter = p.starter.read_text(encoding="utf-8")
        starter_html = Markup(highlight(starter, "cuda"))
        starter_href = relative(path, f"puzzles/{p.id}/starter.cu")
        r.out.add(f"puzzles/{p.id}/starter.cu", starter)
    if not solution_locked and p.solution.is_file():
        solution_html = Markup(highlight(p.solution.read_text(encoding="utf-8"), "cuda"))
    up_next = ({"title": nxt.meta.title, "href": relative(path, page_path(nxt)),
                "label": "Next puzzle"} if nxt else
               {"title": "All puzzles", "href": relative(path, INDEX), "label": "Back to"})
    r.page("puzzle.html", path, f"Puzzle {p.number}: {p.meta.title}", p.meta.summary,
           index={"kind": "puzzle", "access": p.meta.access},
           p=p, meta=p.meta, count=count, locked=page_locked,
           access=_tier(r, p.meta.access, page_locked),
           solution=_tier(r, p.meta.solution_access, solution_locked),
           body_html=Markup("") if page_locked else r.markdown(p.body, path),
           rows=argument_rows(p.spec), launch=launch_text(p.spec), spec=p.spec,
           starter_html=starter_html, starter_href=starter_href,
           starter_file=f"content/puzzles/{p.id}/starter.cu", solution_html=solution_html,
           index_href=relative(path, INDEX), background=_background(r, p, path),
           prev={"title": prev.meta.title, "href": relative(path, page_path(prev)),
                 "label": "Previous"} if prev else None,
           up_next=up_next)
