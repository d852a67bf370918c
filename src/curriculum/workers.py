"""The processes a build forks beside its own: how many (`CURRICULUM_JOBS`), whether this
process may fork at all, and the one that parses capsule bodies ahead of validation.

Parsing is most of validating a large course and needs nothing from the rest of the
project, so a second process parses the bodies of the later capsule files (`ParseAhead`)
while the building process loads and validates; `parse_body` takes each from its batch
(`bodies.parsed_elsewhere`). This module imports only what parsing needs: `curriculum
build` starts that process first, before the building process imports the models, the
renderer and the checks (about half a second at start-up that the second core would
otherwise spend idle).
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import multiprocessing
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from curriculum.bodies import Batch, parse_capsule_files
from curriculum.errors import UsageError
from curriculum.markdown import highlight_files
from curriculum.write import memory_folder


def build_jobs() -> int:
    """How many editions to build at once: CURRICULUM_JOBS, else one per CPU core."""
    raw = os.environ.get("CURRICULUM_JOBS", "")
    if raw:
        try:
            return max(1, int(raw))
        except ValueError as exc:
            raise UsageError(f"CURRICULUM_JOBS={raw!r} is not a whole number") from exc
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def can_fork() -> bool:
    """Whether workers may be forked: the system can, and this process runs no other thread
    (a thread holding a lock at the fork would leave that lock held in the worker for good;
    a caller with threads, such as a test runner driving a browser, builds in one process)."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


@contextlib.contextmanager
def forked(workers: int, initializer: Callable[[], Any] | None = None
           ) -> Iterator[ProcessPoolExecutor | None]:
    """A pool of forked workers beside this process, or None where builds run in one
    process (fewer than one worker asked for, or `can_fork` says no)."""
    if workers < 1 or not can_fork():
        yield None
        return
    with ProcessPoolExecutor(max_workers=workers, initializer=initializer,
                             mp_context=multiprocessing.get_context("fork")) as pool:
        try:
            yield pool
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)  # a batch not yet begun: drop it
            raise


def scratch_folder(stack: contextlib.ExitStack, prefix: str) -> str | None:
    """A folder in memory where the system has one (else the temporary folder), removed when
    `stack` closes; None where none can be made."""
    try:
        return stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix,
                                                               dir=memory_folder()))
    except OSError:
        return None


# The second process takes the later 70% of the capsule files, and lints them too: the
# building process imports and loads the project before it parses, and checks every body,
# and taking a body parsed and linted elsewhere costs it about a tenth of parsing it. The
# batches let the building process take the first ones while the second parses the last.
PARSE_ELSEWHERE_FROM = 200  # capsule files; below this a second process costs more
PARSE_BATCHES = 4
PARSE_HERE = 0.3  # the share of the capsule files, first in load order, parsed in place
# Highlighting a course's code is as dear as parsing its prose where the last build's store
# has none of it (1.7 s of CPU for 1,000 blocks of 15 lines): the building process, done
# validating, highlights the first half of the files while the second process does the rest.
HIGHLIGHT_HERE = 0.5


class ParseAhead:
    """A second process that parses the later capsule files' bodies (`batches`, for
    `bodies.parsed_elsewhere`) and then, if asked to, highlights the code blocks of the
    later half of the content's files (`highlighted`); nothing when there is no second core
    or fork, or too few capsules.

    Use it as a context manager, or `close()` it: that waits for work already begun and
    drops work not yet begun. Validation takes the batches as it reaches them."""

    def __init__(self, root: Path, highlight: bool = True) -> None:
        self.root = root.resolve()
        self.batches: list[Batch] = []
        self._stack = contextlib.ExitStack()
        self._highlighting: Future[dict[tuple[str, str], str]] | None = None
        self._highlight_here: list[Path] = []
        content = self.root / "content"
        workers = min(1, build_jobs() - 1)  # a bad CURRICULUM_JOBS stops it before it starts
        if not content.is_dir() or workers < 1 or not can_fork():
            return
        try:
            # The folder first: on closing, the pool is shut down (waiting for what runs)
            # before the folder it writes into is removed.
            scratch = scratch_folder(self._stack, "curriculum-parsed-")
            side = self._stack.enter_context(forked(workers, gc.disable))
            if side is not None and scratch is not None:
                self.batches = [_parsed_batch(side, self.root, batch, f"{scratch}/{i}")
                                for i, batch in enumerate(later_capsules(self.root))]
            if side is not None and highlight:
                files = sorted(content.rglob("*.md"))
                cut = int(len(files) * HIGHLIGHT_HERE)
                self._highlight_here = files[:cut]
                self._highlighting = side.submit(_highlight, self.root, files[cut:])
        except BaseException:
            self._stack.close()
            raise

    def highlighted(self) -> dict[tuple[str, str], str]:
        """Every code block of the content highlighted, by (code, language): those of the
        first `HIGHLIGHT_HERE` of the files by this process, now, and the rest by the
        second. What failed either side is left out (the renderer highlights it itself)."""
        if self._highlighting is None:
            return {}
        here: dict[tuple[str, str], str] = {}
        with contextlib.suppress(OSError, ValueError):  # a file gone or changed since
            here = highlight_files(self._highlight_here)
        if self._highlighting.exception() is not None:
            return here
        return {**here, **self._highlighting.result()}

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> ParseAhead:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stack.__exit__(kind, exc, tb)


def later_capsules(root: Path) -> list[list[Path]]:
    """The capsule files after the first `PARSE_HERE` of them, in the order `load` reads
    them (courses, then files, by name), in `PARSE_BATCHES` batches; none below
    `PARSE_ELSEWHERE_FROM` files."""
    files = [md for course in sorted((root / "content" / "courses").glob("*"))
             for md in sorted((course / "capsules").glob("*.md"))]
    if len(files) < PARSE_ELSEWHERE_FROM:
        return []
    later = files[int(len(files) * PARSE_HERE):]
    size = -(-len(later) // PARSE_BATCHES)
    return [later[i:i + size] for i in range(0, len(later), size)]


def _parsed_batch(side: ProcessPoolExecutor, root: Path, batch: list[Path], dest: str
                  ) -> Batch:
    """One batch of `later_capsules` parsed by the second process, as `parsed_elsewhere`
    takes it: the files, and a function that waits for their bodies.

    The bodies come back through a file, not the pool's pipe: a thread of this process
    reads the pipe in pieces of 64 KB, each only once the validating thread lets go of
    the interpreter, which held the second process up for a tenth of a second and more
    per batch of a few megabytes."""
    future = side.submit(_parse_to_file, root, batch, dest)

    def result() -> dict[str, bytes]:
        future.result()  # what went wrong there is raised here
        with open(dest, "rb") as f:
            found: dict[str, bytes] = marshal.loads(f.read())
        return found

    return [p.relative_to(root).as_posix() for p in batch], result


def _parse_to_file(root: Path, batch: list[Path], dest: str) -> None:
    with open(dest, "wb") as f:
        f.write(marshal.dumps(parse_capsule_files(root, batch)))


def _highlight(root: Path, files: list[Path]) -> dict[tuple[str, str], str]:
    from curriculum import store

    store.load(root)  # what the last build highlighted: forked before the build loaded it
    return highlight_files(files)
