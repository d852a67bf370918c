"""The publishing workflow is valid and keeps the member edition off Pages."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))


def test_actionlint_passes() -> None:
    # The test extras install it beside this interpreter, which need not be on PATH.
    beside = Path(sys.executable).parent / "actionlint"
    exe = str(beside) if beside.is_file() else shutil.which("actionlint")
    if exe is None:
        pytest.fail("actionlint is missing: install the test extras (pip install -e '.[test]')")
    result = subprocess.run([exe, *map(str, WORKFLOWS)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_member_edition_never_reaches_pages() -> None:
    text = "\n".join(p.read_text() for p in WORKFLOWS)
    assert "pull_request_target" not in text
    assert "gh-pages" not in text.replace("no gh-pages branch", "")
    pages_uploads = [line for line in text.splitlines() if "path: site/" in line]
    assert "          path: site/public" in pages_uploads
    upload_pages = text.split("actions/upload-pages-artifact")[1].split("- name:")[0]
    assert "site/public" in upload_pages and "member" not in upload_pages
    assert "--strict" in text
