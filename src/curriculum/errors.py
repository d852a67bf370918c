"""Diagnostics and the one exception family of the project.

Every problem is a `Diagnostic` with a location and a stable code. Stages
collect diagnostics instead of raising at the first one; the build raises
`ContentError` once, carrying all of them, and the CLI maps it to exit code 1.

Message format (one line each)::

    paths/gpu.yaml:12:5: error[step.unknown-ref]: no capsule 'onlin-softmax'; did you mean 'online-softmax'?
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True, order=True)
class Loc:
    """A place in a source file: project-relative path, 1-based line and column."""

    path: str
    line: int = 1
    col: int = 1

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"

    def shifted(self, lines: int) -> Loc:
        return Loc(self.path, self.line + lines, self.col)


@dataclass(frozen=True)
class Diagnostic:
    loc: Loc
    code: str
    message: str
    severity: Severity = "error"
    hint: str | None = None

    def format(self) -> str:
        text = f"{self.loc}: {self.severity}[{self.code}]: {self.message}"
        if self.hint:
            text += f"; {self.hint}"
        return text

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.loc.path, self.loc.line, self.loc.col, self.code)


@dataclass
class Diagnostics:
    """An append-only collection of diagnostics for one build."""

    items: list[Diagnostic] = field(default_factory=list)

    def error(self, loc: Loc, code: str, message: str, hint: str | None = None) -> None:
        self.items.append(Diagnostic(loc, code, message, "error", hint))

    def warning(self, loc: Loc, code: str, message: str, hint: str | None = None) -> None:
        self.items.append(Diagnostic(loc, code, message, "warning", hint))

    def extend(self, other: Iterable[Diagnostic]) -> None:
        self.items.extend(other)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "warning"]

    def sorted(self) -> list[Diagnostic]:
        unique = {(d.loc, d.code, d.message, d.severity): d for d in self.items}
        return sorted(unique.values(), key=Diagnostic.sort_key)

    def raise_if_failed(self, strict: bool = False) -> None:
        failing = self.items if strict else self.errors
        if failing:
            raise ContentError(self.sorted(), strict=strict)


class CurriculumError(Exception):
    """Base of every error the CLI reports without a traceback."""

    exit_code = 1


class ContentError(CurriculumError):
    """The content (or results) did not validate; carries every diagnostic."""

    def __init__(self, diagnostics: list[Diagnostic], strict: bool = False) -> None:
        self.diagnostics = diagnostics
        self.strict = strict
        n_err = sum(d.severity == "error" for d in diagnostics)
        n_warn = len(diagnostics) - n_err
        super().__init__(f"{n_err} error(s), {n_warn} warning(s)")


class UsageError(CurriculumError):
    """The command line or the project folder is not usable."""

    exit_code = 2


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """A "did you mean" hint for a misspelt id, or None."""
    close = difflib.get_close_matches(word, sorted(set(candidates)), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None


def rel(path: Path, root: Path) -> str:
    """Project-relative POSIX path for messages."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()
