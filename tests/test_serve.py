"""`curriculum serve`: unit-wise builds equal full builds, edits re-render only the
pages that show what changed, and errors show in the page until they are fixed."""

from __future__ import annotations

import json
import shutil
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import TEMPLATES, edit

from curriculum.build import build, page_units
from curriculum.serve import LiveSite, Server, Update

EPOCH = "1790000000"


@pytest.fixture
def live(sample: Path, monkeypatch: pytest.MonkeyPatch) -> LiveSite:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    site = LiveSite(sample, TEMPLATES, "public")
    assert site.apply(None).ok
    return site


def full_build(root: Path, edition: str, templates: Path = TEMPLATES) -> dict[str, bytes]:
    return build(root, editions=[edition], templates=templates, write=False).outputs[edition].files


# The Pagefind bundle differs between two full builds of the same content (its file
# names and metadata are not deterministic yet), so it is compared by presence only.
UNSTABLE = "static/pagefind/"


def assert_same_as_full_build(site: LiveSite, templates: Path = TEMPLATES) -> None:
    want = full_build(site.root, site.edition_id, templates)
    differ = sorted(p for p in want.keys() | site.files.keys()
                    if want.get(p) != site.files.get(p) and not p.startswith(UNSTABLE))
    assert differ == [], "served files differ from a full build"
    assert any(p.startswith(UNSTABLE) for p in want) == any(
        p.startswith(UNSTABLE) for p in site.files)


def change(site: LiveSite, root: Path, rel: str, old: str, new: str) -> Update:
    edit(root, rel, old, new)
    return site.apply([root / rel])


@pytest.mark.parametrize("edition", ["public", "member"])
def test_unit_by_unit_equals_full_build(sample: Path, edition: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    site = LiveSite(sample, TEMPLATES, edition)
    first = site.apply(None)
    assert first.ok and first.full
    assert sorted(first.rebuilt) == sorted(page_units(site.catalog))  # type: ignore[arg-type]
    assert_same_as_full_build(site)


def test_body_edit_rebuilds_that_page_only(live: LiveSite, sample: Path) -> None:
    update = change(live, sample, "content/courses/demo/capsules/copy-kernel.md",
                    "The scalar copy ran at", "The scalar copy kernel ran at")
    assert update.ok and not update.full
    assert update.rebuilt == [("capsule", "copy-kernel")]
    assert update.changed == ["courses/demo/copy-kernel/index.html"]
    assert_same_as_full_build(live)
    # Below <!-- more --> of an account page: the public edition shows none of it.
    hidden = change(live, sample, "content/courses/demo/capsules/copy-kernel.md",
                    "coalesced loads and stores in full.", "coalesced loads and stores, in full.")
    assert hidden.ok and hidden.rebuilt == [] and hidden.changed == []
    assert_same_as_full_build(live)


def test_title_edit_rebuilds_the_pages_that_list_it(live: LiveSite, sample: Path) -> None:
    update = change(live, sample, "content/courses/demo/capsules/bandwidth.md",
                    "title: Bandwidth in numbers", "title: Bandwidth, in numbers")
    assert update.ok and not update.full
    # its page, its siblings (sidebar, pager), its course, the path, question and drill
    # that list it; not home, not the experiment, not the 404 page
    assert sorted(update.changed) == [
        "courses/demo/bandwidth/index.html", "courses/demo/copy-kernel/index.html",
        "courses/demo/index.html", "courses/demo/syllabus/index.html",
        "courses/demo/tiling/index.html", "ladder/index.html", "paths/starter/index.html",
        "placement/index.html", "questions/is-it-bound/index.html"]
    assert ("home", "") not in update.rebuilt and ("experiment", "bound") not in update.rebuilt
    assert_same_as_full_build(live)


def test_draft_moves_the_links_to_it(live: LiveSite, sample: Path) -> None:
    update = change(live, sample, "content/courses/demo/capsules/copy-kernel.md",
                    "prerequisites: [bandwidth]", "prerequisites: [bandwidth]\nstatus: draft")
    assert update.ok and not update.full
    assert "courses/demo/copy-kernel/index.html" not in live.files
    assert ("capsule", "bandwidth") in update.rebuilt  # its link now points at the course page
    assert b'href="../index.html#copy-kernel"' in live.files["courses/demo/bandwidth/index.html"]
    assert_same_as_full_build(live)


def test_template_edit_rebuilds_every_page(sample: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES, templates)
    site = LiveSite(sample, templates, "member")
    site.apply(None)
    page = templates / "base.html"
    page.write_text(page.read_text().replace("</footer>", "<p>Edited.</p></footer>"))
    update = site.apply([page])
    assert update.ok
    assert sorted(update.rebuilt) == sorted(page_units(site.catalog))  # type: ignore[arg-type]
    assert all("<p>Edited.</p>" in site.files[p].decode() for p in update.changed
               if p.endswith(".html"))
    assert_same_as_full_build(site, templates)


def test_template_error_is_reported_and_recovers(sample: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES, templates)
    site = LiveSite(sample, templates, "member")
    site.apply(None)
    before = dict(site.files)
    page = templates / "404.html"
    good = page.read_text()
    page.write_text(good.replace("{% block main %}", "{% block main %}\n{% if %}"))
    bad = site.apply([page])
    assert not bad.ok and site.files == before
    [error] = site.errors
    assert error.code == "template.error" and error.loc.path.endswith("templates/404.html")
    assert error.loc.line == good[:good.index("{% block main %}")].count("\n") + 2
    page.write_text(good)
    assert site.apply([page]).ok and site.errors == []
    assert_same_as_full_build(site, templates)


def test_results_edit_rebuilds_pages_citing_figures(live: LiveSite, sample: Path) -> None:
    results = sample / "kernels/results/test-gpu.json"
    data = json.loads(results.read_text())
    for run in data["runs"].values():  # not the GPU's name: every page's footer shows that
        run["provenance"]["driver"] += " (edited)"
    results.write_text(json.dumps(data, indent=2))
    update = live.apply([results])
    assert update.ok
    citing = {("capsule", "bandwidth"), ("capsule", "copy-kernel"), ("experiment", "bound")}
    # The measurements index lists every case, so a results edit rebuilds it too.
    assert set(update.rebuilt) <= citing | {("question", "is-it-bound"), ("capsule", "tiling"),
                                            ("indexes", "")}
    assert {("capsule", "copy-kernel"), ("experiment", "bound")} <= set(update.rebuilt)
    assert ("home", "") not in update.rebuilt and ("path", "starter") not in update.rebuilt
    assert_same_as_full_build(live)


def test_gpu_name_edit_rebuilds_every_footer(live: LiveSite, sample: Path) -> None:
    results = sample / "kernels/results/test-gpu.json"
    data = json.loads(results.read_text())
    for run in data["runs"].values():
        run["provenance"]["gpu_name"] += " (edited)"
    results.write_text(json.dumps(data, indent=2))
    update = live.apply([results])
    assert update.ok
    assert {("home", ""), ("course", "demo")} <= set(update.rebuilt)
    assert_same_as_full_build(live)


def test_error_keeps_last_good_pages_and_recovers(live: LiveSite, sample: Path) -> None:
    before = dict(live.files)
    bad = change(live, sample, "content/courses/demo/capsules/bandwidth.md",
                 "access: free", "access: fre")
    assert not bad.ok and live.files == before
    assert [d.format() for d in live.errors] == [
        "content/courses/demo/capsules/bandwidth.md:4:9: error[access.unknown-tier]: "
        "no access tier 'fre'; did you mean 'free'?"]
    good = change(live, sample, "content/courses/demo/capsules/bandwidth.md",
                  "access: fre", "access: free")
    assert good.ok and live.errors == []
    assert_same_as_full_build(live)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8")


def test_served_pages_reload_and_show_errors(sample: Path, tmp_path: Path) -> None:
    server = Server(sample, TEMPLATES, "member", port=0, step_ms=20)
    server.start()
    try:
        status, page = _get(server.url + "courses/demo/bandwidth/")
        assert status == 200 and 'src="/__curriculum/live.js"' in page
        assert "curriculum-overlay" not in page
        assert "<script>" not in page, "the reload script must not be inline"
        assert _get(server.url + "__curriculum/live.js")[0] == 200
        assert _get(server.url + "no/such/page.html")[0] == 404

        box: dict[str, Any] = {}
        version = server.site.version
        waiter = threading.Thread(target=lambda: box.update(news=json.loads(_get(
            f"{server.url}__curriculum/wait?v={version}&timeout=20")[1])))
        waiter.start()
        time.sleep(0.2)
        edit(sample, "content/courses/demo/capsules/bandwidth.md", "summary: How many",
             "summary: [How many")
        waiter.join(timeout=30)
        errors = box["news"]["errors"]
        assert errors and errors[0]["file"] == "content/courses/demo/capsules/bandwidth.md"
        assert errors[0]["line"] == 7 and errors[0]["code"] == "yaml.syntax"
        status, page = _get(server.url + "courses/demo/bandwidth/")
        assert status == 200 and 'class="curriculum-overlay"' in page
        assert "content/courses/demo/capsules/bandwidth.md:7:" in page
        assert "Bandwidth in numbers" in page, "the last good page stays served"

        edit(sample, "content/courses/demo/capsules/bandwidth.md", "summary: [How many",
             "summary: How many")
        deadline = time.monotonic() + 20
        while server.site.errors and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "curriculum-overlay" not in _get(server.url + "courses/demo/bandwidth/")[1]
    finally:
        server.stop()


def test_build_output_has_no_live_reload(sample: Path, tmp_path: Path) -> None:
    build(sample, out_dir=tmp_path / "out", templates=TEMPLATES)
    for path in (tmp_path / "out").rglob("*.html"):
        assert "__curriculum" not in path.read_text(), path
