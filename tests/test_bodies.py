"""Bodies parsed by a second process while the first validates: the tokens it sends back are
those `parse` makes here, and a body it did not send (or a process that failed) is parsed
here instead."""

from __future__ import annotations

import marshal
from pathlib import Path

import pytest
from conftest import REPO, SAMPLE

from curriculum import bodies
from curriculum.bodies import parse_body, parse_capsule_files, parsed_elsewhere
from curriculum.errors import Diagnostics
from curriculum.load import markdown_doc
from curriculum.markdown import flat_tokens, parse, split_at_marker, tokens_from_flat

CAPSULES = sorted((SAMPLE / "content" / "courses").glob("*/capsules/*.md"))


def shipped_bodies() -> list[str]:
    """Every Markdown file of the shipped course and the sample site, whole."""
    files = sorted((REPO / "content").rglob("*.md")) + sorted(SAMPLE.rglob("*.md"))
    return [f.read_text(encoding="utf-8") for f in files]


def test_tokens_survive_the_trip_between_processes() -> None:
    texts = shipped_bodies()
    assert len(texts) > 20
    for text in texts:
        tokens = parse(text)
        back = tokens_from_flat(marshal.loads(marshal.dumps(flat_tokens(tokens))))
        assert back == tokens  # every field of every token and child


def _bodies_of(path: Path) -> list[tuple[str, str, int]]:
    doc = markdown_doc(SAMPLE, path, "capsule", Diagnostics())
    assert doc is not None
    head, tail, at = split_at_marker(doc.body, "more")
    found = [(head, doc.file, doc.body_line)]
    if tail is not None:
        found.append((tail, doc.file, doc.body_line + at))
    return found


def test_parse_body_takes_what_the_other_process_parsed(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    sent = parse_capsule_files(SAMPLE, CAPSULES)
    files = [p.relative_to(SAMPLE).as_posix() for p in CAPSULES]
    expected = [(text, parse_body(text, file, line)) for p in CAPSULES
                for text, file, line in _bodies_of(p)]
    assert set(sent) == {text for text, _ in expected}
    # Here nothing is parsed: every body comes from what was sent.
    monkeypatch.setattr(bodies, "parse", lambda text: pytest.fail(f"parsed again: {text[:40]}"))
    with parsed_elsewhere((files, lambda: dict(sent))):
        for p in CAPSULES:
            for text, file, line in _bodies_of(p):
                body = parse_body(text, file, line)
                want = next(b for t, b in expected if t == text)
                assert body.parsed == want.parsed and body.refs == want.refs


def test_a_body_not_sent_or_a_failed_process_is_parsed_here() -> None:
    files = [p.relative_to(SAMPLE).as_posix() for p in CAPSULES]
    text, file, line = _bodies_of(CAPSULES[0])[0]
    want = parse_body(text, file, line)

    def failed() -> dict[str, bytes]:
        raise RuntimeError("the worker died")

    for result in (failed, dict):  # dict: a result without this body
        with parsed_elsewhere((files, result)):
            assert parse_body(text, file, line).parsed == want.parsed
    # Outside the block nothing is taken from elsewhere.
    assert not bodies._ELSEWHERE.results and not bodies._ELSEWHERE.batch_of


def test_a_body_parsed_elsewhere_is_linted_there(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    """The other process lints what it parses: the warnings are those of linting here, at
    the same lines and columns, and the body is not linted again here."""
    from curriculum import lint
    from curriculum.bodies import check_body

    capsule = tmp_path / "content" / "courses" / "c" / "capsules" / "x.md"
    capsule.parent.mkdir(parents=True)
    capsule.write_text("---\ntitle: X\n---\nIt ran at 3.2 TB/s.\n\n```cuda\nx = 5 ms;\n```\n"
                       "<!-- more -->\nThen 12 ms, then {est:4 ms | 2 × 2 ms}.\n",
                       encoding="utf-8")
    files = [capsule.relative_to(tmp_path).as_posix()]
    found = _bodies_of_in(tmp_path, capsule)
    ids: dict[str, set[str]] = {"capsule": set(), "question": set(), "experiment": set()}

    def warnings() -> list[str]:
        diags = Diagnostics()
        for text, file, line in found:
            check_body(parse_body(text, file, line), tmp_path, ids, diags)
        return [d.format() for d in diags.items]

    here = warnings()
    assert len(here) == 2 and "3.2 TB/s" in here[0] and "12 ms" in here[1]
    sent = parse_capsule_files(tmp_path, [capsule])
    monkeypatch.setattr(lint, "typed_numbers",
                        lambda *a, **k: pytest.fail("linted again here"))
    with parsed_elsewhere((files, lambda: dict(sent))):
        assert warnings() == here


def _bodies_of_in(root: Path, path: Path) -> list[tuple[str, str, int]]:
    doc = markdown_doc(root, path, "capsule", Diagnostics())
    assert doc is not None
    head, tail, at = split_at_marker(doc.body, "more")
    return [(head, doc.file, doc.body_line)] + \
        ([(tail, doc.file, doc.body_line + at)] if tail is not None else [])
