"""A measured data file that is not a results file (a decode-step trace, the capstone
decoder's data): where it lies, reading it once per change, and the hash charts cache by.

Such a file lives in `kernels/<folder>/<name>`; callers pass either the project root or
its `kernels/` folder.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any


def find(root: Path, folder: str, name: str) -> Path:
    """The file under `root`, which is the project root or its kernels/ folder."""
    for base in (root / "kernels" / folder, root / folder):
        if (base / name).is_file():
            return base / name
    return root / "kernels" / folder / name


@lru_cache(maxsize=8)
def _read(path: str, mtime_ns: int) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def read(path: Path, missing: str) -> Any:
    """The JSON at `path`, read again only when the file changes; ValueError when it is
    absent (with `missing`, the command that writes it) or not JSON."""
    try:
        return _read(str(path), path.stat().st_mtime_ns)
    except OSError:
        raise ValueError(f"no {missing}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None


def digest(path: Path | None) -> str:
    """sha256 of the file's bytes, 'absent' without it, 'no-root' without a project."""
    if path is None:
        return "no-root"
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "absent"
