"""`curriculum new`: scaffolds from templates/scaffold/, minimal YAML edits, and
content that passes `curriculum check` as written."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TEMPLATES

from curriculum.build import build
from curriculum.cli import main
from curriculum.errors import UsageError
from curriculum.scaffold import add_drill, register_capsule

ARGS = ["--templates", str(TEMPLATES)]


def new(root: Path, *args: str) -> int:
    return main(["--root", str(root), *ARGS, "new", *args])


def test_every_kind_passes_check_and_builds(sample: Path, tmp_path: Path) -> None:
    course = sample / "content/courses/demo/course.yaml"
    before = course.read_text().splitlines()
    assert new(sample, "capsule", "warp-shuffles", "--course", "demo", "--part", "basics",
               "--title", "Warp shuffles", "--tag", "SHFL") == 0
    after = course.read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [("    capsules: [bandwidth, copy-kernel]",
                        "    capsules: [bandwidth, copy-kernel, warp-shuffles]")]
    capsule = (sample / "content/courses/demo/capsules/warp-shuffles.md").read_text()
    assert "status: draft" in capsule and 'title: "Warp shuffles"' in capsule

    assert new(sample, "question", "shuffle-cost", "--concept", "bandwidth") == 0
    question = (sample / "content/questions/shuffle-cost.md").read_text()
    assert "order: 2" in question and "<!-- answer -->" in question
    assert new(sample, "drill", "time-a-shuffle", "--lesson", "copy-kernel") == 0
    assert "      - id: time-a-shuffle\n        category: kernels" in \
        (sample / "content/ladder.yaml").read_text()
    assert new(sample, "path", "shuffles", "--step", "capsule:bandwidth",
               "--step", "question:shuffle-cost") == 0

    assert main(["--root", str(sample), *ARGS, "check", "--strict"]) == 0
    result = build(sample, out_dir=tmp_path / "out", templates=TEMPLATES, strict=True)
    course_page = result.outputs["member"].files["courses/demo/index.html"].decode()
    assert "Warp shuffles" in course_page
    assert "courses/demo/warp-shuffles/index.html" not in result.outputs["member"].files
    assert "paths/shuffles/index.html" in result.outputs["public"].files


def test_refuses_existing_ids_and_bad_targets(sample: Path) -> None:
    assert new(sample, "capsule", "bandwidth") == 2
    assert new(sample, "capsule", "fresh", "--part", "no-such-part") == 2
    assert new(sample, "capsule", "Bad_Id") == 2
    assert new(sample, "drill", "count-copy") == 2
    assert new(sample, "path", "starter") == 2
    assert not (sample / "content/courses/demo/capsules/fresh.md").exists()


def test_block_list_keeps_comments_and_layout() -> None:
    text = ("id: c\n"
            "parts:\n"
            "  # the first part\n"
            "  - id: one\n"
            "    title: One\n"
            "    capsules:\n"
            "      - a   # first\n"
            "      - b\n"
            "\n"
            "  - id: two  # second\n"
            "    capsules:\n"
            "    - c\n")
    assert register_capsule(text, "new-one", "one") == text.replace(
        "      - b\n", "      - b\n      - new-one\n")
    assert register_capsule(text, "new-two", None) == text + "    - new-two\n"
    with pytest.raises(UsageError):
        register_capsule(text, "x", "three")


def test_drill_goes_to_the_end_of_its_module() -> None:
    text = ("modules:\n"
            "  - id: M00\n"
            "    drills:\n"
            "      - id: d1\n"
            "        prompt: >-\n"
            "          Two lines\n"
            "          of prompt.\n"
            "  # next module\n"
            "  - id: M01\n"
            "    drills:\n"
            "      - id: d2\n")
    out = add_drill(text, "- id: d3\n  hours: 1\n", "d3", "M00")
    assert out == text.replace("          of prompt.\n",
                               "          of prompt.\n      - id: d3\n        hours: 1\n")
    with pytest.raises(UsageError):
        add_drill(text, "- id: d2\n", "d2", "M00")
