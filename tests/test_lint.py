"""Estimates and spec-sheet constants as markup, and the `prose.typed-number` lint."""

from __future__ import annotations

from pathlib import Path

import pytest

from curriculum.catalog import Body
from curriculum.errors import Diagnostics
from curriculum.lint import check_markup, lint_body, lint_yaml, typed_numbers
from curriculum.load import RawDoc
from curriculum.markdown import collect_refs, parse, render_tokens
from curriculum.yamlio import load_yaml


def found(text: str) -> list[str]:
    return [number for _, _, number in typed_numbers(text)]


def body(text: str, line: int = 10) -> Body:
    tokens = parse(text)
    return Body(text, "doc.md", line, collect_refs(tokens), tuple(tokens))


# --- rendering ------------------------------------------------------------------------


def test_estimate_renders_marked_with_its_arithmetic() -> None:
    html = render_tokens(parse("Decode takes {est:2.1 ms | 32 layers × 64 µs}."), {})
    assert ('<span class="est" tabindex="0"><span class="est-mark">≈</span>'
            '<span class="est-value">2.1 ms</span>'
            '<span class="est-why" role="tooltip"><span class="paren"> (</span>estimate: '
            '32 layers × 64 µs<span class="paren">)</span></span></span>') in html


def test_spec_renders_with_its_source() -> None:
    html = render_tokens(parse("HBM moves {spec:4.8 TB/s | NVIDIA H200 datasheet}."), {})
    assert ('<span class="spec" tabindex="0"><span class="spec-value">4.8 TB/s</span>'
            '<span class="spec-why" role="tooltip"><span class="paren"> (</span>spec: '
            'NVIDIA H200 datasheet<span class="paren">)</span></span></span>') in html


def test_markup_is_escaped_and_valid_xml() -> None:
    import xml.etree.ElementTree as ET

    html = render_tokens(parse("{est:<i>1 s</i> | a < b & \"c\"} and {spec:1 | x}"), {})
    assert "<i>" not in html
    ET.fromstring(f"<div>{html}</div>")  # the EPUB's XHTML takes it as it is


def test_markup_spanning_lines_and_in_table_cells() -> None:
    html = render_tokens(parse("It takes {est:2 ms |\n2 × 1 ms}.\n\n| a |\n| - |\n| {est:1 s \\| x} |\n"), {})
    assert html.count('class="est"') == 2
    assert "estimate: 2 × 1 ms<" in html and "estimate: x<" in html


# --- malformed markup -------------------------------------------------------------------


@pytest.mark.parametrize(("text", "code", "col", "says"), [
    ("Takes {est:2 ms}.", "estimate.syntax", 7, "has no '|'"),
    ("Takes {est: | 2 × 1 ms}.", "estimate.syntax", 7, "has an empty value"),
    ("Takes {est:2 ms | }.", "estimate.syntax", 7, "has an empty arithmetic"),
    ("Takes {est:2 ms | x", "estimate.syntax", 7, "never closed"),
    ("Takes {est:2 ms | {fig:a/01_b.ms}}.", "estimate.syntax", 7, "cannot nest"),
    ("Peak {spec:4.8 TB/s}.", "spec.syntax", 6, "has no '|'"),
    ("Peak {spec:4.8 TB/s |}.", "spec.syntax", 6, "has an empty source"),
    ("ok {est:1 s | a} then {spec:| b}", "spec.syntax", 23, "has an empty value"),
])
def test_malformed_markup_is_an_error(text: str, code: str, col: int, says: str) -> None:
    diags = Diagnostics()
    check_markup(body("intro\n\n" + text), diags)
    [d] = diags.items
    assert (d.severity, d.code, d.loc.path, d.loc.line, d.loc.col) == ("error", code, "doc.md", 12, col)
    assert says in d.message


# --- the lint -----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "numbers"), [
    ("It takes 5 s.", ["5 s"]),
    ("It takes 5s, then 2.5 ms, 31 µs, 31 μs, 40 us and 600 ns.", ["5s", "2.5 ms", "31 µs", "31 μs", "40 us", "600 ns"]),
    ("Copies at 3.35 TB/s or 900 GB/s.", ["3.35 TB/s", "900 GB/s"]),
    ("Peaks: 989 TFLOP/s, 67 TFLOPS, 1.9 PFLOP/s, 500 GFLOP/s.", ["989 TFLOP/s", "67 TFLOPS", "1.9 PFLOP/s", "500 GFLOP/s"]),
    ("A ridge at 206 FLOP/B, or 4 FLOP/byte.", ["206 FLOP/B", "4 FLOP/byte"]),
    ("It reaches 85% of the copy ceiling and 90 % of cuBLAS.", ["85% of", "90 % of"]),
    ("Spelled out: 8 FLOP per byte, 4.8 TB per second, 2 milliseconds, 30 seconds, 1 second.",
     ["8 FLOP per byte", "4.8 TB per second", "2 milliseconds", "30 seconds", "1 second"]),
    ("A row of a table | 1,024 | 12.5 ms |", ["12.5 ms"]),
    ("**2 ms** and [a link at 3 ms](https://x.org/5ms)", ["2 ms", "3 ms"]),
    ("No space: 1\u202fms; no-break: 2\u00a0µs.", ["1\u202fms", "2\u00a0µs"]),
])
def test_typed_numbers_found(text: str, numbers: list[str]) -> None:
    assert found(text) == numbers


@pytest.mark.parametrize("text", [
    "2 steps, 3 sms, 4 nsight runs, 8 warps, 16 bytes, 4 GiB, 32 layers, 2 secondary, 5 seconded",
    "work counts, not rates: 137.4 GFLOP, 66 TFLOP, 2 FLOPs per element, 48 cycles",
    "compiled for sm_90s and sm_90a; v2s; x86s",
    "the 1990s, the 80s, 10s of kernels",
    "85% faster, 90% done; 5%",
    "`copy takes 5 ms` and ``a ` 3 ms``",
    "$t = 5 ms$ and $$t = 2 \\mu s$$",
    "{fig:memory/02_copy.us} and {fig:gemm/01_naive.tflops@m=1024,n=1024,k=1024}",
    "{est:2.1 ms | 32 layers × 64 µs} and {spec:4.8 TB/s | NVIDIA H200 datasheet}",
    "[the trace](https://example.org/run/5s/10ms) and <https://x.org/3ms>",
    "<!-- 5 ms, to check -->",
    "capsule ids: gemm-1d-blocktiling, 02_copy_vec4.gbps",
])
def test_not_typed_numbers(text: str) -> None:
    assert found(text) == []


def test_lint_skips_code_and_math_blocks_and_points_at_the_number() -> None:
    text = ("Intro.\n\n```cuda\n// 5 ms\n```\n\n    indented 3 ms\n\n$$\n2 ms\n$$\n\n"
            "!!! note \"Estimate\"\n    it takes 7 ms\n\nthen 4 ms.\n")
    diags = Diagnostics()
    lint_body(body(text), diags)
    assert [(d.loc.line, d.loc.col, d.severity, d.code) for d in diags.items] == [
        (10 + 13, 14, "warning", "prose.typed-number"),
        (10 + 15, 6, "warning", "prose.typed-number"),
    ]
    assert "{est:value | arithmetic}" in (diags.items[0].hint or "")


def test_lint_reads_yaml_prose_but_not_ids() -> None:
    text = "id: p\ntitle: Copies at 3 TB/s\nsteps:\n  - capsule: x-5s\n    note: about {est:1 ms | y}\n"
    diags = Diagnostics()
    data, pos = load_yaml(text, "paths/p.yaml", diags)
    lint_yaml(RawDoc("path", "p", "paths/p.yaml", data, pos), diags)
    got = [(str(d.loc), d.message.split("'")[1]) for d in diags.items]
    # Markup does not render in YAML fields, so it does not count there.
    assert got == [("paths/p.yaml:2:18", "3 TB/s"), ("paths/p.yaml:5:22", "1 ms")]
    assert all(d.severity == "warning" and "plain text" in (d.hint or "") for d in diags.items)


def test_strict_check_fails_on_a_typed_number(sample: Path) -> None:
    from curriculum.cli import main

    path = sample / "content/courses/demo/capsules/bandwidth.md"
    path.write_text(path.read_text().replace("2 GiB moved |", "2 GiB moved in 0.5 ms |"))
    from curriculum.build import check_project

    diags, _, _ = check_project(sample, Path(__file__).parents[1] / "templates")
    assert [d.code for d in diags.items if d.code == "prose.typed-number"] == ["prose.typed-number"]
    assert main(["--root", str(sample), "check", "--strict"]) == 1


def test_table_of_contents_shows_the_values() -> None:
    from curriculum.markdown import headings

    [(_, _, text)] = headings(parse("## Decode in {est:23 ms | 112 GB ÷ 4.8 TB/s} at {spec:4.8 TB/s | sheet}\n"))
    assert text == "Decode in ≈23 ms at 4.8 TB/s"
