"""Which measured figures no longer match their sources: one rule for bench and build.

A case's **fingerprint** is the sha256 of everything that decides its figure:

- its `.cu` file (or `.py` file, for a version written in Python), line
  endings normalised;
- every file a `.cu` file includes with `#include "..."`, recursively, resolved
  relative to the including file (a missing include counts by its name);
- its topic's `suite.py`, as a whole: any byte changed (inputs, shapes, work
  model, tolerance, baselines, a comment) changes every figure of the topic;
- the `suite.py` of every topic that suite reuses through
  `suite_module("<topic>", __file__)` (its inputs, reference and baselines);
- `HARNESS_VERSION`, bumped when the harness changes what it measures or
  records.

`bench` skips a case whose recorded fingerprint equals the current one; the
build marks a figure stale (an error under `--strict`) when it differs. Both
call `stale_reason`. Imports stay at pydantic level: the build calls this on
machines without a GPU, and nothing here imports a suite.

Cases migrated from results schema 1 have no fingerprint; for them the rule
falls back to what schema 1 hashed (the `.cu` and `suite.py`), so a site built
from a schema 1 file is not all stale, while `bench` re-measures them (it
skips only cases that carry a fingerprint).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from curriculum.results import CaseResult, ResultsFile, source_hash

# Bump when the harness changes what a recorded case means (timing, baselines, fields).
HARNESS_VERSION = 2

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
# A suite's use of another topic's suite (`suite_module("softmax", __file__)`).
USES = re.compile(r"""\bsuite_module\(\s*["']([A-Za-z0-9_.-]+)["']""")
# The kinds of version file, in the order a stem is looked up.
VERSION_SUFFIXES = (".cu", ".py")

StaleReason = Literal[
    "source-changed",
    "source-missing",
    "suite-changed",
    "suite-missing",
    "include-changed",
    "harness-changed",
]


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes().replace(b"\r\n", b"\n")
    except OSError:
        return None


def includes(cu: Path) -> list[Path]:
    """Every file `cu` includes with `#include "..."`, recursively, in first-seen order.

    Each name is resolved relative to the file that includes it; a file that
    does not exist is listed (its absence is part of the fingerprint) but not
    followed. Angle-bracket includes are the toolkit's and are not listed.
    """
    seen: list[Path] = []
    todo = [cu]
    while todo:
        current = todo.pop(0)
        data = _read(current)
        if data is None:
            continue
        for name in INCLUDE.findall(data.decode("utf-8", errors="replace")):
            target = (current.parent / name).resolve()
            if target not in seen and target != cu.resolve():
                seen.append(target)
                todo.append(target)
    return seen


def version_file(topic_dir: Path, version: str) -> Path:
    """The source of a version stem: its `.cu` file, else its `.py` file; the `.cu`
    path when neither exists (what a missing source is reported as)."""
    for suffix in VERSION_SUFFIXES:
        path = topic_dir / f"{version}{suffix}"
        if path.is_file():
            return path
    return topic_dir / f"{version}.cu"


def used_topics(suite_source: bytes) -> list[str]:
    """The topics a suite reuses through `suite_module`, in first-seen order."""
    found: list[str] = []
    for topic in USES.findall(suite_source.decode("utf-8", errors="replace")):
        if topic not in found:
            found.append(topic)
    return found


def fingerprint(root: Path, topic: str, version: str) -> str | None:
    """sha256 of a case's inputs (see the module docstring), or None if its source is gone.

    `version` is the file stem, e.g. '02_copy_vec4'.
    """
    topic_dir = root / "kernels" / topic
    source = version_file(topic_dir, version)
    data = _read(source)
    if data is None:
        return None
    h = hashlib.sha256()
    h.update(f"harness {HARNESS_VERSION}\n".encode())
    if source.suffix == ".py":
        h.update(b"py\n" + hashlib.sha256(data).hexdigest().encode() + b"\n")
    else:
        h.update(b"cu\n" + hashlib.sha256(data).hexdigest().encode() + b"\n")
    for inc in includes(source) if source.suffix == ".cu" else []:
        data = _read(inc)
        # Named relative to the topic folder, also when it lies outside it (another
        # topic's kernel): an absolute path would tie the figure to one checkout.
        name = Path(os.path.relpath(inc, topic_dir.resolve())).as_posix()
        digest = hashlib.sha256(data).hexdigest() if data is not None else "missing"
        h.update(f"include {name} {digest}\n".encode())
    suite = _read(topic_dir / "suite.py")
    suite_digest = hashlib.sha256(suite).hexdigest() if suite is not None else "missing"
    h.update(f"suite {suite_digest}\n".encode())
    for other in used_topics(suite) if suite is not None else []:
        used = _read(root / "kernels" / other / "suite.py")
        digest = hashlib.sha256(used).hexdigest() if used is not None else "missing"
        h.update(f"uses {other} {digest}\n".encode())
    return h.hexdigest()


@dataclass
class Fingerprints:
    """Current fingerprints and file hashes under one root, each computed once."""

    root: Path
    _prints: dict[tuple[str, str], str | None] = field(default_factory=dict)
    _hashes: dict[Path, str | None] = field(default_factory=dict)

    def of(self, topic: str, version: str) -> str | None:
        key = (topic, version)
        if key not in self._prints:
            self._prints[key] = fingerprint(self.root, topic, version)
        return self._prints[key]

    def hash_of(self, path: Path) -> str | None:
        if path not in self._hashes:
            self._hashes[path] = source_hash(path) if path.is_file() else None
        return self._hashes[path]


def stale_reason(fp: Fingerprints, case: CaseResult) -> tuple[StaleReason, Path] | None:
    """Why a recorded case no longer matches the sources under `fp.root` (None: fresh).

    The one staleness rule: `bench` skips a case only when this is None and the
    case has a fingerprint; the build marks a figure stale when it is not None.
    """
    topic_dir = fp.root / "kernels" / case.topic
    cu = version_file(topic_dir, case.version)
    suite = topic_dir / "suite.py"
    cu_hash, suite_hash = fp.hash_of(cu), fp.hash_of(suite)
    if cu_hash is None:
        return "source-missing", cu
    if cu_hash != case.source_hash:
        return "source-changed", cu
    if suite_hash is None:
        return "suite-missing", suite
    if suite_hash != case.suite_hash:
        return "suite-changed", suite
    if case.fingerprint is None:  # schema 1: the .cu and suite.py were all it hashed
        return None
    if fp.of(case.topic, case.version) != case.fingerprint:
        if case.harness is not None and case.harness != HARNESS_VERSION:
            return "harness-changed", cu
        return "include-changed", cu
    return None


@dataclass(frozen=True)
class StaleCase:
    """One recorded case whose inputs no longer match what was measured."""

    id: str
    shape_label: str
    reason: StaleReason
    path: Path

    def message(self) -> str:
        return f"{self.id} @ {self.shape_label}: {describe(self.reason)} ({self.path}); " \
            "re-run `curriculum bench`"


def describe(reason: StaleReason) -> str:
    return {
        "source-changed": "kernel source changed since it was measured",
        "source-missing": "kernel source no longer exists",
        "suite-changed": "suite.py changed since it was measured",
        "suite-missing": "suite.py no longer exists",
        "include-changed": "a file the kernel includes (or a suite its suite reuses) changed "
        "since it was measured",
        "harness-changed": f"measured by an older harness (now version {HARNESS_VERSION})",
    }[reason]


def stale_cases(root: Path, results: ResultsFile) -> list[StaleCase]:
    """Every case of `results` whose inputs under `root/kernels` differ."""
    fp = Fingerprints(root)
    stale = []
    for case in results.cases:
        found = stale_reason(fp, case)
        if found is not None:
            stale.append(StaleCase(case.id, case.shape_label, found[0], found[1]))
    return stale
