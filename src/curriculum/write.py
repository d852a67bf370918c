"""Stage 5, `write`: put an edition on disk all at once.

Files go into a fresh temporary folder beside the target, which then replaces
the target by renames. A failure before the swap leaves the previous site as
it was; no file of an earlier build survives in the new one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def write_tree(files: dict[str, bytes], target: Path, mtime: int | None = None) -> None:
    """Write `files` (relative POSIX path -> bytes) as the folder `target`."""
    target = target.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=target.parent))
    try:
        for rel_path in sorted(files):
            dest = staging / rel_path
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(files[rel_path])
            if mtime is not None:
                os.utime(dest, (mtime, mtime))
        staging.chmod(0o755)
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            old.rmdir()
            target.rename(old)
        staging.rename(target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
