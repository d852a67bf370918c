"""Shared fixtures: the sample project, copied fresh for each test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "tests" / "fixtures" / "sample"
TEMPLATES = REPO / "templates"


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """A writable copy of the sample project."""
    dest = tmp_path / "site"
    shutil.copytree(SAMPLE, dest)
    return dest


def edit(root: Path, rel_path: str, old: str, new: str) -> None:
    """Replace exactly one occurrence of `old` in a project file."""
    path = root / rel_path
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {rel_path}"
    path.write_text(text.replace(old, new), encoding="utf-8")
