"""Shared fixtures: the sample project, copied fresh for each test."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from curriculum.bench.api import Version
    from curriculum.bench.suites import LoadedSuite

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "tests" / "fixtures" / "sample"
TEMPLATES = REPO / "templates"
# A kernel entry point as the suites' .cu files declare them; group 1 is its name.
KERNEL_ENTRY = re.compile(r'extern "C" __global__ void(?:\s+__launch_bounds__\([^)]*\))?\s+(\w+)\s*\(')


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


def suite_module(topic: str) -> ModuleType:
    """A topic's suite.py as the bench loads (and checks) it, for its helpers and constants."""
    from curriculum.bench.suites import load_suite

    load_suite(REPO / "kernels" / topic)
    return sys.modules[f"curriculum_suite_{topic}"]


def version_named(loaded: LoadedSuite, stem: str) -> Version:
    """A loaded suite's version by its file stem (`03_decode`)."""
    return next(v for v in loaded.versions if v.stem == stem)


def search_fragments(edition: Path) -> dict[str, dict]:
    """Each page of an edition's search index, its Pagefind fragment decoded, by URL: from
    the edition's own bundle and every bundle its entry file names (a large edition's
    further bundles, the bundle of pages every edition shows alike)."""
    first = edition / "static" / "pagefind"
    entry = json.loads((first / "pagefind-entry.json").read_text(encoding="utf-8"))
    out: dict[str, dict] = {}
    for folder in [first, *((first / extra).resolve() for extra in entry.get("curriculum_bundles", []))]:
        for path in sorted((folder / "fragment").iterdir()):
            data = gzip.decompress(path.read_bytes())
            assert data.startswith(b"pagefind_dcd"), path
            record = json.loads(data[len(b"pagefind_dcd"):])
            assert record["url"] not in out, f"{record['url']} is in two bundles"
            out[record["url"]] = record
    return out
