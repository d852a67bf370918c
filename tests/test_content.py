"""The shipped course builds cleanly: both editions, --strict, no warnings."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO

from curriculum.build import build


def test_shipped_content_builds_strict(tmp_path: Path) -> None:
    result = build(REPO, out_dir=tmp_path, strict=True)
    assert result.diagnostics.items == []
    assert set(result.outputs) == {"public", "member"}
    catalog = result.catalog
    assert catalog is not None
    path = catalog.paths["gpu-kernels"]
    assert len(path.meta.steps) == 8
    ready = [c for c in catalog.capsules.values() if not c.draft]
    assert {c.access for c in ready} >= {"free", "premium"}
    assert any(c.draft for c in catalog.capsules.values())
    assert catalog.ladder is not None
    assert [m.id for m in catalog.ladder.modules] == ["M00", "M01"]


def test_public_pages_of_premium_capsules_show_the_preview_only(tmp_path: Path) -> None:
    result = build(REPO, out_dir=tmp_path, editions=["public"])
    catalog = result.catalog
    assert catalog is not None
    for cap in catalog.capsules.values():
        if cap.draft or cap.access == "free" or cap.rest is None:
            continue
        page = (tmp_path / "public" / "courses" / cap.course / cap.id / "index.html").read_text()
        assert cap.meta.title in page
        assert "is for Members" in page or "locked" in page
