"""Each course's EPUB, per edition: structure, what it holds, determinism and epubcheck."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import SAMPLE, TEMPLATES

from curriculum.build import build
from curriculum.epub import epub_path

EPOCH = "1790000000"  # 2026-09-21
EPUBCHECK = Path("/usr/share/java/epubcheck.jar")


def built(out: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    build(SAMPLE, out_dir=out, templates=TEMPLATES, strict=True)
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mp = pytest.MonkeyPatch()
    try:
        return built(tmp_path_factory.mktemp("epub"), mp)
    finally:
        mp.undo()


def book(site: Path, edition: str) -> zipfile.ZipFile:
    return zipfile.ZipFile(site / edition / epub_path("demo", edition))


def text(z: zipfile.ZipFile, name: str) -> str:
    return z.read(name).decode("utf-8")


def test_course_page_links_its_edition_epub(site: Path) -> None:
    for edition in ("public", "account", "member"):
        page = (site / edition / "courses/demo/index.html").read_text()
        assert f'href="demo-{edition}.epub"' in page


def test_container_layout_and_timestamps(site: Path) -> None:
    z = book(site, "public")
    infos = z.infolist()
    assert infos[0].filename == "mimetype" and infos[0].compress_type == zipfile.ZIP_STORED
    assert z.read("mimetype") == b"application/epub+zip"
    assert {i.date_time for i in infos} == {(2026, 9, 21, 0, 0, 0)}
    opf = text(z, "OEBPS/package.opf")
    assert '<meta property="dcterms:modified">2026-09-21T00:00:00Z</meta>' in opf
    assert "<dc:title>Demo Course</dc:title>" in opf


def test_toc_math_code_and_figures(site: Path) -> None:
    z = book(site, "member")
    nav = text(z, "OEBPS/nav.xhtml")
    assert nav.index("Basics") < nav.index("Bandwidth in numbers") < nav.index("Advanced") \
        < nav.index("Tiling for reuse")
    assert "Something later" not in nav  # drafts are not written
    chapter = text(z, "OEBPS/c-bandwidth.xhtml")
    assert "<math" in chapter and 'class="highlight"' in chapter
    assert 'href="c-copy-kernel.xhtml"' in chapter
    assert 'href="https://demo.example.org/questions/is-it-bound/"' in chapter
    assert 'properties="mathml"' in text(z, "OEBPS/package.opf")
    svgs = [n for n in z.namelist() if n.endswith(".svg")]
    assert svgs and b"<!DOCTYPE" not in z.read(svgs[0])
    assert f'src="{svgs[0].removeprefix("OEBPS/")}"' in text(z, "OEBPS/c-tiling.xhtml")


def test_public_epub_holds_preview_not_withheld_text(site: Path) -> None:
    z = book(site, "public")
    everything = b"".join(z.read(n) for n in z.namelist())
    assert b"thirty-two fold" not in everything
    assert b"coalesced loads" not in everything
    tiling = text(z, "OEBPS/c-tiling.xhtml")
    assert "Each tile is loaded once." in tiling and "Members read every capsule" in tiling
    assert not any(n.endswith(".svg") for n in z.namelist())


def test_epub_is_byte_identical_across_builds(site: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    again = built(tmp_path, monkeypatch)
    for edition in ("public", "account", "member"):
        rel = epub_path("demo", edition)
        assert (again / edition / rel).read_bytes() == (site / edition / rel).read_bytes()


def test_epubcheck_passes(site: Path) -> None:
    epubcheck([site / e / epub_path("demo", e) for e in ("public", "account", "member")])


def epubcheck(books: list[Path]) -> None:
    """Run epubcheck on each book, all at once; fail on any error."""
    java = shutil.which("java")
    if java is None or not EPUBCHECK.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail("epubcheck is not installed; CI must install it (apt-get install -y epubcheck)")
        pytest.skip("epubcheck is not installed (apt-get install -y epubcheck)")
    # C1 only and the serial collector: epubcheck is a short run, so JVM start-up dominates.
    cmd = [java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-jar", str(EPUBCHECK), "-q"]
    runs = [subprocess.Popen([*cmd, str(b)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True) for b in books]
    for run in runs:
        output, _ = run.communicate(timeout=300)
        assert run.returncode == 0 and "ERROR" not in output and "FATAL" not in output, output


def _xml_tree(fragment: str) -> str:
    """A fragment as canonical XML, so that equivalent escapes compare equal."""
    import xml.etree.ElementTree as ET

    return ET.canonicalize(f"<div>{fragment}</div>")


def test_fast_xhtml_matches_the_html_parser_on_rendered_chapters() -> None:
    from curriculum.epub import _Xhtml, _xhtml_fast

    result = build(SAMPLE, templates=TEMPLATES, write=False)
    chapters = [c for out in result.outputs.values() for c in out.chapters]
    assert chapters
    for c in chapters:
        fast = _xhtml_fast(c.html, lambda href: "book/" + href)
        assert fast is not None, c.path  # the renderer's own markup takes the fast path
        slow = _Xhtml({"link": lambda href: "book/" + href})
        slow.feed(c.html)
        assert _xml_tree(fast) == _xml_tree(slow.result()), c.path


@pytest.mark.parametrize("fragment", [
    '<p>a&nbsp;b</p>',                     # an HTML entity XML does not know
    '<p><input type="checkbox" disabled> done</p>',  # a bare attribute
    '<p>one<br>two<p>three',               # unclosed elements
    '<!-- note --><p>x</p>',               # a comment
])
def test_fast_xhtml_declines_what_is_not_xml_and_the_fallback_mends_it(fragment: str) -> None:
    from curriculum.epub import _Xhtml, _xhtml_fast

    assert _xhtml_fast(fragment, lambda href: href) is None
    slow = _Xhtml({"link": lambda href: href})
    slow.feed(fragment)
    _xml_tree(slow.result())  # well-formed: parses without error


def test_fast_xhtml_rewrites_links_and_closes_void_elements() -> None:
    from curriculum.epub import _xhtml_fast

    out = _xhtml_fast('<p><a href="../x/index.html?a=1&amp;b=2">x</a><img src="f.svg" alt="f"></p>',
                      lambda href: f"[{href}]")
    assert out == ('<p><a href="[../x/index.html?a=1&amp;b=2]">x</a>'
                   '<img src="[f.svg]" alt="f" /></p>')
