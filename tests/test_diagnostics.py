"""One test per error code: each plants one mistake in the sample project and
asserts the exact `path:line:col: severity[code]: message` it produces."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import TEMPLATES, edit

from curriculum.build import check_project
from curriculum.errors import Diagnostics

CAP = "content/courses/demo/capsules"
COURSE = "content/courses/demo/course.yaml"


def messages(root: Path) -> list[str]:
    diags, _, _ = check_project(root, TEMPLATES)
    return [d.format() for d in diags.sorted()]


def write(rel: str, text: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return apply


def replace(rel: str, old: str, new: str) -> Callable[[Path], None]:
    return lambda root: edit(root, rel, old, new)


def both(*fns: Callable[[Path], None]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        for fn in fns:
            fn(root)
    return apply


PLACEMENT = "content/placement.yaml"

CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "yaml.syntax": (replace(COURSE, "level: intermediate", "level: [intermediate"),
                    f"{COURSE}:6:8: error[yaml.syntax]: while parsing a flow sequence expected ',' or ']', "
                    "but got ':'"),
    "yaml.duplicate-key": (replace(COURSE, "level: intermediate", "level: intermediate\nlevel: advanced"),
                           f"{COURSE}:6:1: error[yaml.duplicate-key]: key 'level' appears twice in one mapping (first at line 5); remove one of them"),
    "yaml.alias": (replace("paths/starter.yaml", "bring: [Linear algebra.]", "bring: &b [Linear algebra.]\nfits: *b"),
                   "paths/starter.yaml:1:1: error[yaml.alias]: anchors, aliases and merge keys are not allowed; write the value out"),
    "yaml.empty": (write("content/ladder.yaml", "# nothing yet\n"),
                   "content/ladder.yaml:1:1: error[yaml.empty]: the file holds no YAML mapping"),
    "front-matter.missing": (write(f"{CAP}/tiling.md", "# Tiling\n"),
                             f"{CAP}/tiling.md:1:1: error[front-matter.missing]: a Markdown source must start with front matter between '---' lines"),
    "front-matter.unclosed": (write(f"{CAP}/tiling.md", "---\ntitle: x\n"),
                              f"{CAP}/tiling.md:1:1: error[front-matter.unclosed]: front matter has no closing '---' line"),
    "front-matter.empty": (write(f"{CAP}/tiling.md", "---\n---\nbody\n"),
                           f"{CAP}/tiling.md:2:1: error[front-matter.empty]: front matter is empty"),
    "file.name": (write(f"{CAP}/Bad_Name.md", "---\ntitle: x\n---\n"),
                  f"{CAP}/Bad_Name.md:1:1: error[file.name]: 'Bad_Name.md': file names are ids: lower-case letters, digits and hyphens"),
    "file.encoding": (lambda root: (root / f"{CAP}/tiling.md").write_bytes(b"---\ntitle: \xff\n---\n"),
                      f"{CAP}/tiling.md:1:1: error[file.encoding]: not UTF-8: invalid start byte"),
    "course.no-file": (lambda root: (root / "content/courses/empty").mkdir(),
                       "content/courses/empty:1:1: error[course.no-file]: course folder 'empty' has no course.yaml"),
    "schema.unknown-key": (replace(COURSE, "level: intermediate", "level: intermediate\nsubtitel: x"),
                           f"{COURSE}:6:1: error[schema.unknown-key]: unknown key 'subtitel'; did you mean 'subtitle'?"),
    "schema.missing": (replace(COURSE, "level: intermediate\n", ""),
                       f"{COURSE}:1:1: error[schema.missing]: missing required key 'level'"),
    "schema.type": (replace("paths/starter.yaml", "title: Starter path", "title: 3.10"),
                    "paths/starter.yaml:2:8: error[schema.type]: title: input should be a valid string, got number 3.1; YAML read 3.1 as float; quote it to keep it text"),
    "schema.value": (replace(COURSE, "level: intermediate", "level: expert"),
                     f"{COURSE}:5:8: error[schema.value]: level: Input should be 'beginner', 'intermediate' or 'advanced'"),
    "access.unknown-tier": (replace(f"{CAP}/tiling.md", "access: premium", "access: premum"),
                            f"{CAP}/tiling.md:4:9: error[access.unknown-tier]: no access tier 'premum'; did you mean 'premium'?"),
    "site.duplicate-tier": (replace("content/site.yaml", "  - id: account", "  - id: free"),
                            "content/site.yaml:9:9: error[site.duplicate-tier]: tier 'free' is declared twice"),
    "tier.no-offer": (replace("content/site.yaml", "    offer:\n      gives: Every page in full.\n      price: Paid membership\n      join_label: Become a member\n      join_url: \"https://join.demo.example.org/member/\"\n      sign_in_url: \"https://member.demo.example.org/\"\n", ""),
                      "content/site.yaml:18:5: error[tier.no-offer]: tier 'premium' says nothing about what it gives or where to get it"),
    "placement.unknown-course": (replace(PLACEMENT, "course: demo", "course: dmeo"),
                                 f"{PLACEMENT}:3:9: error[placement.unknown-course]: no course 'dmeo'; did you mean 'demo'?"),
    "placement.duplicate-id": (replace(PLACEMENT, "id: fp16-size", "id: copy-bytes"),
                               f"{PLACEMENT}:15:9: error[placement.duplicate-id]: item 'copy-bytes' is declared twice"),
    "placement.unknown-part": (replace(PLACEMENT, "min: {basics: 1}", "min: {basic: 1}"),
                               f"{PLACEMENT}:107:11: error[placement.unknown-part]: no part 'basic' in course 'demo'; did you mean 'basics'?"),
    "placement.unknown-capsule": (replace(PLACEMENT, "capsule: bandwidth\n    prompt: \"A copy", "capsule: bandwith\n    prompt: \"A copy"),
                                  f"{PLACEMENT}:7:14: error[placement.unknown-capsule]: no capsule 'bandwith'; did you mean 'bandwidth'?"),
    "placement.draft-capsule": (replace(f"{CAP}/tiling.md", "kind: concept", "kind: concept\nstatus: draft"),
                                f"{PLACEMENT}:57:14: warning[placement.draft-capsule]: capsule 'tiling' is a draft"),
    "placement.answer-range": (replace(PLACEMENT, "    answer: 1\n    explain: \"Each value", "    answer: 3\n    explain: \"Each value"),
                               f"{PLACEMENT}:13:13: error[placement.answer-range]: answer 3 but only 3 choices (counted from 0)"),
    "placement.unknown-path": (replace(PLACEMENT, "path: advanced", "path: advance"),
                               f"{PLACEMENT}:106:11: error[placement.unknown-path]: no path 'advance'; did you mean 'advanced'?"),
    "placement.no-default": (replace(PLACEMENT, "  - path: starter\n", "  - path: starter\n    min_total: 0.5\n"),
                             f"{PLACEMENT}:109:5: error[placement.no-default]: the last rule has minimums"),
    "site.base-url": (replace("content/site.yaml", "https://demo.example.org/", "https://demo.example.org"),
                      "content/site.yaml:4:11: error[site.base-url]: base_url must end in '/'"),
    "site.unknown-course": (replace("content/site.yaml", "courses: [demo]", "courses: [demo, dmeo2]"),
                            "content/site.yaml:36:17: error[site.unknown-course]: no course 'dmeo2'; did you mean 'demo'?"),
    "course.id-mismatch": (replace(COURSE, "id: demo", "id: demos"),
                           f"{COURSE}:1:5: error[course.id-mismatch]: course id 'demos' differs from its folder 'demo'"),
    "course.duplicate-part": (replace(COURSE, "id: advanced", "id: basics"),
                              f"{COURSE}:12:9: error[course.duplicate-part]: part id 'basics' is used twice"),
    "course.duplicate-capsule": (replace(COURSE, "[tiling, later]", "[tiling, later, bandwidth]"),
                                 f"{COURSE}:15:31: error[course.duplicate-capsule]: capsule 'bandwidth' is already listed as 1.1"),
    "course.unknown-capsule": (replace(COURSE, "[tiling, later]", "[tilling, later]"),
                               f"{COURSE}:15:16: error[course.unknown-capsule]: no capsule 'tilling' in content/courses/demo/capsules/; did you mean 'tiling'?"),
    "capsule.duplicate-id": (both(write("content/courses/other/course.yaml",
                                        "id: other\ntitle: O\nsubtitle: O\ndescription: O\nlevel: beginner\nauthors: [A]\nparts:\n  - id: p\n    title: P\n    summary: P\n    capsules: [tiling]\n"),
                                  write("content/courses/other/capsules/tiling.md",
                                        "---\ntitle: T\ntag: T\naccess: free\nkind: concept\nsummary: S\n---\nBody.\n")),
                             "content/courses/demo/capsules/tiling.md:1:1: error[capsule.duplicate-id]: capsule id 'tiling' is used by 2 files"),
    "capsule.unknown-prerequisite": (replace(f"{CAP}/tiling.md", "prerequisites: [bandwidth]", "prerequisites: [bandwith]"),
                                     f"{CAP}/tiling.md:7:17: error[capsule.unknown-prerequisite]: no capsule 'bandwith'; did you mean 'bandwidth'?"),
    "capsule.unlisted": (write(f"{CAP}/orphan.md", "---\ntitle: O\ntag: O\naccess: free\nkind: concept\nsummary: S\n---\nBody.\n"),
                         f"{CAP}/orphan.md:1:1: error[capsule.unlisted]: capsule 'orphan' is in no part of course 'demo'; add it to content/courses/demo/course.yaml"),
    "capsule.empty": (replace(f"{CAP}/later.md", "status: draft\n", ""),
                      f"{CAP}/later.md:8:1: error[capsule.empty]: a ready capsule needs a body; write it, or set status: draft"),
    "capsule.prerequisite-cycle": (replace(f"{CAP}/bandwidth.md", "kind: concept", "kind: concept\nprerequisites: [tiling]"),
                                   f"{CAP}/bandwidth.md:6:16: error[capsule.prerequisite-cycle]: prerequisites form a cycle: bandwidth -> tiling -> bandwidth"),
    "question.duplicate-order": (write("content/questions/second.md", (Path(__file__).parent / "fixtures/sample/content/questions/is-it-bound.md").read_text()),
                                 "content/questions/second.md:6:8: error[question.duplicate-order]: track 'basics' already has order 1 ('is-it-bound')"),
    "question.unknown-concept": (replace("content/questions/is-it-bound.md", "[bandwidth, tiling]", "[bandwidth, tilling]"),
                                 "content/questions/is-it-bound.md:7:23: error[question.unknown-concept]: no capsule 'tilling'; did you mean 'tiling'?"),
    "question.no-answer": (replace("content/questions/is-it-bound.md", "<!-- answer -->", ""),
                           "content/questions/is-it-bound.md:14:1: error[question.no-answer]: no '<!-- answer -->' line between the question and the answer"),
    "experiment.no-script": (replace("content/experiments/bound.md", "script: decode-economics", "script: nothing-here"),
                             "content/experiments/bound.md:5:9: error[experiment.no-script]: no script templates/static/js/experiments/nothing-here.js"),
    "step.unknown-ref": (replace("paths/starter.yaml", "- experiment: bound", "- experiment: bonud"),
                         "paths/starter.yaml:15:17: error[step.unknown-ref]: no experiment 'bonud'; did you mean 'bound'?"),
    "ladder.duplicate-id": (replace("content/ladder.yaml", "        lesson: bandwidth", "        lesson: bandwidth\n      - id: count-copy\n        category: kernels\n        title: T\n        prompt: P\n        artifact: A\n        hours: 1\n        lesson: bandwidth"),
                            "content/ladder.yaml:15:13: error[ladder.duplicate-id]: drill 'count-copy' is declared twice"),
    "drill.unknown-lesson": (replace("content/ladder.yaml", "lesson: bandwidth", "lesson: bandwdth"),
                             "content/ladder.yaml:14:17: error[drill.unknown-lesson]: no capsule 'bandwdth'; did you mean 'bandwidth'?"),
    "syllabus.unknown-capsule": (replace("content/courses/demo/syllabus.yaml", "capsule: copy-kernel", "capsule: copy-kernal"),
                                 "content/courses/demo/syllabus.yaml:10:18: error[syllabus.unknown-capsule]: no capsule 'copy-kernal' in course 'demo'; did you mean 'copy-kernel'?"),
    "syllabus.count-mismatch": (replace("content/courses/demo/syllabus.yaml", "widgets: 0", "widgets: 2"),
                                "content/courses/demo/syllabus.yaml:8:18: error[syllabus.count-mismatch]: 'bandwidth' has widgets 0 by its content, not 2; delete 'widgets:' (it is computed) or change the capsule"),
    "syllabus.missing-capsule": (replace("content/courses/demo/syllabus.yaml", "      - capsule: tiling\n", ""),
                                 "content/courses/demo/syllabus.yaml:4:3: warning[syllabus.missing-capsule]: capsule 'tiling' (part 'advanced') is in no unit; add it to a unit: the syllabus covers the whole course"),
    "link.unknown-ref": (replace(f"{CAP}/bandwidth.md", "(capsule:copy-kernel)", "(capsule:copy-kernal)"),
                         f"{CAP}/bandwidth.md:25:1: error[link.unknown-ref]: no capsule 'copy-kernal'; did you mean 'copy-kernel'?"),
    "link.scheme": (replace(f"{CAP}/bandwidth.md", "(question:is-it-bound)", "(JavaScript:alert(1))"),
                    f"{CAP}/bandwidth.md:25:1: error[link.scheme]: link scheme 'javascript' is not allowed; use http, https, mailto, capsule:, question: or experiment:"),
    "image.no-alt": (both(write(f"{CAP}/fig.svg", "<svg xmlns='http://www.w3.org/2000/svg'/>"),
                          replace(f"{CAP}/bandwidth.md", "## The kernel", "## The kernel\n\n![](fig.svg)")),
                     f"{CAP}/bandwidth.md:25:1: error[image.no-alt]: image 'fig.svg' has no alt text; write ![what the figure shows](path)"),
    "image.missing": (replace(f"{CAP}/bandwidth.md", "## The kernel", "## The kernel\n\n![A chart](nope.svg)"),
                      f"{CAP}/bandwidth.md:25:12: error[image.missing]: image file 'nope.svg' does not exist"),
    "code.unknown-language": (replace(f"{CAP}/bandwidth.md", "```cuda", "```cudaa"),
                              f"{CAP}/bandwidth.md:27:1: error[code.unknown-language]: unknown code language 'cudaa'; did you mean 'cuda'?"),
    "math.invalid": (replace(f"{CAP}/bandwidth.md", "$2n$", "$x^$"),
                     f"{CAP}/bandwidth.md:13:1: error[math.invalid]: cannot render math 'x^': "
                     "MissingSuperScriptOrSubscriptError"),
    "estimate.syntax": (replace(f"{CAP}/bandwidth.md", "so it moves $2n$ bytes.", "so it moves {est:2 GiB} bytes."),
                        f"{CAP}/bandwidth.md:13:49: error[estimate.syntax]: '{{est:2 GiB}}' has no '|' between the value and its arithmetic; write it as {{est:2.1 ms | 32 layers × 64 µs}}"),
    "spec.syntax": (replace(f"{CAP}/bandwidth.md", "{spec:4 TB/s | the card's datasheet}", "{spec:4 TB/s | }"),
                    f"{CAP}/bandwidth.md:35:14: error[spec.syntax]: '{{spec:4 TB/s | }}' has an empty source; write it as {{spec:4.8 TB/s | NVIDIA H200 datasheet}}"),
    "prose.typed-number": (replace(f"{CAP}/bandwidth.md", "| 1 GiB | 2 GiB moved |", "| 1 GiB | 2 GiB moved in 0.5 ms |"),
                           f"{CAP}/bandwidth.md:17:26: warning[prose.typed-number]: '0.5 ms' in prose is neither a measured figure, an estimate nor a spec-sheet constant; cite it as {{fig:…}}, or write {{est:value | arithmetic}} or {{spec:value | source}}"),
    "figure.unknown-field": (replace(f"{CAP}/copy-kernel.md", "01_copy.gbps", "01_copy.gbs"),
                             f"{CAP}/copy-kernel.md:11:1: error[figure.unknown-field]: cases have no field 'gbs'; did you mean 'gbps'?"),
    "figure.unknown-case": (replace(f"{CAP}/copy-kernel.md", "{fig:demo/01_copy.gbps}", "{fig:demo/01_cpy.gbps}"),
                            f"{CAP}/copy-kernel.md:11:1: error[figure.unknown-case]: no kernel kernels/demo/01_cpy.cu; did you mean 'demo/01_copy'?"),
    "figure.missing": (both(write("kernels/demo/03_copy_new.cu", "// 03 new\n"),
                            replace(f"{CAP}/copy-kernel.md", "{fig:demo/01_copy.gbps}", "{fig:demo/03_copy_new.gbps}")),
                       f"{CAP}/copy-kernel.md:11:1: warning[figure.missing]: capsule 'copy-kernel' cites {{fig:demo/03_copy_new.gbps}}, which is not measured: demo/03_copy_new has no result on test-gpu yet; run `curriculum bench` on a GPU"),
    "figure.stale": (lambda root: (root / "kernels/demo/01_copy.cu").write_text("// 01 copy, edited\n"),
                     f"{CAP}/copy-kernel.md:11:1: warning[figure.stale]: capsule 'copy-kernel' cites {{fig:demo/01_copy.gbps}}, but kernel source changed since it was measured (kernels/demo/01_copy); re-run `curriculum bench`"),
    "figure.syntax": (replace("content/experiments/bound.md", "default_from: ceiling/copy.tbps", "default_from: copy"),
                      "content/experiments/bound.md:1:1: error[figure.syntax]: default_from 'copy' is not 'topic/version.field' or 'ceiling/name.field'"),
    "chart.invalid": (replace(f"{CAP}/tiling.md", "kind: ladder", "kind: pie"),
                      f"{CAP}/tiling.md:20:1: error[chart.invalid]: kind: "),
    "results.invalid": (replace("kernels/results/test-gpu.json", '"median_ms": 0.3,', '"median_ms": "fast",'),
                        "kernels/results/test-gpu.json:"),
    "results.slug": (lambda root: (root / "kernels/results/test-gpu.json").rename(root / "kernels/results/other-gpu.json"),
                     "kernels/results/other-gpu.json:1:1: error[results.slug]: file holds gpu_slug 'test-gpu' but is named other-gpu.json"),
}


@pytest.mark.parametrize("code", sorted(CASES))
def test_error_code(sample: Path, code: str) -> None:
    plant, expected = CASES[code]
    assert [m for m in messages(sample) if "chart.unavailable" not in m] == [], "the sample project must be clean"
    plant(sample)
    found = messages(sample)
    matching = [m for m in found if f"[{code}]" in m]
    assert matching, f"no [{code}] in {found}"
    assert any(m.startswith(expected) for m in matching), matching


def test_project_without_site(tmp_path: Path) -> None:
    diags, catalog, _ = check_project(tmp_path, TEMPLATES)
    assert catalog is None
    assert [d.format() for d in diags.sorted()] == [
        "content/site.yaml:1:1: error[project.no-site]: no content/site.yaml here; "
        "run in a project folder or pass --root DIR"
    ]


def test_all_errors_reported_at_once(sample: Path) -> None:
    edit(sample, COURSE, "level: intermediate", "level: expert")
    edit(sample, "paths/starter.yaml", "- experiment: bound", "- experiment: bonud")
    edit(sample, f"{CAP}/tiling.md", "access: premium", "access: premum")
    codes = {m.split("[")[1].split("]")[0] for m in messages(sample)}
    assert codes == {"schema.value", "step.unknown-ref", "access.unknown-tier"}


def test_bare_no_in_string_field_is_refused(sample: Path) -> None:
    edit(sample, "paths/starter.yaml", "title: Starter path", "title: no")
    assert messages(sample) == [
        "paths/starter.yaml:2:8: error[schema.type]: title: input should be a valid string, "
        "got boolean false; YAML read False as bool; quote it to keep it text"
    ]


def test_diagnostics_sort_and_dedupe() -> None:
    from curriculum.errors import Loc

    d = Diagnostics()
    d.error(Loc("b.yaml", 2, 1), "x", "second")
    d.error(Loc("a.yaml", 9, 1), "x", "first")
    d.error(Loc("a.yaml", 9, 1), "x", "first")
    assert [x.message for x in d.sorted()] == ["first", "second"]
