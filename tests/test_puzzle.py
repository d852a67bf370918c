"""CUDA puzzles without a GPU: every spec loads, every float64 reference agrees with
a loop written independently of it, the comparison and canary logic, the command's
list/show/check paths, and the pages of each edition (the solution in none below its
tier)."""

from __future__ import annotations

import html
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, TEMPLATES

from curriculum.cli import main
from curriculum.errors import Diagnostics
from curriculum.puzzle.check import compare, compiler_log, overrun, upcast
from curriculum.puzzle.content import has_entry, load_puzzles
from curriculum.puzzle.spec import argument_rows

PUZZLES = load_puzzles(REPO)
BY_ID = {p.id: p for p in PUZZLES}
TOPICS = ["map", "zip", "guards", "2d-indexing", "blocks", "shared-memory", "pooling",
          "dot-product", "prefix-sum", "axis-sum", "matmul", "convolution", "histogram",
          "softmax-row"]


def test_every_puzzle_loads_in_order() -> None:
    diags = Diagnostics()
    puzzles = load_puzzles(REPO, diags)
    assert diags.items == []
    assert [p.id for p in puzzles] == [f"{i:02d}-{t}" for i, t in enumerate(TOPICS, start=1)]
    assert [p.number for p in puzzles] == list(range(1, 15))
    levels = [p.meta.difficulty for p in puzzles]
    assert levels == sorted(levels) and levels[0] == 1 and levels[-1] == 5
    for p in puzzles:
        assert p.starter.is_file() and p.solution.is_file()
        assert has_entry(p.starter.read_text(), p.spec.entry)
        assert has_entry(p.solution.read_text(), p.spec.entry)
        assert "TODO" not in p.starter.read_text() and "// your code here" in p.starter.read_text()
        assert p.meta.hints and p.meta.summary


# --- references against independent loops ------------------------------------------------


def _loops(pid: str, x: dict[str, np.ndarray], s: dict[str, int]) -> dict[str, np.ndarray]:
    """Each puzzle's answer computed element by element in plain Python."""
    f = {k: v.astype(np.float64) for k, v in x.items()}
    if pid == "01-map":
        return {"out": np.array([2 * v + 1 for v in f["a"]])}
    if pid == "02-zip":
        return {"out": np.array([u * v for u, v in zip(f["a"], f["b"], strict=True)])}
    if pid == "03-guards":
        return {"out": np.array([v if v > 0 else 0.0 for v in f["a"]])}
    if pid == "04-2d-indexing":
        return {"out": np.array([[f["a"][i] + f["b"][j] for j in range(s["n"])]
                                 for i in range(s["m"])])}
    if pid == "05-blocks":
        return {"out": np.array([abs(u - v) for u, v in zip(f["a"], f["b"], strict=True)])}
    if pid == "06-shared-memory":
        return {"out": np.array([[f["a"][i][j] for i in range(s["m"])] for j in range(s["n"])])}
    if pid == "07-pooling":
        a = f["a"]
        return {"out": np.array([sum(a[k] for k in range(i - 7, i + 1) if k >= 0)
                                 for i in range(len(a))])}
    if pid == "08-dot-product":
        return {"out": np.array([math.fsum(u * v for u, v in zip(f["a"], f["b"], strict=True))])}
    if pid == "09-prefix-sum":
        out = np.zeros_like(f["a"])
        for r in range(s["rows"]):
            acc = 0.0
            for i in range(1024):
                acc += f["a"][r][i]
                out[r][i] = acc
        return {"out": out}
    if pid == "10-axis-sum":
        return {"out": np.array([sum(f["a"][i][j] for i in range(s["m"])) for j in range(s["n"])])}
    if pid == "11-matmul":
        a, b = f["a"], f["b"]
        return {"c": np.array([[sum(a[i][p] * b[p][j] for p in range(s["k"]))
                                for j in range(s["n"])] for i in range(s["m"])])}
    if pid == "12-convolution":
        img, w = f["img"], f["f"]
        out = np.zeros((s["h"], s["w"]))
        for y in range(s["h"]):
            for xx in range(s["w"]):
                acc = 0.0
                for dy in range(5):
                    for dx in range(5):
                        yy, xs = y + dy - 2, xx + dx - 2
                        if 0 <= yy < s["h"] and 0 <= xs < s["w"]:
                            acc += w[dy][dx] * img[yy][xs]
                out[y][xx] = acc
        return {"out": out}
    if pid == "13-histogram":
        counts = [0] * 256
        for v in x["x"]:
            counts[int(v)] += 1
        return {"counts": np.array(counts, dtype=np.float64)}
    if pid == "14-softmax-row":
        out = np.zeros_like(f["x"])
        for r in range(s["rows"]):
            row = f["x"][r]
            top = max(row)
            e = [math.exp(v - top) for v in row]
            total = math.fsum(e)
            out[r] = [v / total for v in e]
        return {"out": out}
    raise AssertionError(f"no independent loop for {pid}")


@pytest.mark.parametrize("pid", sorted(BY_ID))
def test_reference_agrees_with_an_independent_loop(pid: str) -> None:
    spec = BY_ID[pid].spec
    sizes = dict(spec.small)
    x = spec.inputs(sizes, np.random.default_rng(7))
    inputs = [p for p in spec.params if p.role == "in"]
    assert sorted(x) == sorted(p.name for p in inputs)
    for p in inputs:
        assert x[p.name].dtype == np.dtype(p.dtype) and x[p.name].shape == p.dims(sizes)
    assert not any(np.all(v == 0) for v in x.values()), "inputs must not be all zeros"
    want = spec.reference(upcast(x), sizes)
    assert sorted(want) == sorted(p.name for p in spec.outputs)
    mine = _loops(pid, x, sizes)
    for p in spec.outputs:
        assert want[p.name].shape == p.dims(sizes)
        assert want[p.name].dtype == np.float64
        np.testing.assert_allclose(want[p.name], mine[p.name], rtol=1e-12, atol=1e-12)
        # The tolerance accepts the reference rounded to the output's type.
        rounded = want[p.name].astype(p.dtype)
        assert compare(p.name, rounded, want[p.name], spec.atol, spec.rtol).passed


@pytest.mark.parametrize("pid", sorted(BY_ID))
def test_launch_covers_the_work(pid: str) -> None:
    """At the checked sizes the grid is what the page says, and the block fits a GPU."""
    spec = BY_ID[pid].spec
    grid, block = spec.launch(spec.sizes)
    assert math.prod(block) <= 1024 and all(g >= 1 for g in grid)
    rows = argument_rows(spec)
    assert [r[0] for r in rows] == [p.name for p in spec.params]


def test_softmax_inputs_overflow_a_naive_exp() -> None:
    spec = BY_ID["14-softmax-row"].spec
    x = spec.inputs(dict(spec.sizes), np.random.default_rng(1))["x"]
    assert float(x.max()) > 88.8  # expf(x) is infinite in float32 for some rows


def test_histogram_inputs_are_in_range_and_skewed() -> None:
    spec = BY_ID["13-histogram"].spec
    x = spec.inputs({"n": 100_000}, np.random.default_rng(3))["x"]
    assert x.min() >= 0 and x.max() <= 255
    counts = np.bincount(x, minlength=256)
    assert counts[100:108].sum() > 0.3 * x.size


# --- comparison, canaries, compiler log ---------------------------------------------------


def test_compare_lists_first_ten_mismatches_with_indices() -> None:
    want = np.arange(60, dtype=np.float64).reshape(6, 10)
    got = want.astype(np.float32)
    got[1, 2] = 99
    got[4] = np.nan
    c = compare("out", got, want, 1e-6, 1e-6)
    assert not c.passed and c.bad == 11 and c.total == 60
    assert len(c.mismatches) == 10
    assert c.mismatches[0].index == (1, 2) and c.mismatches[0].want == 12.0
    assert c.mismatches[0].got == 99.0
    assert c.mismatches[1].index == (4, 0) and math.isnan(c.mismatches[1].got)
    assert compare("out", want.astype(np.float32), want, 0.0, 0.0).passed


def test_compare_integers_exactly() -> None:
    want = np.array([3.0, 0.0, 5.0])
    assert compare("counts", np.array([3, 0, 5], np.int32), want, 0, 0).passed
    c = compare("counts", np.array([3, -1, 5], np.int32), want, 0, 0)
    assert c.bad == 1 and c.mismatches[0].index == (1,) and c.mismatches[0].got == -1.0


def test_canary_tail_catches_a_write_past_the_end() -> None:
    tail = np.full(16, np.nan, np.float32)
    assert overrun(tail) is None
    tail[3] = 1.0
    assert overrun(tail) == 3
    ints = np.full(8, -1, np.int32)
    assert overrun(ints) is None
    ints[0] = 0
    assert overrun(ints) == 0


def test_compiler_log_names_the_readers_file_and_line() -> None:
    log = ('/tmp/tmpab12/kern.cu(7): error: identifier "i" is undefined\n'
           "      out[i] = a[i];\n\n1 error detected in the compilation of \"kern.cu\".")
    text = compiler_log(log, "mine.cu")
    assert text.startswith('mine.cu:7: error: identifier "i" is undefined')


# --- the command -------------------------------------------------------------------------


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--root", str(REPO), "puzzle", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == 15 and lines[1].split()[:2] == ["1", "Map"]
    assert "Softmax row" in lines[-1] and "(5/5)" in lines[-1]


def test_show_prints_spec_shapes_hints_and_starter(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "show", "11")
    assert code == 0
    assert "Puzzle 11: Matmul" in out and "matmul_kernel" in out
    assert "(1000 × 700)" in out and "grid (69, 63, 1), block (16, 16, 1)" in out
    assert "Hint 1:" in out and "Starter: content/puzzles/11-matmul/starter.cu" in out
    solution = BY_ID["11-matmul"].solution.read_text()
    assert "as[ty][tx]" in solution and "as[ty][tx]" not in out


@pytest.mark.parametrize("n", ["0", "15", "x"])
def test_unknown_puzzle_is_a_usage_error(capsys: pytest.CaptureFixture[str], n: str) -> None:
    code, _, err = run_cli(capsys, "show", n)
    assert code == 2 and "puzzles: 1, 2, 3" in err


def test_check_without_a_gpu_exits_2(capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    starter = str(BY_ID["01-map"].starter)
    code, out, err = run_cli(capsys, "check", "1", starter)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "needs CuPy and a CUDA GPU" in err and "CUDA_VISIBLE_DEVICES" in err


def test_check_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "check", "1", str(tmp_path / "nope.cu"))
    assert code == 2 and "no file" in err


def test_check_file_without_the_kernel(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    f = tmp_path / "wrong.cu"
    f.write_text('extern "C" __global__ void other(float* a) {}\n')
    code, _, err = run_cli(capsys, "check", "1", str(f))
    assert code == 1 and "map_kernel" in err and "starter.cu" in err


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("name", ["starter.cu", "solution.cu"])
@pytest.mark.parametrize("pid", sorted(BY_ID))
def test_sources_compile_for_sm90(pid: str, name: str) -> None:
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-c", "-o", "/dev/null",
                           str(BY_ID[pid].folder / name)], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr


# --- pages -------------------------------------------------------------------------------


def _with_puzzles(sample: Path, ids: list[str]) -> None:
    """Copies of the project's puzzles in the sample site, their background pointed at
    the sample's capsules."""
    for pid in ids:
        dest = sample / "content/puzzles" / pid
        shutil.copytree(BY_ID[pid].folder, dest, ignore=shutil.ignore_patterns("__pycache__"))
        md = dest / "puzzle.md"
        text = md.read_text()
        head, sep, body = text.partition("\nbackground:\n")
        if sep:
            rest = body.split("\n---\n", 1)[1]
            text = f"{head}\nbackground:\n  - copy-kernel\n---\n{rest}"
        md.write_text(text)


def _solution_lines(pid: str, elsewhere: str) -> list[str]:
    """Lines of the solution's code that neither the starter nor the rest of the site has."""
    starter = BY_ID[pid].starter.read_text()
    return [ln.strip() for ln in BY_ID[pid].solution.read_text().splitlines()
            if ln.strip() not in starter and ln.strip() not in elsewhere
            and not ln.strip().startswith(("#", "}", "{")) and len(ln.strip()) > 20]


def test_pages_in_every_edition_and_solution_only_in_member(sample: Path,
                                                            tmp_path: Path) -> None:
    from test_leaks import all_bytes

    from curriculum.build import build

    ids = ["03-guards", "11-matmul"]
    elsewhere = "\n".join(f.read_text(errors="replace") for f in sample.rglob("*")
                          if f.is_file())
    _with_puzzles(sample, ids)
    build(sample, out_dir=tmp_path, templates=TEMPLATES, strict=True)
    member = all_bytes(tmp_path / "member")
    for edition in ("public", "account", "member"):
        site = tmp_path / edition
        home = (site / "index.html").read_text()
        assert 'href="puzzles/index.html"' in home
        index = (site / "puzzles/index.html").read_text()
        for pid in ids:
            assert f'href="{pid}/index.html"' in index
            page = (site / f"puzzles/{pid}/index.html").read_text()
            assert "Hint 1" in page and "Download starter.cu" in page
            assert 'Background: <a href="../../courses/demo/copy-kernel/index.html">' in page
            assert (site / f"puzzles/{pid}/starter.cu").read_bytes() == \
                BY_ID[pid].starter.read_bytes()
        locked = edition != "member"
        assert ("The reference solution is for Members." in page) == locked
        if locked:
            files = all_bytes(site)
            for pid in ids:
                lines = _solution_lines(pid, elsewhere)
                assert len(lines) >= 2
                for line in lines:
                    leaks = [n for n, d in files if line.encode() in d]
                    assert leaks == [], f"{line!r} leaked into {leaks}"
            assert "Solve it first" not in page
    solution_page = (tmp_path / "member/puzzles/11-matmul/index.html").read_text()
    assert "Solve it first, then reveal the solution" in solution_page
    # The positive control: the same line search finds the solution in the member edition's
    # pages (the search index leaves code out, so it is not the place to look).
    texts = [html.unescape(re.sub(r"<[^>]+>", "", d.decode("utf-8", "replace")))
             for n, d in member if n.endswith(".html")]
    for pid in ids:
        for line in _solution_lines(pid, elsewhere):
            assert any(line in t for t in texts), line


def test_public_edition_has_no_solution_text(sample: Path, tmp_path: Path) -> None:
    """Every solution of the project, run through the build's own leak check against
    every file of the public edition (pages, search index, feeds)."""
    from test_leaks import all_bytes

    from curriculum.build import build
    from curriculum.check import LeakCheck

    # What the public edition may show: the sample's own sources and the puzzles' public files.
    allowed = [f.read_text(errors="replace") for f in sample.rglob("*") if f.is_file()]
    allowed += [f.read_text() for p in PUZZLES for f in (p.starter, p.folder / "puzzle.md")]
    _with_puzzles(sample, sorted(BY_ID))
    build(sample, out_dir=tmp_path, templates=TEMPLATES, strict=True, editions=["public"])
    public = {n: d for n, d in all_bytes(tmp_path / "public")}
    solutions = [p.solution.read_text() for p in PUZZLES]
    diags = Diagnostics()
    LeakCheck(solutions, allowed).scan(public, "public", diags)
    assert diags.items == []
    control = Diagnostics()
    planted = dict(public)
    planted["x.html"] = f"<main><pre>{PUZZLES[10].solution.read_text()}</pre></main>".encode()
    LeakCheck(solutions, allowed).scan(planted, "public", control)
    assert [d.code for d in control.items] == ["leak.withheld-text"]


def test_puzzle_errors_are_reported_with_file_and_line(sample: Path) -> None:
    from curriculum.build import check_project

    _with_puzzles(sample, ["01-map"])
    md = sample / "content/puzzles/01-map/puzzle.md"
    md.write_text(md.read_text().replace("solution_access: premium", "solution_access: gold")
                  .replace("number: 1", "number: 2"))
    diags, catalog, _ = check_project(sample, TEMPLATES)
    found = {(d.code, d.loc.path) for d in diags.errors}
    assert ("access.unknown-tier", "content/puzzles/01-map/puzzle.md") in found
    assert ("puzzle.number", "content/puzzles/01-map/puzzle.md") in found
    md.write_text(md.read_text().replace("  - copy-kernel", "  - copy-kernal"))
    diags, _, _ = check_project(sample, TEMPLATES)
    unknown = [d for d in diags.errors if d.code == "puzzle.unknown-capsule"]
    assert unknown and "did you mean 'copy-kernel'" in unknown[0].format()
    assert catalog is None


def test_a_page_that_shows_a_withheld_solution_stops_the_build(
        sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the page code wrongly decided the public edition may show the solution, the
    scan (which reads the tiers on its own) refuses the edition."""
    from curriculum.build import build
    from curriculum.errors import ContentError
    from curriculum.gating import EditionView

    _with_puzzles(sample, ["11-matmul"])
    monkeypatch.setattr(EditionView, "tier_allowed", lambda self, tier: True)
    with pytest.raises(ContentError) as info:
        build(sample, out_dir=tmp_path, templates=TEMPLATES, editions=["public"])
    where = {str(d.loc) for d in info.value.diagnostics if d.code == "leak.withheld-text"}
    assert any("puzzles/11-matmul/index.html" in w for w in where), where


def _fake_check(monkeypatch: pytest.MonkeyPatch, outcome: object) -> list[dict[str, object]]:
    import curriculum.puzzle.check as check

    calls: list[dict[str, object]] = []

    def fake(puzzle: object, file: Path, sizes: object = None, seed: object = None,
             timed: bool = True) -> object:
        calls.append({"file": file, "sizes": sizes, "seed": seed})
        return outcome

    monkeypatch.setattr(check, "run_check", fake)
    return calls


def test_check_prints_the_first_mismatches_and_exits_1(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from curriculum.puzzle.check import Comparison, Mismatch, Outcome

    wrong = [Mismatch((992, j), 1.5 + j, 0.25) for j in range(10)]
    outcome = Outcome({"m": 1000, "n": 1100, "k": 700}, 1,
                      [Comparison("c", 1_100_000, 8800, wrong)])
    calls = _fake_check(monkeypatch, outcome)
    code, out, _ = run_cli(capsys, "check", "11", "mine.cu", "--seed", "1")
    assert code == 1 and calls[0]["seed"] == 1
    lines = out.splitlines()
    assert lines[0] == "puzzle 11 (Matmul) at m=1000, n=1100, k=700, seed 1"
    assert lines[1] == "c: 8800 of 1100000 elements wrong; the first 10:"
    assert lines[2] == "  c[992, 0]: expected 1.5, got 0.25"
    assert len([ln for ln in lines if ln.startswith("  c[")]) == 10
    assert lines[-1] == "FAILED"


def test_check_reports_a_write_past_the_end(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from curriculum.puzzle.check import Comparison, Outcome

    _fake_check(monkeypatch, Outcome({"n": 1000}, 4, [Comparison("out", 1000, 0, [], 0)]))
    code, out, _ = run_cli(capsys, "check", "3", "mine.cu", "--small")
    assert code == 1
    assert "out: all 1000 elements match" in out
    assert "wrote past the end of out (element 1000, 1 past the last)" in out


def test_check_prints_both_times_on_success(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from curriculum.puzzle.check import Comparison, Outcome

    outcome = Outcome({"n": 16}, 9, [Comparison("out", 16, 0)], (0.2, 0.19, 0.21),
                      (0.1, 0.09, 0.11))
    calls = _fake_check(monkeypatch, outcome)
    code, out, _ = run_cli(capsys, "check", "1", "mine.cu", "--small")
    assert code == 0 and calls[0]["sizes"] == BY_ID["01-map"].spec.small
    assert "your kernel:        0.2000 ms median (20th-80th percentile 0.1900-0.2100 ms)" in out
    assert "reference solution: 0.1000 ms median" in out and "(yours takes 2.00x)" in out
    assert out.splitlines()[-1] == "PASSED"
