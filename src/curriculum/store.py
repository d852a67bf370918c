"""What one build hands the next: highlighted code blocks and MathML, by content, and
the compiled templates.

Highlighting a block and converting a formula depend on nothing but their text (and the
versions of Pygments and latex2mathml), so a build keeps what it made in
`.cache/markdown/<versions>.json.gz`, and the next build reuses every entry whose text
comes again. Only what a build used is kept, so the store holds the current content's
blocks and formulas and nothing older. Like the chart cache beside it, losing it costs
time, never correctness; a folder that cannot be written to is simply not used.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path

from jinja2 import Environment
from jinja2.bccache import Bucket, BytecodeCache, FileSystemBytecodeCache

from curriculum.markdown import add_stored, converted, stored

STORE = Path(".cache") / "markdown"
FORMAT = 1  # bump when what `highlight` or `to_mathml` writes changes


def _path(root: Path) -> Path:
    from importlib.metadata import version

    from curriculum.markdown import LANGUAGES

    versions = (f"{FORMAT}|{version('pygments')}|{version('latex2mathml')}|"
                f"{sorted(LANGUAGES.items())}")
    return root / STORE / f"{hashlib.sha256(versions.encode()).hexdigest()[:16]}.json.gz"


def load(root: Path) -> None:
    """Offer the last build's blocks and formulas to this one."""
    try:
        data = json.loads(gzip.decompress(_path(root).read_bytes()))
        blocks = {(code, lang): html for code, lang, html in data["highlight"]}
        math = {(latex, bool(display)): mathml for latex, display, mathml in data["math"]}
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        return
    add_stored(blocks, math)


def save(root: Path) -> None:
    """Keep what this build highlighted and converted, for the next one (atomically); a
    store that holds exactly what this build used, as after an unchanged build, is kept
    as it is."""
    blocks, math = converted()
    kept_blocks, kept_math = stored()
    path = _path(root)
    if blocks.keys() == kept_blocks.keys() and math.keys() == kept_math.keys() \
            and path.is_file():
        return
    data = {"highlight": sorted([c, lang, h] for (c, lang), h in blocks.items()),
            "math": sorted([latex, d, m] for (latex, d), m in math.items())}
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob("*.json.gz"):  # another version's store
            if old != path:
                old.unlink()
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".store-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(gzip.compress(json.dumps(data, ensure_ascii=False).encode("utf-8"), 1,
                                  mtime=0))
        os.replace(tmp, path)


# --- compiled templates ------------------------------------------------------------
#
# Compiling the templates into Python took a sixth of a second in every process that
# renders an edition, each build. Jinja keeps what it compiled in `.cache/templates/`;
# it checks each template's source against the checksum stored with its code, so an
# edited template is compiled again. The folder's name covers Jinja's version and the
# environment's settings that change the compiled code.

TEMPLATES = Path(".cache") / "templates"


class _TemplateCache(FileSystemBytecodeCache):
    """Jinja's file cache, which a folder that cannot be written to turns off."""

    def dump_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):
            os.makedirs(self.directory, exist_ok=True)
            super().dump_bytecode(bucket)

    def load_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError, ValueError, EOFError, TypeError):
            super().load_bytecode(bucket)


def template_cache(root: Path, env: Environment) -> BytecodeCache:
    """Where `env`'s compiled templates are kept between builds of the project at `root`."""
    from importlib.metadata import version

    settings = (version("jinja2"), env.block_start_string, env.block_end_string,
                env.variable_start_string, env.variable_end_string,
                env.comment_start_string, env.comment_end_string,
                env.line_statement_prefix, env.line_comment_prefix, env.trim_blocks,
                env.lstrip_blocks, env.newline_sequence, env.keep_trailing_newline,
                env.optimized, sorted(env.extensions), env.undefined.__name__)
    digest = hashlib.sha256(repr(settings).encode()).hexdigest()[:16]
    return _TemplateCache(str(root / TEMPLATES / digest))
