"""Renderer fixtures: each `tests/fixtures/markdown/NAME.md` renders to the
HTML in `NAME.html`. Set UPDATE_FIXTURES=1 to rewrite the expected files
(then read the diff before committing it)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from curriculum.markdown import collect_refs, is_allowed_link, parse, render_tokens, split_at_marker

FIXTURES = Path(__file__).parent / "fixtures" / "markdown"
ENV = {
    "link": lambda href: f"LINK[{href}]" if ":" in href and not href.startswith("http") else href,
    "image": lambda src: f"IMG[{src}]",
    "figure": lambda ref: f"FIG[{ref['case']}.{ref['field']}@{ref['shape']}]",
    "chart": lambda text, line: f"CHART[line {line}]\n",
}


def render(text: str) -> str:
    return render_tokens(parse(text), dict(ENV))


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.md")))
def test_fixture(name: str) -> None:
    source = (FIXTURES / f"{name}.md").read_text(encoding="utf-8")
    expected_path = FIXTURES / f"{name}.html"
    html = render(source)
    if os.environ.get("UPDATE_FIXTURES"):
        expected_path.write_text(html, encoding="utf-8")
    assert html == expected_path.read_text(encoding="utf-8")


def test_xss_inputs_render_inert() -> None:
    html = render((FIXTURES / "xss.md").read_text(encoding="utf-8"))
    assert "<script" not in html
    assert "<img src=x" not in html
    assert not re.search(r"<[^>]+\son[a-z]+=", html), "event attribute reached the output"
    assert not re.search(r'href="\s*(javascript|vbscript|data):', html, re.I)
    assert not re.search(r'src="\s*(javascript|vbscript|data):', html, re.I)


@pytest.mark.parametrize("url", ["javascript:alert(1)", "JaVaScRiPt:x", " java\tscript:x",
                                 "data:text/html,x", "vbscript:x", "file:///etc/passwd"])
def test_bad_schemes_refused(url: str) -> None:
    assert not is_allowed_link(url)


@pytest.mark.parametrize("url", ["https://x.org", "capsule:a-b", "../x.svg", "#frag", "mailto:a@b.c"])
def test_good_links_allowed(url: str) -> None:
    assert is_allowed_link(url)


def test_comments_never_reach_output() -> None:
    html = render((FIXTURES / "comments.md").read_text(encoding="utf-8"))
    assert "<!--" not in html and "&lt;!--" not in html and "hidden" not in html


def test_refs_carry_lines() -> None:
    refs = collect_refs(parse((FIXTURES / "figures.md").read_text(encoding="utf-8")))
    assert [(r["case"], r["field"], r["shape"], line) for r, line in refs.figures] == [
        ("memory/02_copy_vec4", "gbps", None, 0),
        ("gemm/01_naive", "tflops", "m=1024,n=1024,k=1024", 0),
    ]
    assert [line for _, line in refs.charts] == [2]
    assert refs.images == [("roofline.svg", "A roofline", 8)]


def test_split_ignores_markers_in_code() -> None:
    text = "a\n```\n<!-- more -->\n```\nb\n<!-- more -->\nc"
    head, tail, at = split_at_marker(text, "more")
    assert tail == "c" and at == 6 and head.endswith("b")


def test_code_highlighted_ahead_is_reused(tmp_path: Path) -> None:
    from curriculum import markdown as md

    page = tmp_path / "a.md"
    page.write_text("Intro.\n\n```cuda\n__global__ void k() {}\n```\n\n```chart\nkind: ladder\n```\n")
    found = md.highlight_files([page])
    assert list(found) == [("__global__ void k() {}\n", "cuda")]  # charts are not code
    assert 'data-lang="cuda"' in found[("__global__ void k() {}\n", "cuda")]
    md.add_highlighted({("int planted;\n", "cuda"): "<pre>planted</pre>"})
    assert md.highlight("int planted;\n", "cuda") == "<pre>planted</pre>"
