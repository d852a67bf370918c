"""The output model every stage shares: where each page goes, what an edition holds,
and the folder its files stream into.

`render`, `pages`, `indexes`, `index` and `epub` all import this module and none of
them imports another for these names, so they form no import cycle.

An edition's files either stay in memory (`serve`, and a build that writes nothing)
or go straight to a staging folder as each one is made (`StagedFiles`): a page is on
disk as soon as it renders, and the build holds only its path. Readers of the files
(the link and leak checks, the search index, the EPUB's media) read them back one
at a time.
"""

from __future__ import annotations

import functools
import os
import posixpath
import zlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KIND_LABELS = {"capsule": "Capsule", "question": "Worked question", "experiment": "Experiment",
               "course": "Course", "path": "Learning path", "syllabus": "Syllabus",
               "ladder": "Practice ladder", "home": "Home", "review": "Review",
               "placement": "Placement check", "join": "Membership"}

JOIN_PAGE = "join/index.html"  # what each tier gives and where to get it


def epub_path(course_id: str, edition_id: str) -> str:
    """Where a course's EPUB lives in an edition, relative to the site root."""
    return f"courses/{course_id}/{course_id}-{edition_id}.epub"


def page_url(kind: str, item_id: str, catalog: Any) -> str:
    """Output path of a content page, relative to the site root."""
    if kind == "capsule":
        return f"courses/{catalog.capsules[item_id].course}/{item_id}/index.html"
    return {"question": f"questions/{item_id}/index.html",
            "experiment": f"experiments/{item_id}/index.html",
            "path": f"paths/{item_id}/index.html",
            "course": f"courses/{item_id}/index.html",
            "syllabus": f"courses/{item_id}/syllabus/index.html"}[kind]


def relative(from_page: str, to_path: str) -> str:
    fragment = ""
    if "#" in to_path:
        to_path, fragment = to_path.split("#", 1)
        fragment = "#" + fragment
    if not to_path:
        return fragment
    return relpath(to_path, posixpath.dirname(from_page)) + fragment


def relpath(to_path: str, from_dir: str) -> str:
    """`posixpath.relpath` for the site's own paths (relative, normalised), without its
    two trips to the working folder per call; anything else goes to `relpath`."""
    target, start = _parts(to_path), _parts(from_dir)
    if target is None or start is None:
        return posixpath.relpath(to_path, from_dir or ".")
    common = 0
    for a, b in zip(target, start, strict=False):
        if a != b:
            break
        common += 1
    parts = [".."] * (len(start) - common) + list(target[common:])
    return "/".join(parts) or "."


@functools.lru_cache(maxsize=4096)
def _parts(path: str) -> tuple[str, ...] | None:
    """A site path's folders and name, or None for a path `relpath` leaves to posixpath
    (absolute, or with `.` or `..`). A page's links share its folder and most targets
    (the stylesheets, the home page), so the split is looked up, not made, for most."""
    parts = tuple(p for p in path.split("/") if p)
    if path.startswith("/") or "." in parts or ".." in parts:
        return None
    return parts


@dataclass(frozen=True)
class Chapter:
    """One capsule as the edition shows it, kept for the course's EPUB.

    `html` is the page's body fragment (held compressed when `of` is told to pack it: a
    large course keeps one per capsule until its book is made); its relative links
    resolve against `path`.
    """

    course: str
    part: str
    capsule: str
    title: str
    summary: str
    path: str
    packed: bytes | str  # str: not compressed
    locked: bool

    @classmethod
    def of(cls, *, html: str, pack: bool = True, **fields: Any) -> Chapter:
        return cls(packed=zlib.compress(html.encode("utf-8"), 1) if pack else html, **fields)

    @property
    def html(self) -> str:
        if isinstance(self.packed, str):
            return self.packed
        return zlib.decompress(self.packed).decode("utf-8")


class StagedFiles(MutableMapping[str, bytes]):
    """An edition's files on disk: each one is written into `folder` when it is set, and
    read back when asked for; in memory there is only the list of paths.

    `mtime`, when given, stamps every file (SOURCE_DATE_EPOCH), so two builds of the
    same sources are byte- and stamp-identical.
    """

    def __init__(self, folder: Path, mtime: int | None = None) -> None:
        self.folder = folder
        self.mtime = mtime
        self._paths: dict[str, None] = {}
        self._dirs: set[str] = {""}

    def __setitem__(self, path: str, data: bytes) -> None:
        dest = self._dest(path)
        if path in self._paths:
            dest.unlink()  # it may be a link (`link`): never write through to another copy
        with open(dest, "wb") as f:
            f.write(data)
        if self.mtime is not None:
            os.utime(dest, (self.mtime, self.mtime))
        self._paths[path] = None

    def link(self, path: str, source: Path) -> bool:
        """Give `path` the file `source` as a hard link (another edition's copy of the same
        bytes: no second copy on disk, nor a new inode to allocate); False where the system
        will not link them, and nothing is written."""
        try:
            os.link(source, self._dest(path))
        except OSError:
            return False
        self._paths[path] = None
        return True

    def _dest(self, path: str) -> Path:
        """Where `path` goes, its folder made if this build has not made it yet."""
        folder = posixpath.dirname(path)
        if folder not in self._dirs:
            (self.folder / folder).mkdir(parents=True, exist_ok=True)
            while folder not in self._dirs:
                self._dirs.add(folder)
                folder = posixpath.dirname(folder)
        return self.folder / path

    def __getitem__(self, path: str) -> bytes:
        if path not in self._paths:
            raise KeyError(path)
        return (self.folder / path).read_bytes()

    def __delitem__(self, path: str) -> None:
        del self._paths[path]
        (self.folder / path).unlink()

    def __contains__(self, path: object) -> bool:
        return path in self._paths

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._paths))

    def __len__(self) -> int:
        return len(self._paths)

    def moved(self, folder: Path) -> None:
        """The files now live in `folder` (the staging folder was swapped in there)."""
        self.folder = folder


@dataclass
class Output:
    """Everything one edition writes: path -> bytes, in memory or streamed to a folder."""

    files: MutableMapping[str, bytes] = field(default_factory=dict)
    pages: list[dict[str, Any]] = field(default_factory=list)  # for sitemap, feed, search
    chapters: list[Chapter] = field(default_factory=list)  # for the EPUB of each course
    edition: str = ""

    def add(self, path: str, data: str | bytes) -> None:
        self.files[path] = data.encode("utf-8") if isinstance(data, str) else data
