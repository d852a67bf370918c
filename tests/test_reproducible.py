"""Reproducible builds of the shipped content: with SOURCE_DATE_EPOCH set, two builds
in different folders, time zones and hash seeds are byte-identical, file times included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

EPOCH = "1790000000"


def _build(out: Path, tz: str, seed: str) -> None:
    env = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH, "TZ": tz, "PYTHONHASHSEED": seed,
           "LC_ALL": "C.UTF-8"}
    # The member edition renders every page in full; the sample site's double-build test
    # in test_build.py covers both editions, so one edition keeps this test short.
    result = subprocess.run([sys.executable, "-m", "curriculum", "--root", str(REPO), "build",
                             "--edition", "member", "--out", str(out)], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_shipped_content_builds_byte_identical(tmp_path: Path) -> None:
    _build(tmp_path / "one" / "site", "UTC", "0")
    _build(tmp_path / "two" / "elsewhere", "America/St_Johns", "31337")
    a, b = _tree(tmp_path / "one" / "site"), _tree(tmp_path / "two" / "elsewhere")
    assert a.keys() == b.keys() and len(a) > 20
    assert [k for k in a if a[k] != b[k]] == []
    for rel in a:
        assert int((tmp_path / "one" / "site" / rel).stat().st_mtime) == int(EPOCH), rel
    assert not any(str(tmp_path).encode() in data for data in a.values()), \
        "a page names the folder it was built in"
