"""The YAML reader: libyaml composes when PyYAML has it, and must agree with the pure
Python loader on every value and every position."""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO

from curriculum import yamlio
from curriculum.errors import Diagnostics

pytestmark = pytest.mark.skipif(not getattr(yaml, "__with_libyaml__", False),
                                reason="PyYAML without libyaml: only the pure loader runs")


def _documents() -> list[tuple[str, str]]:
    """Every YAML file and every Markdown front matter of the shipped content."""
    docs = []
    for path in sorted((REPO / "content").rglob("*")):
        if path.suffix in (".yaml", ".yml"):
            docs.append((str(path), path.read_text()))
        elif path.suffix == ".md":
            text = path.read_text()
            if text.startswith("---\n"):
                docs.append((str(path), text[4:text.index("\n---", 4)]))
    return docs


def test_fast_and_pure_loaders_agree_on_values_and_positions() -> None:
    docs = _documents()
    assert len(docs) > 40
    for name, text in docs:
        fast, slow = Diagnostics(), Diagnostics()
        value_f, pos_f = yamlio._load(yamlio._FastLoader, text, name, fast, 1, report=False)
        value_s, pos_s = yamlio._load(yamlio._Loader, text, name, slow, 1)
        assert value_f == value_s, name
        assert (pos_f.values, pos_f.keys) == (pos_s.values, pos_s.keys), name
        assert fast.items == slow.items, name


def test_a_document_libyaml_refuses_gets_the_fuller_message() -> None:
    diags = Diagnostics()
    value, _ = yamlio.load_yaml("level: [intermediate\nnext: 1\n", "c.yaml", diags)
    assert value is None
    (d,) = diags.items
    assert d.code == "yaml.syntax"
    assert d.message.endswith("but got ':'")  # the pure loader's wording, not libyaml's


def test_non_ascii_columns_agree() -> None:
    text = "title: «Größe» und Ü\nsummary: ok\nlist: [é, ü, 'ß']\n"
    fast, slow = Diagnostics(), Diagnostics()
    _, pos_f = yamlio._load(yamlio._FastLoader, text, "x", fast, 0, report=False)
    _, pos_s = yamlio._load(yamlio._Loader, text, "x", slow, 0)
    assert pos_f.values == pos_s.values
