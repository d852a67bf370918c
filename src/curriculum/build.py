"""`build()`: every stage in order, top to bottom.

load -> validate -> measure -> (per edition) gate -> render -> index -> check
-> write. Nothing is written until every edition has rendered and passed its
checks, so a failed build leaves the previous site untouched.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path

from curriculum.catalog import Catalog
from curriculum.check import check_leaks, check_links
from curriculum.errors import Diagnostics, UsageError
from curriculum.gating import for_edition, public_texts, withheld_texts
from curriculum.index import add_indexes
from curriculum.load import load_project
from curriculum.measure import Measurements, measure
from curriculum.render import Output, Renderer
from curriculum.validate import validate
from curriculum.write import write_tree


@dataclass
class BuildResult:
    diagnostics: Diagnostics
    outputs: dict[str, Output] = field(default_factory=dict)
    catalog: Catalog | None = None


def build_date() -> tuple[str, int | None]:
    """The date stamped into feeds and sitemaps: SOURCE_DATE_EPOCH when set."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        try:
            seconds = int(epoch)
        except ValueError as exc:
            raise UsageError(f"SOURCE_DATE_EPOCH={epoch!r} is not an integer") from exc
        return dt.datetime.fromtimestamp(seconds, dt.UTC).date().isoformat(), seconds
    return dt.datetime.now(dt.UTC).date().isoformat(), None


def check_project(root: Path, templates: Path | None = None
                  ) -> tuple[Diagnostics, Catalog | None, Measurements | None]:
    """Load, validate and measure: everything short of rendering."""
    diags = Diagnostics()
    docs = load_project(root, diags)
    catalog = validate(docs, root, diags, templates)
    if catalog is None:
        return diags, None, None
    measurements = measure(catalog, root, diags)
    return diags, catalog, measurements


def static_files(templates: Path) -> dict[str, bytes]:
    from pygments.formatters import HtmlFormatter

    files = {}
    static = templates / "static"
    for path in sorted(static.rglob("*")):
        if path.is_file():
            files["static/" + path.relative_to(static).as_posix()] = path.read_bytes()
    light = HtmlFormatter(style="default").get_style_defs(".highlight")
    dark = HtmlFormatter(style="monokai").get_style_defs(":root[data-theme=dark] .highlight")
    dark_auto = HtmlFormatter(style="monokai").get_style_defs(
        ":root:not([data-theme=light]) .highlight")
    code_css = (f"/* Code colours, light then dark. */\n{light}\n{dark}\n"
                f"@media (prefers-color-scheme: dark) {{\n{dark_auto}\n}}\n")
    # Pygments' own backgrounds fight the theme variables; the site sets them.
    code_css = "\n".join(line for line in code_css.splitlines()
                         if not line.strip().startswith(("pre {", "td.linenos", "span.linenos")))
    files["static/css/code.css"] = code_css.encode("utf-8")
    return files


def build(root: Path, out_dir: Path | None = None, editions: list[str] | None = None,
          strict: bool = False, templates: Path | None = None, write: bool = True) -> BuildResult:
    """Build the chosen editions (all by default) into `out_dir/<edition>/`.

    Raises `ContentError` with every diagnostic when the content does not
    validate, or when `strict` and anything warned.
    """
    root = root.resolve()
    templates = (templates or root / "templates").resolve()
    out_dir = (out_dir or root / "build").resolve()
    if not templates.is_dir():
        raise UsageError(f"no templates folder at {templates}")
    diags, catalog, measurements = check_project(root, templates)
    diags.raise_if_failed(strict)
    assert catalog is not None and measurements is not None
    known = [e.id for e in catalog.site.editions]
    chosen = editions or known
    for e in chosen:
        if e not in known:
            raise UsageError(f"no edition '{e}' in content/site.yaml; editions: {', '.join(known)}")

    date, epoch = build_date()
    static = static_files(templates)
    result = BuildResult(diags, catalog=catalog)
    for edition in catalog.site.editions:
        if edition.id not in chosen:
            continue
        view = for_edition(catalog, edition)
        renderer = Renderer(view, measurements, templates, root, diags, date)
        out = renderer.render_all()
        for path, data in static.items():
            out.add(path, data)
        add_indexes(out, view.catalog, date)
        check_links(out.files, edition.id, diags)
        check_leaks(out.files, withheld_texts(catalog, view), public_texts(view), edition.id, diags)
        result.outputs[edition.id] = out
    diags.raise_if_failed(strict)
    if write:
        for edition_id, out in result.outputs.items():
            write_tree(out.files, out_dir / edition_id, mtime=epoch)
    return result
