"""The shipped course builds cleanly: every edition, --strict, no warnings, no drafts."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO
from markupsafe import escape

from curriculum.build import build


def test_shipped_content_builds_strict(tmp_path: Path) -> None:
    result = build(REPO, out_dir=tmp_path, strict=True)
    assert result.diagnostics.items == []
    catalog = result.catalog
    assert catalog is not None
    assert set(result.outputs) == {e.id for e in catalog.site.editions}
    assert {"public", "account", "member"} <= set(result.outputs)
    assert not [c.id for c in catalog.capsules.values() if c.draft], "a course part holds a draft"
    assert {c.access for c in catalog.capsules.values()} >= {"free", "premium"}
    assert {q.meta.access for q in catalog.questions.values()} == {"free", "account", "premium"}
    assert len(catalog.questions) >= 25
    assert len(catalog.paths) >= 3
    assert catalog.ladder is not None
    drills = [d for m in catalog.ladder.modules for d in m.drills]
    assert len(drills) >= 24
    assert [m.id for m in catalog.ladder.modules][:6] == ["M00", "M01", "M02", "M03", "M04", "M05"]
    assert all(d.lesson in catalog.capsules for d in drills)


def test_public_pages_of_premium_capsules_show_the_preview_only(tmp_path: Path) -> None:
    result = build(REPO, out_dir=tmp_path, editions=["public"])
    catalog = result.catalog
    assert catalog is not None
    for cap in catalog.capsules.values():
        if cap.draft or cap.access == catalog.lowest_tier or cap.rest is None:
            continue
        page = (tmp_path / "public" / "courses" / cap.course / cap.id / "index.html").read_text()
        assert str(escape(cap.meta.title)) in page
        assert 'class="locked"' in page, f"{cap.id}: no locked notice in the public edition"
