"""`curriculum check --site`: links, fragments, assets and absolute links in a built
edition; orphaned capsules; and every diagnostic code documented for authors."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import REPO, TEMPLATES

from curriculum.build import build, check_project
from curriculum.check import check_links, check_orphans
from curriculum.cli import main
from curriculum.errors import Diagnostics


def test_planted_broken_links_are_reported(sample: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    build(sample, out_dir=out, templates=TEMPLATES)
    page = out / "public/courses/demo/bandwidth/index.html"
    text = page.read_text()
    planted = ('<p><a href="../no-such-capsule/">gone</a>\n'
               '<a href="../index.html#part-nope">bad fragment</a>\n'
               '<a href="../index.html#part-basics">fine</a>\n'
               '<img src="missing.png" alt="x">\n'
               '<a href="/courses/demo/">absolute</a>\n'
               f'<a href="file://{out}/public/index.html">local</a></p>\n')
    page.write_text(text.replace("</main>", planted + "</main>"))
    line = text[:text.index("</main>")].count("\n") + 1
    (out / "member/static/css/extra.css").write_text("a { background: url(nothing.png); }\n")

    args = ["--root", str(sample), "--templates", str(TEMPLATES), "check", "--site", "--out",
            str(out)]
    assert main(args) == 1
    err = capsys.readouterr().err
    where = f"{out.relative_to(sample) if out.is_relative_to(sample) else out}"
    prefix = f"{where}/public/courses/demo/bandwidth/index.html"
    assert f"{prefix}:{line}:13: error[link.broken]: '../no-such-capsule/'" in err
    assert f"{prefix}:{line + 1}:10: error[link.fragment]: '../index.html#part-nope'" in err
    assert f"{prefix}:{line + 3}:11: error[link.broken]: 'missing.png'" in err
    assert f"{prefix}:{line + 4}:10: error[link.absolute]: '/courses/demo/'" in err
    assert "error[link.absolute]: 'file://" in err
    assert "error[link.build-folder]" in err
    assert "member/static/css/extra.css:1:21: error[link.broken]: 'nothing.png'" in err
    assert err.count("error[") == 7, err


def test_clean_site_passes_and_a_missing_build_is_a_usage_error(
        sample: Path, tmp_path: Path) -> None:
    args = ["--root", str(sample), "--templates", str(TEMPLATES), "check", "--site",
            "--out", str(tmp_path / "out")]
    assert main(args) == 2
    build(sample, out_dir=tmp_path / "out", templates=TEMPLATES)
    assert main([*args, "--strict"]) == 0


def test_orphans_are_warnings_and_errors_under_strict(sample: Path, tmp_path: Path) -> None:
    from curriculum.scaffold import register_capsule

    course = sample / "content/courses/demo/course.yaml"
    course.write_text(register_capsule(course.read_text(), "lonely", "advanced"))
    (sample / "content/courses/demo/capsules/lonely.md").write_text(
        "---\ntitle: Lonely\ntag: ALONE\naccess: free\nkind: concept\n"
        "summary: Nothing links here.\nprerequisites: [lonely-too]\n---\nA body.\n")
    course.write_text(register_capsule(course.read_text(), "lonely-too", "advanced"))
    (sample / "content/courses/demo/capsules/lonely-too.md").write_text(
        "---\ntitle: Lonely too\ntag: ALONE\naccess: free\nkind: concept\n"
        "summary: Only a prerequisite of an orphan.\n---\nSee [myself](capsule:lonely-too).\n")
    diags, catalog, _ = check_project(sample, TEMPLATES)
    # The new capsules are in no syllabus unit, which is a warning of its own, not the subject here.
    assert catalog is not None
    assert [d.code for d in diags.items] == ["syllabus.missing-capsule"] * 2
    found = Diagnostics()
    check_orphans(catalog, found)
    assert [d.format() for d in found.items] == [
        "content/courses/demo/capsules/lonely.md:1:1: warning[capsule.orphan]: capsule "
        "'lonely' is reached only from its course page: no path, question, drill or other "
        "capsule leads to it; add it to a path, or link it from a capsule that comes before it"]
    build(sample, out_dir=tmp_path / "out", templates=TEMPLATES)
    args = ["--root", str(sample), "--templates", str(TEMPLATES), "check", "--site", "--out",
            str(tmp_path / "out")]
    assert main(args) == 0
    assert main([*args, "--strict"]) == 1


def test_only_named_pages_are_checked() -> None:
    files = {"a.html": b'<a href="b.html#x">', "b.html": b'<p id="y">', "c.html": b'<a href="z">'}
    diags = Diagnostics()
    check_links(files, "e", diags, pages=["a.html"])
    assert [d.code for d in diags.items] == ["link.fragment"]


# -- every diagnostic code is documented ------------------------------------------------


def codes_in_source() -> set[str]:
    """Second argument of every `*.error(...)`/`*.warning(...)` call and every
    `Diagnostic(...)` construction under src/ that is a literal code, and the
    first item of every returned `(code, message, hint)` tuple."""
    codes: set[str] = set()
    for path in (REPO / "src").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            # `return "link.broken", message, hint` from a helper that finds problems
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) \
                    and node.value.elts and isinstance(first := node.value.elts[0], ast.Constant) \
                    and isinstance(first.value, str) \
                    and re.fullmatch(r"[a-z-]+\.[a-z-]+", first.value):
                codes.add(first.value)
            if not isinstance(node, ast.Call) or len(node.args) < 2:
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[1]
            if name in ("error", "warning", "Diagnostic") and isinstance(arg, ast.Constant) \
                    and isinstance(arg.value, str) and re.fullmatch(r"[a-z-]+\.[a-z-]+", arg.value):
                codes.add(arg.value)
    return codes


def test_every_code_is_documented() -> None:
    doc = (REPO / "docs" / "authoring.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([a-z-]+\.[a-z-]+)` \|", doc, flags=re.M))
    used = codes_in_source()
    assert len(used) > 40
    assert sorted(used - documented) == [], "add these codes to docs/authoring.md"
    assert sorted(documented - used) == [], "docs/authoring.md lists codes no longer used"


def test_link_values_are_found_as_the_plain_pattern_finds_them() -> None:
    """The link check and the EPUB find a link's value from its `="` and look behind for
    the attribute's name: on any text they find the values that `\\s(?:href|src)="..."`
    finds, at the same places."""
    import random

    from curriculum import check, epub

    plain = re.compile(r'\s(?:href|src)="([^"]*)"')
    pieces = [" ", "\n", "\t", "\u00a0", "h", "r", "e", "f", "s", "c", "=", '"', "<", ">",
              ' href="', ' src="', '\nhref="', 'href="', 'xsrc="', ' data-src="']
    rng = random.Random(7)
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 24)))
        want = [m.span(1) for m in plain.finditer(text)]
        for pattern in (check._ATTR, epub._LINK):
            assert [m.span(1) for m in pattern.finditer(text)] == want, repr(text)
