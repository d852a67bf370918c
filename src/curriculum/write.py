"""Stage 5, `write`: put an edition on disk, replacing the previous one at once.

Files go into a fresh temporary folder beside the target (`new_staging`; a build
streams each page into it as it renders, `stage_tree` writes a map of files), which
then replaces the target by renames (`swap_in`). A failure before the swap
leaves the previous site as it was; no file of an earlier build survives in the
new one. Editions built side by side stage their folders first, and are swapped
in only once every one of them has passed its checks.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def new_staging(target: Path) -> Path:
    """A new, empty staging folder beside `target`, for files streamed in one by one."""
    target = target.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=target.parent))
    staging.chmod(0o755)
    return staging


def stage_tree(files: dict[str, bytes], target: Path, mtime: int | None = None) -> Path:
    """Write `files` (relative POSIX path -> bytes) into a new folder beside `target`."""
    staging = new_staging(target)
    try:
        made: set[Path] = {staging}
        for rel_path in sorted(files):
            dest = staging / rel_path
            if dest.parent not in made:
                dest.parent.mkdir(parents=True, exist_ok=True)
                made.add(dest.parent)
            dest.write_bytes(files[rel_path])
            if mtime is not None:
                os.utime(dest, (mtime, mtime))
    except BaseException:
        discard(staging)
        raise
    return staging


def swap_in(staging: Path, target: Path) -> None:
    """Replace `target` with the staged folder, by renames."""
    target = target.resolve()
    old = None
    try:
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            old.rmdir()
            target.rename(old)
        staging.rename(target)
    except BaseException:
        if old is not None and not target.exists():
            old.rename(target)  # put the previous site back
        discard(staging)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def discard(staging: Path) -> None:
    """Remove a staged folder that will not be swapped in."""
    shutil.rmtree(staging, ignore_errors=True)


def write_tree(files: dict[str, bytes], target: Path, mtime: int | None = None) -> None:
    """Write `files` as the folder `target`: stage, then swap in."""
    swap_in(stage_tree(files, target, mtime), target)


def memory_folder() -> str | None:
    """A memory-backed folder for scratch files where the system has one (/dev/shm on
    Linux), else None (the default temporary folder): Pagefind's copy of the pages and
    its bundle are thousands of small files, written once, read once and removed, which
    on a busy disk cost more than Pagefind's own indexing."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None
