"""Premium text never reaches the public edition.

A unique canary sentence goes into every field a reader below the tier must
not see; the public edition is searched byte for byte (decompressing any
gzip, zip or EPUB file, and decoding Pagefind's signed index files) and must
not hold one. The member edition must hold every canary, in its pages and in
its search index: the positive control that proves the search can find them.
"""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from pathlib import Path

import pytest
from conftest import TEMPLATES, edit

from curriculum.build import build

CAP = "content/courses/demo/capsules"


PAGEFIND_SIGNATURE = b"pagefind_dcd"


def decoded(name: str, data: bytes) -> list[tuple[str, bytes]]:
    """`data` and every readable form of it: gunzipped, unzipped, Pagefind-decoded."""
    out = [(name, data)]
    if data[:2] == b"\x1f\x8b":
        out.extend(decoded(f"{name}!gunzip", gzip.decompress(data)))
    if data.startswith(PAGEFIND_SIGNATURE):
        # A Pagefind file is gzip'd, then a signature, then the payload (JSON for fragments,
        # whose strings may escape characters): decode the JSON so escapes cannot hide text.
        payload = data[len(PAGEFIND_SIGNATURE):]
        out.append((f"{name}!pagefind", payload))
        try:
            text = json.dumps(json.loads(payload), ensure_ascii=False)
        except ValueError:
            pass
        else:
            out.append((f"{name}!pagefind-json", text.encode("utf-8")))
    if data[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for n in z.namelist():
                out.extend(decoded(f"{name}!{n}", z.read(n)))
    return out


def all_bytes(folder: Path) -> list[tuple[str, bytes]]:
    out = []
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            out.extend(decoded(str(path), path.read_bytes()))
    return out


def plant_canaries(root: Path) -> list[str]:
    canaries = [f"zebra quartz canary {i} sings under violet lamps" for i in range(6)]
    edit(root, f"{CAP}/tiling.md", "## The members part\n",
         f"## The members part\n\n{canaries[0]}.\n")
    q = "content/questions/is-it-bound.md"
    edit(root, q, "far below the ridge", f"far below the ridge. {canaries[1]}. It is")
    edit(root, q, "Guesses without arithmetic.", canaries[2])
    edit(root, q, "Computes intensity and compares with the ridge point.", canaries[3])
    edit(root, q, "Look for the ridge point stated with its units.", canaries[4])
    exp = "content/experiments/bound.md"
    edit(root, exp, "access: free", "access: premium")
    edit(root, exp, "The time is bytes over bandwidth.",
         f"The time is bytes over bandwidth.\n\n<!-- more -->\n\n{canaries[5]}.")
    return canaries


def test_no_premium_text_in_public_edition(sample: Path, tmp_path: Path) -> None:
    canaries = plant_canaries(sample)
    build(sample, out_dir=tmp_path, templates=TEMPLATES, strict=True)
    public = all_bytes(tmp_path / "public")
    member = all_bytes(tmp_path / "member")
    member_index = [(n, d) for n, d in member if "/static/pagefind/" in n and n.endswith("!pagefind-json")]
    member_epub = [(n, d) for n, d in member if ".epub!" in n]
    assert member_index and member_epub
    assert any("/static/pagefind/" in n for n, _ in public)
    for canary in canaries:
        needle = canary.encode()
        leaks = [name for name, data in public if needle in data]
        assert leaks == [], f"'{canary}' leaked into {leaks}"
        assert any(needle in data for _, data in member), f"'{canary}' missing from member"
        assert any(needle in data for _, data in member_index), \
            f"'{canary}' missing from the member search index"
    assert any(canaries[0].encode() in data for _, data in member_epub), \
        "the capsule canary is missing from the member EPUB"


def test_public_edition_keeps_preview_and_metadata(sample: Path, tmp_path: Path) -> None:
    build(sample, out_dir=tmp_path, templates=TEMPLATES)
    page = (tmp_path / "public/courses/demo/tiling/index.html").read_text()
    assert "Tiling for reuse" in page and "Each tile is loaded once." in page
    assert "Members read every capsule in full." in page
    assert "thirty-two" not in page


def test_leak_check_stops_the_build(sample: Path, tmp_path: Path) -> None:
    """A template that printed a withheld body would be caught by `check`."""
    import pytest

    from curriculum.errors import ContentError

    templates = tmp_path / "templates"
    import shutil

    shutil.copytree(TEMPLATES, templates)
    page = templates / "capsule.html"
    page.write_text(page.read_text().replace(
        "{{ preview_html }}", "{{ preview_html }}{{ cap.meta.summary }} "
        "Premium readers learn that a thirty-two by thirty-two tile cuts global reads "
        "thirty-two fold here."))
    with pytest.raises(ContentError) as info:
        build(sample, out_dir=tmp_path / "out", templates=templates)
    leaks = [d for d in info.value.diagnostics if d.code == "leak.withheld-text"]
    assert leaks
    # The message quotes eight of the leaked words, so the author can find both places.
    quoted = leaks[0].message.split('"')[1]
    assert len(quoted.split()) == 8 and quoted in (
        "premium readers learn that a thirty-two by thirty-two tile cuts global reads "
        "thirty-two fold here"
    ).replace("-", " "), leaks[0].message


def test_leak_check_reads_the_search_index(sample: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Withheld text that reached only Pagefind's (gzip'd) records is caught too, in the
    edition's own bundle and in the one shared by every edition."""
    import curriculum.index as index
    from curriculum.errors import ContentError

    real = index._searchable
    planted = ("Premium readers learn that a thirty-two by thirty-two tile cuts global reads "
               "thirty-two fold here.")
    monkeypatch.setattr(index, "_searchable",
                        lambda page: real(page).replace("</main>", f"<p>{planted}</p></main>", 1))
    with pytest.raises(ContentError) as info:
        build(sample, out_dir=tmp_path / "out", templates=TEMPLATES)
    where = {str(d.loc) for d in info.value.diagnostics if d.code == "leak.withheld-text"}
    assert where and all("/static/pagefind" in w for w in where), where
    assert any("/static/pagefind/" in w for w in where), where
    assert any("/static/pagefind-common/" in w for w in where), where


def test_a_withheld_run_shown_anyway_is_read_only_as_far_as_needed() -> None:
    """A run of withheld text that an allowed text shows too is no leak; the allowed texts
    are read only until each run a page holds has turned up; a run no allowed text shows
    is a leak, and its message names it, not the shown one."""
    from curriculum.check import LeakCheck
    from curriculum.errors import Diagnostics

    shared = "every warp loads one tile of the matrix before the loop begins"
    secret = "the hidden schedule swaps both buffers after each third barrier wait"
    withheld = [f"Intro words here. {shared}. Then {secret}."]
    read: list[int] = []

    def allowed() -> object:
        for i, text in enumerate(["a title", f"A preview: {shared}.", "never needed " * 9]):
            read.append(i)
            yield text

    check = LeakCheck(withheld, allowed)
    ok = Diagnostics()
    check.scan({"a/index.html": f"<main><p>{shared}</p></main>".encode()}, "public", ok)
    assert ok.items == [] and read == [0, 1]
    bad = Diagnostics()
    check.scan({"b/index.html": f"<main><p>{shared}. {secret}</p></main>".encode()},
               "public", bad)
    assert read == [0, 1, 2]
    assert [d.code for d in bad.items] == ["leak.withheld-text"]
    quoted = bad.items[0].message.split('"')[1]  # the run the message names
    assert len(quoted.split()) == 8 and quoted not in shared
