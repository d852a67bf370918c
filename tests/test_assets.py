"""Confinement: a page can publish only regular files of the content folder.

One crafted capsule per escape class: each build fails with the class's code at the
image's file:line:col, exits non-zero, leaves the previous site in the out folder as it
was, and no byte of the outside file reaches any edition."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import TEMPLATES

from curriculum.assets import Asset, Refused, confine, read_asset
from curriculum.cli import main

CAP = "content/courses/demo/capsules"
SECRET = b"<svg xmlns='http://www.w3.org/2000/svg'><!-- OUTSIDE-SECRET-7f3a --></svg>"
MARK = b"OUTSIDE-SECRET-7f3a"
WHERE = f"{CAP}/bandwidth.md:25:12"


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


def plant_image(root: Path, ref: str) -> None:
    path = root / CAP / "bandwidth.md"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("## The kernel", f"## The kernel\n\n![A chart]({ref})", 1),
                    encoding="utf-8")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.svg").write_bytes(SECRET)
    return folder


def _absolute(root: Path, outside: Path) -> str:
    return str(outside / "secret.svg")


def _home(root: Path, outside: Path) -> str:
    os.environ["HOME"] = str(outside)  # restored by monkeypatch in the test
    return "~/secret.svg"


def _escape(root: Path, outside: Path) -> str:
    return os.path.relpath(outside / "secret.svg", root / CAP)


def _symlink(root: Path, outside: Path) -> str:
    (root / CAP / "chart.svg").symlink_to(outside / "secret.svg")
    return "chart.svg"


def _symlinked_folder(root: Path, outside: Path) -> str:
    (root / CAP / "figures").symlink_to(outside, target_is_directory=True)
    return "figures/secret.svg"


def _device(root: Path, outside: Path) -> str:
    (root / CAP / "zero.svg").symlink_to("/dev/zero")  # reading it would never end
    return "zero.svg"


def _fifo(root: Path, outside: Path) -> str:
    os.mkfifo(root / CAP / "pipe.svg")  # reading it would block the build
    return "pipe.svg"


def _directory(root: Path, outside: Path) -> str:
    (root / CAP / "chart.svg").mkdir()
    return "chart.svg"


def _too_large(root: Path, outside: Path) -> str:
    site = root / "content/site.yaml"
    site.write_text(site.read_text(encoding="utf-8") + "max_asset_bytes: 64\n", encoding="utf-8")
    (root / CAP / "big.svg").write_bytes(SECRET)  # inside, but over the limit
    return "big.svg"


CLASSES: dict[str, tuple[Callable[[Path, Path], str], str]] = {
    "absolute": (_absolute, "asset.absolute"),
    "home": (_home, "asset.home"),
    "dotdot": (_escape, "asset.escape"),
    "symlink": (_symlink, "asset.symlink"),
    "symlinked-folder": (_symlinked_folder, "asset.symlink"),
    "device": (_device, "asset.device"),
    "fifo": (_fifo, "asset.fifo"),
    "directory": (_directory, "asset.directory"),
    "too-large": (_too_large, "asset.too-large"),
}


@pytest.mark.parametrize("case", sorted(CLASSES))
def test_escape_fails_the_build_and_publishes_nothing(
        case: str, sample: Path, outside: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", os.environ.get("HOME", "/"))
    out = tmp_path / "out"
    base = ["--root", str(sample), "--templates", str(TEMPLATES)]
    assert main([*base, "build", "--out", str(out)]) == 0
    before = tree(out)
    assert before and not any(MARK in data for data in before.values())
    capsys.readouterr()

    make, code = CLASSES[case]
    plant_image(sample, make(sample, outside))
    status = main([*base, "build", "--out", str(out)])
    err = capsys.readouterr().err

    assert status != 0
    assert f"{WHERE}: error[{code}]" in err, err
    assert tree(out) == before, "the previous site changed"
    for path in out.rglob("*"):  # every edition, and anything left half-written
        if path.is_file() and not path.is_symlink():
            assert MARK not in path.read_bytes(), f"{path} holds the outside file"
    assert main([*base, "check"]) != 0
    assert f"{WHERE}: error[{code}]" in capsys.readouterr().err


def test_a_source_file_linked_from_outside_is_refused(
        sample: Path, outside: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capsule file that is a symlink to a file elsewhere would publish that file."""
    (outside / "notes.md").write_bytes(b"---\ntitle: T\ntag: T\naccess: free\nkind: concept\n"
                                       b"summary: S\n---\n" + MARK + b"\n")
    (sample / CAP / "later.md").unlink()
    (sample / CAP / "later.md").symlink_to(outside / "notes.md")
    out = tmp_path / "out"
    assert main(["--root", str(sample), "--templates", str(TEMPLATES), "build",
                 "--out", str(out)]) != 0
    assert f"{CAP}/later.md:1:1: error[asset.symlink]" in capsys.readouterr().err
    assert not out.exists() or not any(MARK in p.read_bytes() for p in out.rglob("*") if p.is_file())


def test_files_inside_content_are_published(sample: Path, tmp_path: Path) -> None:
    """A relative path through '..' or a symlink that stays inside the content folder is fine."""
    shared = sample / "content/courses/demo/figures"
    shared.mkdir()
    (shared / "bytes.svg").write_bytes(b"<svg xmlns='http://www.w3.org/2000/svg'><!-- in --></svg>")
    (sample / CAP / "alias.svg").symlink_to(shared / "bytes.svg")
    plant_image(sample, "../figures/bytes.svg")
    path = sample / CAP / "bandwidth.md"
    path.write_text(path.read_text(encoding="utf-8") + "\n![Same bytes](alias.svg)\n",
                    encoding="utf-8")
    out = tmp_path / "out"
    assert main(["--root", str(sample), "--templates", str(TEMPLATES), "build",
                 "--out", str(out)]) == 0
    assert any(b"<!-- in -->" in data for name, data in tree(out / "public").items()
               if name.startswith("assets/"))


def test_confine_decides_and_read_rechecks(tmp_path: Path) -> None:
    content = tmp_path / "content"
    content.mkdir()
    (content / "a.svg").write_bytes(b"abc")
    found = confine("a.svg", content, content, max_bytes=3)
    assert isinstance(found, Asset) and read_asset(found, 3) == b"abc"
    assert isinstance(confine("a%2Esvg", content, content), Asset)  # decoded as a browser would
    refused = confine("%2e%2e/x.svg", content, content)
    assert isinstance(refused, Refused) and refused.code == "asset.escape"
    assert getattr(confine("a.svg", content, content, max_bytes=2), "code", None) == "asset.too-large"
    assert getattr(confine("nope.svg", content, content), "code", None) == "image.missing"
    # Swapped for a symlink after the check: the read refuses it.
    (content / "a.svg").unlink()
    (content / "a.svg").symlink_to("/dev/zero")
    with pytest.raises(OSError):
        read_asset(found, 3)
