"""Rendered Markdown fragments shared by the processes of one build.

A body renders to the same HTML on the same page in every edition that shows it (see
`Renderer.markdown`). Where the editions are built side by side, each in its own
process, a fragment rendered by one is put in a folder in memory for the others:
`take` returns it if some process has rendered it, `put` publishes one. Most bodies
(every preview, and the whole text of a capsule at the lowest tier) are shown by every
edition, so each is rendered once a build instead of once per edition.

Each fragment is one file named by a hash of what it is rendered from (the body's
file, line and text, and the page), written under a temporary name and renamed, so a
reader sees a whole fragment or none; two processes that render the same one at once
write the same bytes. Its files (images, charts) come with it: the process that takes
it adds them to its own edition.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import zlib

Fragment = tuple[str, dict[str, bytes | str]]  # the HTML, and the files it needs


class SharedFragments:
    """A folder of fragments, made by the build and removed when it ends."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    @staticmethod
    def name(key: tuple[str, int, str, str]) -> str:
        return hashlib.sha1(repr(key).encode("utf-8")).hexdigest()

    def take(self, name: str) -> Fragment | None:
        """The fragment of that name if some process has put it, else None."""
        try:
            with open(os.path.join(self.folder, name), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        html, added = marshal.loads(zlib.decompress(data))
        return html, added

    def has(self, name: str) -> bool:
        return os.path.exists(os.path.join(self.folder, name))

    def put(self, name: str, fragment: Fragment) -> None:
        """Publish a fragment (compressed: a large course's fragments stay in memory
        until the build ends); one that cannot be written is simply rendered again
        by the others."""
        path = os.path.join(self.folder, name)
        part = f"{path}.{os.getpid()}"
        with contextlib.suppress(OSError, ValueError):
            with open(part, "wb") as f:
                f.write(zlib.compress(marshal.dumps(fragment), 1))
            os.replace(part, path)
