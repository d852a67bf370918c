"""The package's modules import one another without a cycle (issue 18).

Every `import` counts, at the top of a module or inside a function: an import deferred
into a function hides a cycle from Python, not from the reader, who still has to hold
both modules in mind to follow either.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "src" / "curriculum"
# Cycles that may stay, each with its reason: none.
KNOWN_CYCLES: list[list[str]] = []


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, name: str, modules: set[str], is_package: bool = False
               ) -> set[str]:
    """The package's modules that module `name` (its text `source`) imports, wherever
    the import is written."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            # `from curriculum import pages` imports the module `curriculum.pages`.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `import a.b.c` names a, a.b, a.b.c
                target = target.rpartition(".")[0]
            if target and target != name and target != "curriculum":
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p.read_text(encoding="utf-8"), module_name(p), modules,
                                       p.name == "__init__.py") for p in paths}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_checker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_checker_reads_every_kind_of_import() -> None:
    modules = {"curriculum.render", "curriculum.pages", "curriculum.puzzle",
               "curriculum.puzzle.site", "curriculum.puzzle.spec", "curriculum.check"}
    source = ("import curriculum.render\nfrom curriculum import pages\n"
              "def f():\n    from curriculum.puzzle.site import x\n"
              "    from curriculum.check import LeakCheck\n    from .spec import Spec\n")
    assert imports_of(source, "curriculum.puzzle.content", modules) == {
        "curriculum.render", "curriculum.pages", "curriculum.puzzle.site", "curriculum.check",
        "curriculum.puzzle.spec"}


def test_no_import_cycles() -> None:
    found = cycles(graph())
    new = [c for c in found if c not in KNOWN_CYCLES]
    assert new == [], "modules that import one another in a circle: " + "; ".join(
        " <-> ".join(c) for c in new)
    gone = [c for c in KNOWN_CYCLES if c not in found]
    assert gone == [], f"no longer a cycle, remove it from KNOWN_CYCLES: {gone}"


def private_uses(source: str, name: str) -> list[str]:
    """Where module `name` (its text `source`) reaches another of the package's modules'
    private names: `from curriculum.x import _y`, or `x._y` on a module it imported."""
    tree = ast.parse(source, name)
    private = lambda n: n.startswith("_") and not n.startswith("__")  # noqa: E731
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(
                "curriculum")):
            for alias in node.names:
                if private(alias.name):
                    found.append(f"{name}:{node.lineno}: from {node.module} import {alias.name}")
                modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("curriculum"):
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in modules):
            found.append(f"{name}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_the_private_name_check_finds_both_forms() -> None:
    source = ("from curriculum.trace import _profile, profile\n"
              "from curriculum import pages as p\n"
              "p._nav(1)\np.__name__\n")
    assert private_uses(source, "m") == ["m:1: from curriculum.trace import _profile",
                                         "m:3: p._nav"]


def test_no_module_imports_anothers_private_names() -> None:
    found = [use for path in sorted(PACKAGE.rglob("*.py"))
             for use in private_uses(path.read_text(encoding="utf-8"), module_name(path))]
    assert found == [], "private names used across modules: " + "; ".join(found)
