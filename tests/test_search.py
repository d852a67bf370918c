"""The Pagefind index: built per edition from the pages it rendered, so the public index
holds free text and no withheld text, and every result carries kind, course and access."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import SAMPLE, TEMPLATES, search_fragments

from curriculum.build import build
from curriculum.index import PAGEFIND_DIR

SIGNATURE = b"pagefind_dcd"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("search")
    build(SAMPLE, out_dir=out, templates=TEMPLATES, strict=True)
    return out


def test_bundle_holds_the_runtime_and_no_ui_widgets(site: Path) -> None:
    names = {p.relative_to(site / "public" / PAGEFIND_DIR).as_posix()
             for p in (site / "public" / PAGEFIND_DIR).rglob("*") if p.is_file()}
    assert {"pagefind.js", "pagefind-worker.js", "pagefind-entry.json", "wasm.en.pagefind"} <= names
    assert not any(n.startswith("pagefind-ui") or "playground" in n for n in names)


def test_every_listed_page_is_indexed_with_its_metadata(site: Path) -> None:
    pages = search_fragments(site / "public")
    assert "/search/index.html" not in pages and "/404.html" not in pages
    capsule = pages["/courses/demo/bandwidth/index.html"]
    assert capsule["meta"] == {"title": "Bandwidth in numbers", "kind": "Capsule",
                               "course": "Demo Course", "access": "Free"}
    assert capsule["filters"] == {"kind": ["Capsule"], "access": ["Free"], "course": ["Demo Course"]}
    assert pages["/questions/is-it-bound/index.html"]["meta"]["kind"] == "Worked question"
    assert pages["/courses/demo/tiling/index.html"]["meta"]["access"] == "Members"
    assert {"/index.html", "/courses/demo/index.html", "/paths/starter/index.html",
            "/ladder/index.html", "/experiments/bound/index.html"} <= pages.keys()


def test_public_index_has_free_body_and_no_withheld_body(site: Path) -> None:
    public = search_fragments(site / "public")
    member = search_fragments(site / "member")
    free = "reading and writing it once"
    assert free in public["/courses/demo/bandwidth/index.html"]["content"]
    withheld = "thirty-two fold"
    assert not any(withheld in r["content"] for r in public.values())
    assert withheld in member["/courses/demo/tiling/index.html"]["content"]
    # A preview is public: the text before <!-- more --> is indexed in both editions.
    assert "Each tile is loaded once." in public["/courses/demo/tiling/index.html"]["content"]


def test_chrome_is_not_indexed(site: Path) -> None:
    record = search_fragments(site / "public")["/courses/demo/bandwidth/index.html"]
    for chrome in ("Skip to content", "Keyboard shortcuts", "Mark as done", "Up next"):
        assert chrome not in record["content"]


def test_dropping_ignored_elements_before_pagefind_changes_no_byte(
        site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`_searchable` leaves out the code, math and SVG that Pagefind is told to ignore;
    the bundle must be the one Pagefind makes when it ignores them itself: words on either
    side of an element joined the same way, an ignored element's own id kept as an anchor,
    a figure's image kept as the page's image. The sample's pages and a page made to hold
    every such case are indexed both ways."""
    from curriculum import index

    edition = site / "member"
    pages = sorted(p.relative_to(edition).as_posix() for p in edition.rglob("*.html")
                   if not p.relative_to(edition).as_posix().startswith("static/"))
    files = {p: (edition / p).read_bytes() for p in pages}
    files["tricky/index.html"] = (
        b"<!doctype html><html><head><title>Tricky</title></head><body><main>"
        b"<h1>Rate<math><mi>r</mi></math>limited</h1><p>alpha<math><mi>x</mi></math>beta "
        b'gamma<svg viewBox="0 0 1 1"><text>hidden</text></svg>delta<pre><code>int x;</code>'
        b'</pre>zeta <pre id="kept"><code>y</code></pre> eta <math id="m"><mi>z</mi></math>'
        b'<figure><img src="a.png" alt="first image"></figure><svg><g id="inner"></g></svg>'
        b"</main></body></html>")
    out = index.Output(files=files, pages=[{"path": p} for p in files], edition="member")
    dropped = [p for p in files
               if index._searchable(files[p].decode()) != _whole_main(files[p].decode())]
    assert "tricky/index.html" in dropped and len(dropped) >= 2, dropped

    class Site:  # what `start_search_index` reads of a catalog
        class site:
            language = "en"

    made = index.start_search_index(out, Site)()  # type: ignore[arg-type]
    monkeypatch.setattr(index, "_without_excluded", lambda main: main)
    whole = index.start_search_index(out, Site)()  # type: ignore[arg-type]
    assert made == whole
    tricky = next(json.loads(gzip.decompress(data)[len(SIGNATURE):])
                  for name, data in made.items() if "/fragment/" in name
                  and b"Tricky" not in data and b"limited" in gzip.decompress(data))
    assert "alphabeta" in tricky["content"] and tricky["meta"]["image_alt"] == "first image"
    assert {a["id"] for a in tricky["anchors"]} >= {"kept", "m"}


def _whole_main(page: str) -> str:
    from curriculum import index

    real = index._without_excluded
    try:
        index._without_excluded = lambda main: main  # type: ignore[assignment]
        return index._searchable(page)
    finally:
        index._without_excluded = real


def test_pages_every_edition_shows_alike_are_indexed_once(site: Path) -> None:
    """A page whose title and <main> are the same in every edition goes to one bundle,
    copied into each edition and named by each one's entry file; every other page is
    indexed in its edition's own bundle, so an edition's search finds its own text."""
    from curriculum.index import _searchable

    editions = ("public", "account", "member")
    shown = {e: {url: _searchable((site / e / url.lstrip("/")).read_text(encoding="utf-8"))
                 for url in search_fragments(site / e)} for e in editions}
    alike = {url for url in shown["public"] if len({shown[e].get(url) for e in editions}) == 1}
    assert alike and "/courses/demo/bandwidth/index.html" in alike  # a free capsule
    assert "/courses/demo/tiling/index.html" not in alike  # a premium one
    shared = {e: {p.relative_to(site / e).as_posix(): p.read_bytes()
                  for p in (site / e / "static/pagefind-common").rglob("*") if p.is_file()}
              for e in editions}
    assert shared["public"] and shared["public"] == shared["account"] == shared["member"]
    # One copy on disk: the other editions link the maker's files.
    inodes = [{p: (site / e / p).stat().st_ino for p in shared[e]} for e in editions]
    assert inodes[0] == inodes[1] == inodes[2]
    for e in editions:
        entry = json.loads((site / e / PAGEFIND_DIR / "pagefind-entry.json").read_text())
        assert entry["curriculum_bundles"] == ["../pagefind-common/"]
        own = set()
        for path in (site / e / PAGEFIND_DIR / "fragment").iterdir():
            own.add(json.loads(gzip.decompress(path.read_bytes())[len(SIGNATURE):])["url"])
        assert own == shown[e].keys() - alike, e


def test_an_edition_that_fails_stops_the_others_waiting(tmp_path: Path) -> None:
    """Editions built at once wait for each other's pages: a process that fails, or is gone,
    must not leave the others waiting for good."""
    from curriculum.build import _Exchange, _OtherEditionFailed

    public = _Exchange(tmp_path, ["public", "member"])
    public.offer("public", {"index.html": b"a"})
    _Exchange(tmp_path, ["public", "member"]).fail()  # member failed before offering
    with pytest.raises(_OtherEditionFailed):
        public.shared("public")
    gone = _Exchange(tmp_path / "b", ["public", "member"], alive=lambda: False)
    (tmp_path / "b").mkdir()
    with pytest.raises(_OtherEditionFailed):
        gone.shared("public")
