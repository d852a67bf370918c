"""Confinement: which files a page may pull into the site.

A page pulls in files by path: an image in Markdown (`![alt](figures/x.svg)`),
the site's own static files, and the source files themselves (a capsule file
that is a symlink to a file elsewhere would publish that file). Every such path goes through `confine`, and
every read through `read_asset`, so one place decides what may be published.
A path is published only when, after following every symlink, it names a
regular file inside the folder it must stay in (`content/` for what a page
cites), no larger than `max_asset_bytes` of `content/site.yaml`.

Each refusal has a stable code:

- `asset.absolute`: the path starts with `/` (or `\\`), so it names a file
  anywhere on the disk;
- `asset.home`: the path starts with `~`;
- `asset.escape`: `..` climbs out of the content folder;
- `asset.symlink`: the path, or a folder on the way, is a symlink to a place
  outside the content folder;
- `asset.device`: a device file (or socket), as `/dev/null` or `/dev/zero`;
- `asset.fifo`: a named pipe, which would block the build on reading;
- `asset.directory`: a folder, not a file;
- `asset.too-large`: bigger than the size limit;
- `image.missing`: nothing at that path.

`read_asset` opens the file again without following a last symlink and checks
what it opened, so a file swapped between the check and the read is refused.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

DEFAULT_MAX_BYTES = 5 * 1024 * 1024


@dataclass(frozen=True)
class Asset:
    """A confined file: its path as resolved, and its size when checked."""

    path: Path
    size: int


@dataclass(frozen=True)
class Refused:
    """Why a path may not be published."""

    code: str
    message: str
    hint: str | None = None


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


Problem = tuple[str, str, str | None]  # code, message, hint


def confine(ref: str, base: Path, within: Path, max_bytes: int = DEFAULT_MAX_BYTES,
            what: str = "image file") -> Asset | Refused:
    """The file that `ref`, written in a file of folder `base`, names, if it may be published:
    a regular file inside `within` (after every symlink), of at most `max_bytes`.

    `ref` is a path as written in a page (percent-escapes are decoded, as a browser
    would); `base` and `within` are folders on disk; `what` names the file in messages.
    """
    name = unquote(ref).replace("\\", "/")
    shown = f"'{ref}'"
    within = Path(os.path.abspath(within))
    lexical = Path(os.path.normpath(os.path.join(os.path.abspath(base), name)))
    problem = _written(name, shown, lexical, within)
    if problem is not None:
        return Refused(*problem)
    try:
        real = lexical.resolve(strict=True)
        info = os.stat(real)
    except FileNotFoundError:
        return Refused("image.missing", f"{what} {shown} does not exist")
    except (OSError, RuntimeError) as exc:  # a symlink loop, a folder that cannot be read
        return Refused("image.missing", f"{what} {shown} cannot be read: {exc}")
    problem = _kind(info, shown) or _placed(real, info, shown, within.resolve(), max_bytes)
    if problem is not None:
        return Refused(*problem)
    return Asset(real, info.st_size)


def _written(name: str, shown: str, lexical: Path, within: Path) -> Problem | None:
    """What is wrong with the path as written, before looking at the disk."""
    if name.startswith("/") or (len(name) > 1 and name[1] == ":" and name[0].isalpha()):
        return ("asset.absolute", f"{shown} is an absolute path; the site may only publish "
                "files of the content folder", "write the path relative to the Markdown file")
    if name.startswith("~"):
        return ("asset.home", f"{shown} names a file in a home folder; the site may only "
                "publish files of the content folder",
                "copy the file into the content folder and link it relatively")
    if not _within(lexical, within):
        return ("asset.escape", f"{shown} climbs out of the content folder with '..'",
                "keep the file inside the content folder")
    return None


def _kind(info: os.stat_result, shown: str) -> Problem | None:
    """What is wrong with the kind of file found (after following symlinks)."""
    mode = info.st_mode
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "asset.directory", f"{shown} is a folder, not a file", "name the file inside it"
    if stat.S_ISFIFO(mode):
        return ("asset.fifo", f"{shown} is a named pipe, not a file",
                "replace it with a regular file")
    return ("asset.device", f"{shown} is a device file or socket, not a file",
            "replace it with a regular file")


def _placed(real: Path, info: os.stat_result, shown: str, real_within: Path,
            max_bytes: int) -> Problem | None:
    """What is wrong with where the file really is, and with its size."""
    if not _within(real, real_within):
        return ("asset.symlink", f"{shown} is a symlink (or lies under one) to a file outside "
                "the content folder", "copy the file into the content folder instead of linking to it")
    if info.st_size > max_bytes:
        return ("asset.too-large", f"{shown} is {info.st_size} bytes, over the limit of "
                f"{max_bytes} (max_asset_bytes in content/site.yaml)",
                "make the file smaller, or raise the limit")
    return None


def read_asset(asset: Asset, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of a file `confine` accepted; raises `OSError` when what is there now is no
    longer a regular file of at most `max_bytes` (swapped after the check)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(asset.path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            raise OSError(f"{asset.path} changed since it was checked")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise OSError(f"{asset.path} grew since it was checked")
    return data
