"""The sample project built whole: expected tree, determinism, atomic writes,
strictness and the command line."""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SAMPLE, TEMPLATES, edit

from curriculum.build import build
from curriculum.cli import main
from curriculum.errors import ContentError

EXPECTED = REPO / "tests" / "fixtures" / "sample-expected"
EPOCH = "1790000000"


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def pages(folder: Path) -> dict[str, bytes]:
    """Generated files, without copied static assets and binary figures."""
    return {k: v for k, v in tree(folder).items()
            if not k.startswith(("static/", "figures/"))}


def test_sample_matches_expected_tree(sample: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    out = tmp_path / "out"
    build(sample, out_dir=out, templates=TEMPLATES, strict=True)
    if os.environ.get("UPDATE_FIXTURES"):
        shutil.rmtree(EXPECTED, ignore_errors=True)
        for edition in ("public", "account", "member"):
            for rel, data in pages(out / edition).items():
                dest = EXPECTED / edition / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
    for edition in ("public", "account", "member"):
        got, want = pages(out / edition), pages(EXPECTED / edition)
        assert sorted(got) == sorted(want), edition
        for rel in want:
            assert got[rel] == want[rel], f"{edition}/{rel} differs from the expected tree"
    assert any(k.startswith("figures/") for k in tree(out / "member"))
    assert not any(k.startswith("figures/") for k in tree(out / "public")), \
        "a chart used only by a premium page reached the public edition"


def _build_in_subprocess(out: Path, tz: str, seed: str) -> None:
    env = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH, "TZ": tz, "PYTHONHASHSEED": seed}
    subprocess.run([sys.executable, "-m", "curriculum", "--root", str(SAMPLE), "--templates",
                    str(TEMPLATES), "build", "--out", str(out)], check=True, env=env,
                   capture_output=True)


def test_double_build_is_byte_identical(tmp_path: Path) -> None:
    _build_in_subprocess(tmp_path / "a", "UTC", "1")
    _build_in_subprocess(tmp_path / "b", "Asia/Tokyo", "4242")
    a, b = tree(tmp_path / "a"), tree(tmp_path / "b")
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []
    for rel in a:
        ma = (tmp_path / "a" / rel).stat().st_mtime
        assert int(ma) == int(EPOCH)


def test_failed_build_leaves_previous_site(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    build(sample, out_dir=out, templates=TEMPLATES)
    before = tree(out / "public")
    edit(sample, "paths/starter.yaml", "- experiment: bound", "- experiment: bonud")
    with pytest.raises(ContentError):
        build(sample, out_dir=out, templates=TEMPLATES)
    assert tree(out / "public") == before
    assert sorted(p.name for p in out.iterdir()) == ["account", "member", "public"], "temporary folders left"


def test_build_leaves_the_cycle_collector_as_it_found_it(sample: Path, tmp_path: Path) -> None:
    """The build pauses the collector while it validates and freezes the catalog; a
    long-lived caller (serve, a test runner) must get both back, whether the build passed
    or failed, or the cycles of every later build would never be collected."""
    import gc

    out = tmp_path / "out"
    build(sample, out_dir=out, templates=TEMPLATES)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    edit(sample, "paths/starter.yaml", "- experiment: bound", "- experiment: bonud")
    with pytest.raises(ContentError):
        build(sample, out_dir=out, templates=TEMPLATES)
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_stale_files_do_not_survive(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    build(sample, out_dir=out, templates=TEMPLATES)
    (out / "public" / "old-page.html").write_text("left over")
    build(sample, out_dir=out, templates=TEMPLATES)
    assert not (out / "public" / "old-page.html").exists()
    assert filecmp.cmp(out / "public" / "index.html", out / "public" / "index.html")


def test_edited_kernel_makes_strict_fail(sample: Path, tmp_path: Path) -> None:
    (sample / "kernels/demo/01_copy.cu").write_text("// 01 copy, now different\n")
    build(sample, out_dir=tmp_path / "lax", templates=TEMPLATES)  # a warning only
    with pytest.raises(ContentError) as info:
        build(sample, out_dir=tmp_path / "strict", templates=TEMPLATES, strict=True)
    text = "\n".join(d.format() for d in info.value.diagnostics)
    assert "figure.stale" in text and "capsule 'copy-kernel'" in text
    assert "{fig:demo/01_copy.gbps}" in text
    page = (tmp_path / "lax" / "member" / "courses/demo/copy-kernel/index.html").read_text()
    assert "badge-stale" in page


def test_cli_exit_codes(sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--root", str(sample), "--templates", str(TEMPLATES)]
    assert main([*args, "build", "--out", str(tmp_path / "o")]) == 0
    assert main([*args, "check"]) == 0
    assert main([*args, "build", "--edition", "nope", "--out", str(tmp_path / "o")]) == 2
    edit(sample, "paths/starter.yaml", "- experiment: bound", "- experiment: bonud")
    assert main([*args, "check"]) == 1
    err = capsys.readouterr().err
    assert "paths/starter.yaml:15:17: error[step.unknown-ref]: no experiment 'bonud'" in err
    assert "1 error(s)" in err


def test_schema_export(tmp_path: Path) -> None:
    assert main(["--root", str(tmp_path), "schema", "--out", str(tmp_path / "s")]) == 0
    names = sorted(p.name for p in (tmp_path / "s").iterdir())
    assert "capsule.schema.json" in names and "path.schema.json" in names
    import json

    capsule = json.loads((tmp_path / "s" / "capsule.schema.json").read_text())
    assert capsule["additionalProperties"] is False
    assert all("description" in v for v in capsule["properties"].values())


def test_committed_schemas_are_current(tmp_path: Path) -> None:
    """`schemas/` is what editors read; it must match the models."""
    from curriculum.schema import export_schemas

    for path in export_schemas(tmp_path):
        committed = REPO / "schemas" / path.name
        assert committed.is_file(), f"run `curriculum schema` to add {committed.name}"
        assert committed.read_text() == path.read_text(), f"run `curriculum schema`: {path.name}"


def test_the_parsing_process_starts_without_the_builds_heavy_imports() -> None:
    """`curriculum build` forks the process that parses ahead before it imports the rest of
    the build; that start is only early if parsing needs none of the models (pydantic),
    the renderer or the checks."""
    script = ("import sys, curriculum.workers; "
              "heavy = [m for m in ('pydantic', 'curriculum.catalog', 'curriculum.models', "
              "'curriculum.render', 'curriculum.check', 'curriculum.build', 'jinja2', 'numpy') "
              "if m in sys.modules]; assert heavy == [], heavy")
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True)


def test_check_with_a_second_process_reports_what_one_process_reports(sample: Path) -> None:
    """`curriculum check` parses the later capsules in a second process too (from two
    capsules on here); the diagnostics, with their lines, are the same as without it."""
    for capsule in ("bandwidth", "tiling"):  # one parsed in place, one in the second process
        path = sample / f"content/courses/demo/capsules/{capsule}.md"
        path.write_text(path.read_text(encoding="utf-8") + "\nSee [this](capsule:no-such-one).\n",
                        encoding="utf-8")
    script = ("import sys; import curriculum.workers as w; from curriculum.cli import main; "
              "w.PARSE_ELSEWHERE_FROM = 2; sys.exit(main(['--root', sys.argv[1], 'check']))")
    said = {}
    for jobs in ("1", "2"):
        env = {**os.environ, "CURRICULUM_JOBS": jobs, "COLUMNS": "200"}
        run = subprocess.run([sys.executable, "-c", script, str(sample)], env=env,
                             capture_output=True, text=True)
        assert run.returncode != 0, run.stdout + run.stderr
        said[jobs] = run.stdout + run.stderr
    assert "tiling.md" in said["2"] and "bandwidth.md" in said["2"] and "no-such-one" in said["2"]
    assert said["1"] == said["2"]


def test_editions_built_side_by_side_match_one_at_a_time(tmp_path: Path) -> None:
    """Each build runs in a fresh interpreter: this one may hold threads (a served site, a
    browser driver), and a process with threads builds its editions one at a time. The
    side-by-side build also has its second process parse the later half of the capsules
    (a large course's way, here from two capsules on)."""
    script = ("import sys; from pathlib import Path; import curriculum.build as b; "
              "import curriculum.workers as w; "
              "assert w.can_fork(), 'no fork here'; w.PARSE_ELSEWHERE_FROM = 2; "
              "b.build(Path(sys.argv[1]), out_dir=Path(sys.argv[2]), templates=Path(sys.argv[3]))")
    for jobs in ("1", "2", "3"):  # three editions: one process, two, one each
        env = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH, "CURRICULUM_JOBS": jobs}
        subprocess.run([sys.executable, "-c", script, str(SAMPLE), str(tmp_path / jobs),
                        str(TEMPLATES)], check=True, env=env, capture_output=True)
    one = tree(tmp_path / "1")
    for jobs in ("2", "3"):
        other = tree(tmp_path / jobs)
        assert one.keys() == other.keys()
        assert [k for k in one if one[k] != other[k]] == [], jobs


_COUNT_HIGHLIGHTS = """
import os, sys
from pathlib import Path
import pygments
import curriculum.build as b
import curriculum.workers as w
assert w.can_fork(), "no fork here"
w.HIGHLIGHT_HERE = float(sys.argv[4])
real = pygments.highlight
def counted(code, lexer, formatter):
    with open(sys.argv[5], "a") as f:
        f.write(f"{os.getpid()} {code.splitlines()[0]}\\n")
    return real(code, lexer, formatter)
pygments.highlight = counted
b.build(Path(sys.argv[1]), out_dir=Path(sys.argv[2]), templates=Path(sys.argv[3]))
"""


def test_code_is_highlighted_once_by_two_processes(sample: Path, tmp_path: Path) -> None:
    """With no store from an earlier build, the building process highlights the code of
    the first files and the second process that of the others; no block is highlighted
    twice (the editions' renderers reuse both), and the next build highlights none."""
    shutil.rmtree(sample / ".cache", ignore_errors=True)  # a store the fixture was left with
    tiling = sample / "content/courses/demo/capsules/tiling.md"
    tiling.write_text(tiling.read_text(encoding="utf-8") +
                      "\n```cuda\n__device__ float twice(float x) { return 2 * x; }\n```\n",
                      encoding="utf-8")
    files = sorted((sample / "content").rglob("*.md"))
    with_code = [i for i, f in enumerate(files) if "```cuda" in f.read_text(encoding="utf-8")]
    assert len(with_code) == 2
    share = (with_code[0] + 1.5) / len(files)  # the first file with code here, the rest there
    log = tmp_path / "highlighted.txt"
    env = {**os.environ, "CURRICULUM_JOBS": "2"}
    for out in ("first", "second"):
        subprocess.run([sys.executable, "-c", _COUNT_HIGHLIGHTS, str(sample),
                        str(tmp_path / out), str(TEMPLATES), str(share), str(log)],
                       check=True, env=env, capture_output=True)
        if out == "first":
            made = [line.split(" ", 1) for line in log.read_text().splitlines()]
            log.unlink()
    blocks = [line for _, line in made]
    assert len(blocks) == len(set(blocks)) >= len(with_code), made
    assert len({pid for pid, _ in made}) == 2, made
    assert not log.exists(), "the second build highlighted again"
    assert pages(tmp_path / "first") == pages(tmp_path / "second")


def test_a_process_with_threads_builds_in_one_process(
        sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import curriculum.workers as workers

    monkeypatch.setenv("CURRICULUM_JOBS", "2")
    stop = threading.Event()
    waiter = threading.Thread(target=stop.wait)
    waiter.start()
    try:
        assert not workers.can_fork()
        forked: list[object] = []
        monkeypatch.setattr(workers, "ProcessPoolExecutor",
                            lambda *a, **k: forked.append(a) or pytest.fail("forked"))
        build(sample, out_dir=tmp_path / "out", templates=TEMPLATES)
        assert forked == []
    finally:
        stop.set()
        waiter.join()


_FAIL_MEMBER = """
import sys
from pathlib import Path
import curriculum.build as b
from curriculum.errors import ContentError, Loc
from curriculum.workers import can_fork
assert can_fork() or sys.argv[4] == "1"
real = b.LeakCheck.scan
def failing(self, files, edition, diags):
    real(self, files, edition, diags)
    if edition == "member" and "index.html" in files:
        diags.error(Loc("build/member/index.html", 1, 1), "leak.withheld-text", "planted")
b.LeakCheck.scan = failing
try:
    b.build(Path(sys.argv[1]), out_dir=Path(sys.argv[2]), templates=Path(sys.argv[3]))
except ContentError as exc:
    print("|".join(d.message for d in exc.diagnostics if d.severity == "error"))
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_one_edition_failing_leaves_both_previous_editions(
        sample: Path, tmp_path: Path, jobs: str) -> None:
    """The member edition (built by a forked worker when jobs > 1) fails its checks after
    the public one has passed and staged its folder: neither is swapped in, nothing is
    left. The failing build runs in a fresh interpreter, where forking is allowed."""
    out = tmp_path / "out"
    build(sample, out_dir=out, templates=TEMPLATES)
    before = {e: tree(out / e) for e in ("public", "member")}
    (sample / "content/site.yaml").write_text(
        (sample / "content/site.yaml").read_text().replace("title: ", "title: Renamed ", 1))
    env = {**os.environ, "CURRICULUM_JOBS": jobs}
    done = subprocess.run([sys.executable, "-c", _FAIL_MEMBER, str(sample), str(out),
                           str(TEMPLATES), jobs], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "planted"
    assert {e: tree(out / e) for e in ("public", "member")} == before
    assert sorted(p.name for p in out.iterdir()) == ["account", "member", "public"], "staged folders left"


def test_curriculum_jobs_must_be_a_number(sample: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from curriculum.errors import UsageError

    monkeypatch.setenv("CURRICULUM_JOBS", "two")
    with pytest.raises(UsageError, match="CURRICULUM_JOBS='two' is not a whole number"):
        build(sample, out_dir=tmp_path / "out", templates=TEMPLATES)
    # The command says so before it starts its parsing process, and leaves no scratch folder.
    import tempfile

    from curriculum.write import memory_folder

    scratch = Path(memory_folder() or tempfile.gettempdir())
    before = set(scratch.glob("curriculum-*"))
    assert main(["--root", str(sample), "--templates", str(TEMPLATES), "build",
                 "--out", str(tmp_path / "cli")]) != 0
    assert set(scratch.glob("curriculum-*")) == before
    assert not (tmp_path / "cli").exists()


def test_compiled_templates_are_kept_and_recompiled_when_edited(sample: Path,
                                                                 tmp_path: Path) -> None:
    """A build keeps Jinja's compiled templates in .cache/templates/ for the next one,
    which must still see a template edited since; a cache that cannot be read as
    compiled code costs a recompile, not the build."""
    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES, templates)
    out = tmp_path / "out"
    build(sample, out_dir=out, templates=templates)
    kept = sorted((sample / ".cache" / "templates").rglob("*.cache"))
    assert kept, "no compiled template was kept"
    first = (out / "public" / "index.html").read_text()
    assert "edited-footer-mark" not in first
    base = templates / "base.html"
    base.write_text(base.read_text().replace('<footer class="site-footer">',
                                             '<footer class="site-footer edited-footer-mark">', 1))
    build(sample, out_dir=out, templates=templates)
    assert "edited-footer-mark" in (out / "public" / "index.html").read_text()
    for path in kept:
        path.write_bytes(b"not compiled code")
    build(sample, out_dir=out, templates=templates)
    assert (out / "public" / "index.html").read_text() != first
