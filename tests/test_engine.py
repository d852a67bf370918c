"""The engine: pages streamed to disk as they render, a failed build that leaves the
previous site, navigation that does not grow with the course, memory that stays bounded,
search bundles for a large edition, and what an edit makes dirty."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from conftest import REPO, TEMPLATES, edit, search_fragments

from curriculum import engine, index, pages
from curriculum.build import build
from curriculum.engine import page_units
from curriculum.output import StagedFiles
from curriculum.serve import LiveSite

EPOCH = "1790000000"


def tree(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), int(p.stat().st_mtime))
            for p in sorted(folder.rglob("*")) if p.is_file()}


def bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_speed", REPO / "bench/build_speed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# -- streaming ---------------------------------------------------------------------------


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_failure_half_way_leaves_the_previous_site(
        sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: str) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    monkeypatch.setenv("CURRICULUM_JOBS", jobs)
    out = tmp_path / "out"
    build(sample, out_dir=out, templates=TEMPLATES)
    before = {e: tree(out / e) for e in ("public", "account", "member")}
    # A second build whose content changed, failing after some pages are on disk.
    edit(sample, "content/courses/demo/capsules/tiling.md", "title: Tiling for reuse",
         "title: Tiling, for reuse")
    real = pages.capsule
    streamed: list[str] = []

    def failing(r: object, cap_id: str) -> None:
        real(r, cap_id)  # type: ignore[arg-type]
        files = r.out.files  # type: ignore[attr-defined]
        if cap_id == "tiling":
            for s in (p for p in out.iterdir() if p.name.startswith(".")):
                # With two jobs the other edition's process may be removing its own staging
                # folder (it failed first) while this one lists it.
                with contextlib.suppress(FileNotFoundError):
                    streamed.extend(q.relative_to(s).as_posix() for q in s.rglob("*.html"))
            raise RuntimeError("the renderer failed half-way")
        assert isinstance(files, dict)  # a unit renders into memory, then streams

    monkeypatch.setattr(pages, "capsule", failing)
    monkeypatch.setitem(engine._PAGE_FUNCTIONS, "capsule", failing)
    with pytest.raises(RuntimeError, match="half-way"):
        build(sample, out_dir=out, templates=TEMPLATES)
    assert "index.html" in streamed, "pages were not on disk before the build ended"
    assert sorted(p.name for p in out.iterdir()) == ["account", "member", "public"], \
        "a staging folder was left behind"
    for edition, files in before.items():
        assert tree(out / edition) == files, f"{edition} changed"


def test_a_build_holds_no_page_in_memory(sample: Path, tmp_path: Path) -> None:
    result = build(sample, out_dir=tmp_path / "out", templates=TEMPLATES)
    for edition, out in result.outputs.items():
        assert isinstance(out.files, StagedFiles)
        assert out.files.folder == (tmp_path / "out" / edition).resolve()
        assert out.chapters == []  # in the EPUBs on disk
        # The files read back are those on disk.
        assert out.files["index.html"] == (tmp_path / "out" / edition / "index.html").read_bytes()


def test_staged_files_write_and_read_back(tmp_path: Path) -> None:
    files = StagedFiles(tmp_path, mtime=int(EPOCH))
    files["a/b/c.html"] = b"<p>c</p>"
    files["a/d.txt"] = b"d"
    files["a/d.txt"] = b"d2"  # written again: the last bytes win
    assert sorted(files) == ["a/b/c.html", "a/d.txt"] and len(files) == 2
    assert files["a/d.txt"] == b"d2" and "a/b/c.html" in files and "x" not in files
    assert int((tmp_path / "a/b/c.html").stat().st_mtime) == int(EPOCH)
    with pytest.raises(KeyError):
        files["missing.html"]
    del files["a/d.txt"]
    assert not (tmp_path / "a/d.txt").exists() and list(files) == ["a/b/c.html"]


def test_staged_files_link_another_editions_copy_and_never_write_through(tmp_path: Path
                                                                         ) -> None:
    maker = StagedFiles(tmp_path / "public", mtime=int(EPOCH))
    maker["static/x/a.pf"] = b"shared"
    other = StagedFiles(tmp_path / "member", mtime=int(EPOCH))
    assert other.link("static/x/a.pf", tmp_path / "public/static/x/a.pf")
    assert other["static/x/a.pf"] == b"shared" and "static/x/a.pf" in other
    assert (tmp_path / "member/static/x/a.pf").stat().st_ino == \
        (tmp_path / "public/static/x/a.pf").stat().st_ino
    other["static/x/a.pf"] = b"changed"  # written again: its own file, not the maker's
    assert maker["static/x/a.pf"] == b"shared" and other["static/x/a.pf"] == b"changed"
    assert not other.link("static/y.pf", tmp_path / "public/missing")  # nothing to link
    assert "static/y.pf" not in other and not (tmp_path / "member/static/y.pf").exists()


# -- navigation and memory -------------------------------------------------------------


def _corpus(tmp_path: Path, capsules: int) -> Path:
    bench = bench_module()
    bench.generate(tmp_path / str(capsules), capsules, words_per_capsule=200, seed=7)
    return tmp_path / str(capsules) / "curriculum"


def _build_measured(root: Path, out: Path) -> int:
    """Build `root` in a fresh interpreter, one edition after another in one process; return
    its peak resident memory in bytes. On Linux the peak is the new program's own (`VmHWM`
    starts again at exec), where `ru_maxrss` would carry over the forking test process's."""
    script = ("import re, resource, sys; from pathlib import Path; "
              "from curriculum.build import build; "
              "build(Path(sys.argv[1]), out_dir=Path(sys.argv[2]), templates=Path(sys.argv[3])); "
              "status = Path('/proc/self/status'); "
              "hwm = re.search(r'VmHWM:\\s+(\\d+)', status.read_text()) if status.exists() else None; "
              "print(int(hwm[1]) if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    env = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH, "CURRICULUM_JOBS": "1"}
    done = subprocess.run([sys.executable, "-c", script, str(root), str(out), str(TEMPLATES)],
                          check=True, env=env, capture_output=True, text=True)
    return int(done.stdout.split()[-1]) * 1024


def test_page_size_and_memory_do_not_grow_with_the_rest_of_the_course(tmp_path: Path) -> None:
    """The same capsule page in a course of 100 and of 400 capsules (parts of 50): its size
    grows only by the sidebar's line per extra part; the build's peak memory grows by
    less than 200 KB a capsule (both editions, in one process; about 85 KB when
    this test was written)."""
    small, large = _corpus(tmp_path, 100), _corpus(tmp_path, 400)
    peak_small = _build_measured(small, tmp_path / "site-100")
    peak_large = _build_measured(large, tmp_path / "site-400")
    sizes = []
    for n in (100, 400):
        caps = sorted((tmp_path / f"site-{n}" / "member" / "courses" / "bench").glob("*/index.html"))
        first_part = [p for p in caps if int(p.parent.name.rsplit("-", 1)[1]) <= 50]
        sizes.append(sum(p.stat().st_size for p in first_part) / len(first_part))
    extra_parts = 6
    assert sizes[1] - sizes[0] < extra_parts * 200, sizes
    per_capsule = (peak_large - peak_small) / 300
    assert per_capsule < 200_000, f"{per_capsule / 1024:.0f} KiB a capsule"
    assert peak_large < 300 * 2**20, f"{peak_large / 2**20:.0f} MiB"


def test_a_large_edition_is_indexed_in_several_bundles(
        sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "PAGEFIND_CHUNK", 4)
    result = build(sample, out_dir=tmp_path / "out", templates=TEMPLATES, editions=["member"])
    site = tmp_path / "out" / "member"
    indexed = len(result.outputs["member"].pages)
    bundles = -(-indexed // 4)
    assert bundles > 1
    entry = json.loads((site / "static/pagefind/pagefind-entry.json").read_text())
    assert entry["curriculum_bundles"] == [f"../pagefind-{i}/" for i in range(2, bundles + 1)]
    for i in range(2, bundles + 1):
        assert (site / f"static/pagefind-{i}/pagefind.js").is_file()


def test_bundles_of_several_editions_name_their_own_and_the_shared_ones(
        sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunked own bundles and chunked shared bundles together: each edition's entry file
    names all of them, and its search holds each of its indexed pages exactly once."""
    monkeypatch.setattr(index, "PAGEFIND_CHUNK", 2)
    result = build(sample, out_dir=tmp_path / "out", templates=TEMPLATES)
    for edition, out in result.outputs.items():
        site = tmp_path / "out" / edition
        entry = json.loads((site / "static/pagefind/pagefind-entry.json").read_text())
        extra = entry["curriculum_bundles"]
        shared = [x for x in extra if x.startswith("../pagefind-common")]
        assert extra[:len(extra) - len(shared)] == \
            [f"../pagefind-{i}/" for i in range(2, len(extra) - len(shared) + 2)]
        assert shared[0] == "../pagefind-common/" and len(shared) > 1
        assert search_fragments(site).keys() == {"/" + p["path"] for p in out.pages}


# -- what an edit makes dirty ------------------------------------------------------------


@pytest.fixture
def live(sample: Path, monkeypatch: pytest.MonkeyPatch) -> LiveSite:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    site = LiveSite(sample, TEMPLATES, "member")
    assert site.apply(None).ok
    return site


def _same_as_full_build(site: LiveSite) -> None:
    want = build(site.root, editions=[site.edition_id], templates=TEMPLATES,
                 write=False).outputs[site.edition_id].files
    differ = sorted(p for p in want.keys() | site.files.keys()
                    if want.get(p) != site.files.get(p) and not p.startswith("static/pagefind"))
    assert differ == []


def test_a_title_edit_re_renders_its_part_not_the_other_parts(live: LiveSite,
                                                              sample: Path) -> None:
    edit(sample, "content/courses/demo/capsules/bandwidth.md",
         "title: Bandwidth in numbers", "title: Bandwidth, in numbers")
    update = live.apply([sample / "content/courses/demo/capsules/bandwidth.md"])
    assert update.ok and not update.full
    rebuilt = {u for u in update.rebuilt if u[0] == "capsule"}
    # its page and the other capsule of its part (sidebar, pager); tiling, in the other part,
    # lists bandwidth as a prerequisite, so it is rendered again too
    assert rebuilt == {("capsule", "bandwidth"), ("capsule", "copy-kernel"),
                       ("capsule", "tiling")}
    _same_as_full_build(live)


def test_a_course_description_edit_re_renders_no_capsule_page(live: LiveSite,
                                                              sample: Path) -> None:
    course = sample / "content/courses/demo/course.yaml"
    text = course.read_text()
    assert "description:" in text
    course.write_text(text.replace("description: ", "description: Edited. ", 1))
    update = live.apply([course])
    assert update.ok
    assert not [u for u in update.rebuilt if u[0] == "capsule"]
    assert "courses/demo/index.html" in update.changed
    assert not [p for p in update.changed if p.startswith("courses/demo/") and
                p.count("/") == 3 and "syllabus" not in p]
    _same_as_full_build(live)


def test_a_part_title_edit_re_renders_every_capsule_page_of_the_course(
        live: LiveSite, sample: Path) -> None:
    course = sample / "content/courses/demo/course.yaml"
    text = course.read_text()
    assert text.count("title: Advanced") == 1
    course.write_text(text.replace("title: Advanced", "title: Further on"))
    update = live.apply([course])
    assert update.ok
    caps = {u for u in update.rebuilt if u[0] == "capsule"}
    assert caps == {u for u in page_units(live.catalog) if u[0] == "capsule"}  # type: ignore[arg-type]
    _same_as_full_build(live)


def test_a_course_edit_that_drops_a_capsule_runs_the_whole_pipeline(
        live: LiveSite, sample: Path) -> None:
    course = sample / "content/courses/demo/course.yaml"
    course.write_text(course.read_text().replace("[tiling, later]", "[tiling]"))
    update = live.apply([course])
    assert update.full and not update.ok  # later.md is now in no part
    assert any(d.code == "capsule.unlisted" for d in update.diagnostics)


# -- indexes off the edit path -------------------------------------------------------------


def test_back_to_back_edits_are_indexed_once_and_the_indexes_follow_the_last(
        live: LiveSite, sample: Path) -> None:
    from curriculum.serve import Indexer

    logged: list[object] = []
    indexer = Indexer(live, logged.append, quiet_s=0.5)
    live.indexer = indexer
    try:
        rel = "content/courses/demo/capsules/bandwidth.md"
        for i in range(3):
            edit(sample, rel, "title: Bandwidth" + ("" if i == 0 else f" {i}"),
                 f"title: Bandwidth {i + 1}")
            update = live.apply([sample / rel])
            assert update.ok and update.index_seconds == 0.0  # not made on the edit path
        assert indexer.idle(timeout=60)
        assert indexer.runs == 1 and len(logged) == 1
        _same_as_full_build(live)  # the feed, sitemap and EPUB name the last title
    finally:
        indexer.stop()


def test_an_edit_cancels_the_indexes_being_made(live: LiveSite, sample: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from curriculum import serve

    started = []
    real = serve.finish_edition

    def slow(*args: object, **kwargs: object) -> object:
        started.append(1)
        if len(started) == 1:  # the first run waits until it is cancelled
            cancelled = kwargs["cancelled"]
            deadline = time.monotonic() + 30
            while not cancelled() and time.monotonic() < deadline:  # type: ignore[operator]
                time.sleep(0.01)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(serve, "finish_edition", slow)
    indexer = serve.Indexer(live, lambda update: None, quiet_s=0.05)
    live.indexer = indexer
    try:
        rel = "content/courses/demo/capsules/bandwidth.md"
        edit(sample, rel, "title: Bandwidth in numbers", "title: Bandwidth, first")
        assert live.apply([sample / rel]).ok
        deadline = time.monotonic() + 30
        while not started and time.monotonic() < deadline:
            time.sleep(0.01)
        edit(sample, rel, "title: Bandwidth, first", "title: Bandwidth, second")
        assert live.apply([sample / rel]).ok
        assert indexer.idle(timeout=60)
        assert len(started) == 2 and indexer.runs == 1
        _same_as_full_build(live)
    finally:
        indexer.stop()


def test_serve_defaults_to_the_edition_of_the_highest_tier(
        sample: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from curriculum.cli import main

    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    site = LiveSite(sample, TEMPLATES)
    assert site.apply(None).ok and site.edition_id == "member"
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert "highest tier of site.yaml" in " ".join(capsys.readouterr().out.split())


# -- what one build hands the next ---------------------------------------------------------


def test_a_second_build_reuses_the_stored_blocks_and_formulas_and_writes_the_same_site(
        sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from curriculum import markdown, store

    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    monkeypatch.setenv("CURRICULUM_JOBS", "1")
    monkeypatch.setattr(markdown, "_HIGHLIGHTED", {})
    monkeypatch.setattr(markdown, "_MATHML", {})
    build(sample, out_dir=tmp_path / "a", templates=TEMPLATES)
    [kept] = (sample / store.STORE).glob("*.json.gz")
    data = json.loads(__import__("gzip").decompress(kept.read_bytes()))
    assert data["highlight"] and data["math"]
    first = kept.stat().st_ino
    # The next build (a fresh process, in effect) converts nothing the store has.
    monkeypatch.setattr(markdown, "_HIGHLIGHTED", {})
    monkeypatch.setattr(markdown, "_MATHML", {})
    monkeypatch.setattr(markdown, "_STORED_HIGHLIGHTED", {})
    monkeypatch.setattr(markdown, "_STORED_MATHML", {})
    import latex2mathml.converter

    def no_convert(*args: object, **kwargs: object) -> str:
        raise AssertionError("a stored formula was converted again")

    monkeypatch.setattr(latex2mathml.converter, "convert", no_convert)
    build(sample, out_dir=tmp_path / "b", templates=TEMPLATES)
    a, b = tree(tmp_path / "a"), tree(tmp_path / "b")
    assert a.keys() == b.keys() and [k for k in a if a[k] != b[k]] == []
    # That build used exactly what the store held, so it left the store as it was; a build
    # that converts a new formula writes it again, with the formula.
    assert kept.stat().st_ino == first, "an unchanged build wrote the store again"
    monkeypatch.undo()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    monkeypatch.setenv("CURRICULUM_JOBS", "1")
    capsule = sample / "content/courses/demo/capsules/bandwidth.md"
    capsule.write_text(capsule.read_text(encoding="utf-8") + "\nAlso $q_{17} + 1$.\n",
                       encoding="utf-8")
    build(sample, out_dir=tmp_path / "c", templates=TEMPLATES)
    again = json.loads(__import__("gzip").decompress(kept.read_bytes()))
    assert "q_{17} + 1" in [latex for latex, _, _ in again["math"]]


def test_no_tier_or_edition_name_is_written_into_the_generator() -> None:
    """Tier names and their order come from site.yaml; the generator's code names none."""
    import io
    import tokenize

    named = {"free", "account", "premium", "member", "members", "public"}
    found = []
    for path in sorted((REPO / "src" / "curriculum").rglob("*.py")):
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if tok.type == tokenize.STRING and tok.string.strip("'\"").lower() in named:
                found.append(f"{path.relative_to(REPO)}:{tok.start[0]}: {tok.string}")
    assert found == []


def test_a_failed_edit_leaves_the_last_good_pages_to_be_indexed(live: LiveSite,
                                                                sample: Path) -> None:
    from curriculum.serve import Indexer

    indexer = Indexer(live, lambda update: None, quiet_s=0.3)
    live.indexer = indexer
    try:
        rel = "content/courses/demo/capsules/bandwidth.md"
        edit(sample, rel, "title: Bandwidth in numbers", "title: Bandwidth, indexed")
        assert live.apply([sample / rel]).ok
        edit(sample, rel, "title: Bandwidth, indexed", "title: [unclosed")
        assert not live.apply([sample / rel]).ok
        assert indexer.idle(timeout=60) and indexer.runs == 1
        assert b"Bandwidth, indexed" in live.files["feed.xml"]
    finally:
        indexer.stop()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_benchmark_samples_the_whole_process_tree(tmp_path: Path) -> None:
    """The memory sampler of `bench/build_speed.py` finds a build's forked and spawned
    processes from the kernel's children lists, as reading every process's parent does,
    and reads the costly proportional sizes only when asked."""
    bs = bench_module()
    ready = tmp_path / "ready"
    script = ("import subprocess, sys, time; from pathlib import Path; "
              "kid = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              "Path(sys.argv[1]).write_text(str(kid.pid)); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", script, str(ready)])
    try:
        for _ in range(200):
            if ready.exists() and ready.read_text():
                break
            time.sleep(0.05)
        kid = int(ready.read_text())
        assert bs.tree_pids(proc.pid) == bs._tree_from_parents(proc.pid) == {proc.pid, kid}
        rss, pss = bs.tree_memory(proc.pid, proportional=False)
        assert rss > 0 and pss == 0
        rss, pss = bs.tree_memory(proc.pid)
        assert rss > 0 and 0 < pss <= rss
    finally:
        for pid in bs.tree_pids(proc.pid) - {proc.pid}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        proc.kill()
        proc.wait()
