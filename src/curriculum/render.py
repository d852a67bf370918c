"""Stage 4, `render`: one edition's view of the catalog into files in memory.

Markdown bodies become HTML fragments (markdown-it, with the page's context
passed through `env`), then Jinja turns each page's context into a document.
Content never passes through Jinja: fragments enter templates as `Markup`.
The result maps output paths to bytes; `write` puts them on disk.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from curriculum.catalog import Body, CapsuleEntry
from curriculum.errors import Diagnostics, Loc
from curriculum.gating import EditionView
from curriculum.markdown import headings, link_scheme, render_tokens
from curriculum.measure import Measurements
from curriculum.output import JOIN_PAGE, KIND_LABELS, Chapter, Output, page_url, relative
from curriculum.store import template_cache

__all__ = ["JOIN_PAGE", "KIND_LABELS", "Chapter", "Output", "Renderer", "capsule_listing",
           "hours", "loc_of", "page_url", "relative", "toc"]


class Renderer:
    def __init__(self, view: EditionView, measurements: Measurements, templates: Path,
                 root: Path, diags: Diagnostics, build_date: str,
                 out: Output | None = None) -> None:
        self.view = view
        self.cat = view.catalog
        self.m = measurements
        self.root = root
        self.diags = diags
        self.build_date = build_date
        self.out = out if out is not None else Output(edition=view.edition.id)
        self.memo: dict[tuple[str, str], Any] = {}  # per-edition values shared by many pages
        # Whether fragments are kept for another edition rendered by this process (a build
        # whose editions run in separate processes renders each fragment once per process).
        self.keep_fragments = True
        self._unpacked: dict[int, tuple[Body, tuple[Any, ...]]] = {}
        self.env = Environment(
            loader=FileSystemLoader(str(templates)),
            autoescape=select_autoescape(["html", "xml"]),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
            # A build renders with the templates it started with; `serve` makes a new
            # environment when a template changes. No stat of each template per page.
            auto_reload=False,
        )
        self.env.bytecode_cache = template_cache(root, self.env)

    # -- Markdown ----------------------------------------------------------------

    def markdown(self, body: Body | None, page: str) -> Markup:
        if body is None or not body.text.strip():
            return Markup("")
        # A body renders to the same HTML on the same page in every edition that
        # shows it, so the fragment (and the files it needs) is rendered once a build.
        key = (body.file, body.line, body.text, page)
        hit = self.m.fragments.get(key) if self.keep_fragments else None
        if hit is None:
            added: dict[str, bytes | str] = {}
            env: dict[str, Any] = {
                "link": lambda href: self._link(href, page, body),
                "image": lambda src: self._image(src, page, body, added),
                "figure": self._figure,
                "chart": lambda text, line: self._chart(text, line, page, body, added),
                "artifact": lambda kind, text, line: self._artifact(kind, text, line, body),
            }
            hit = (render_tokens(list(self.tokens(body)), env), added)
            if self.keep_fragments:
                self.m.fragments[key] = hit
        else:
            for name, data in hit[1].items():
                self.out.add(name, data)
        return Markup(hit[0])

    def tokens(self, body: Body) -> tuple[Any, ...]:
        """A body's tokens; packed ones are unpacked once for the page that shows them."""
        if not isinstance(body.parsed, bytes):
            return body.parsed
        hit = self._unpacked.get(id(body))
        if hit is None or hit[0] is not body:
            if len(self._unpacked) > 8:
                self._unpacked.clear()
            hit = self._unpacked[id(body)] = (body, body.tokens)
        return hit[1]

    def _link(self, href: str, page: str, body: Body) -> str:
        scheme = link_scheme(href)
        if scheme in ("capsule", "question", "experiment"):
            target, _, frag = href.split(":", 1)[1].partition("#")
            if scheme == "capsule" and self.cat.capsules[target].draft:
                target_path = page_url("course", self.cat.capsules[target].course, self.cat)
                return relative(page, target_path + f"#{target}")
            return relative(page, page_url(scheme, target, self.cat) + (f"#{frag}" if frag else ""))
        return href

    def _image(self, src: str, page: str, body: Body, added: dict[str, bytes | str]) -> str:
        if link_scheme(src) is not None or not src:
            return src
        import hashlib

        from curriculum.assets import Refused, confine, read_asset

        limit = self.cat.site.max_asset_bytes
        found = confine(src, self.root / Path(body.file).parent, self.root / "content", limit)
        try:
            if isinstance(found, Refused):
                raise OSError(found.message)
            data = read_asset(found, limit)
        except OSError as exc:  # validate refuses these; this is a file changed since then
            self.diags.error(Loc(body.file, body.line, 1), "image.missing", str(exc))
            return ""
        name = f"assets/{hashlib.sha256(data).hexdigest()[:16]}{found.path.suffix.lower()}"
        self.out.add(name, data)
        added[name] = data
        return relative(page, name)

    def _figure(self, ref: dict[str, Any]) -> str:
        fig = self.m.figure(ref)
        classes = "fig" + (" fig-stale" if fig.stale else "") + (" fig-missing" if fig.missing else "")
        badge = '<span class="badge badge-stale">stale</span>' if fig.stale else ""
        # What a reader's own results file is matched by (see static/js/gpu-compare.js), and
        # the same figure on the other GPUs this repository holds results for.
        import json

        gpu = ref.get("gpu") or self.m.primary
        others = {slug: [run.provenance.gpu_name, self.m.figure({**ref, "gpu": slug}).text]
                  for slug, res in sorted(self.m.results.items())
                  if slug != gpu and (run := res.latest_run()) is not None}
        data = (f' data-case="{escape(ref["case"])}" data-field="{escape(ref["field"])}"'
                f' data-shape="{escape(ref.get("shape") or "")}" data-gpu="{escape(gpu)}"'
                + (f' data-others="{escape(json.dumps(others, ensure_ascii=False))}"' if others else ""))
        return (f'<span class="{classes}"{data} tabindex="0"><span class="fig-value">{escape(fig.text)}'
                f'</span>{badge}<span class="fig-prov" role="tooltip">{escape(fig.provenance)}'
                f"</span></span>")

    def _chart(self, text: str, line: int, page: str, body: Body,
               added: dict[str, bytes | str]) -> str:
        chart = self.m.chart(text, body.file, body.line + line, self.diags)
        if chart is None:
            return '<p class="chart-missing">[chart not available: no measured results]</p>'
        path = f"figures/{chart.name}"
        self.out.add(path, chart.svg)
        added[path] = chart.svg
        caption = f"<figcaption>{escape(chart.caption)}</figcaption>" if chart.caption else ""
        # The cases a reader's own results are matched against (see static/js/gpu-compare.js).
        import yaml

        try:
            spec = yaml.safe_load(text)
        except yaml.YAMLError:
            spec = None
        spec = spec if isinstance(spec, dict) else {}
        data = "".join(f' data-{k}="{escape(str(spec[k]))}"' for k in ("kind", "topic", "benchmark", "field")
                       if spec.get(k) is not None)
        return (f'<figure class="chart"{data}><img src="{escape(relative(page, path))}" '
                f'alt="{escape(chart.alt)}">{caption}</figure>\n')

    def _artifact(self, kind: str, text: str, line: int, body: Body) -> str:
        from curriculum.artifacts import BlockError, render_block

        try:
            return render_block(kind, text, self.root)
        except BlockError as exc:  # validate reports these; this is a file changed since then
            for p in exc.problems:
                self.diags.error(Loc(body.file, body.line + line + 1 + p.line, 1), p.code,
                                 p.message, p.hint)
            return f'<p class="chart-missing">[{escape(kind)} not available]</p>'

    # -- pages ------------------------------------------------------------------------

    def page(self, template: str, path: str, title: str, description: str,
             index: dict[str, Any] | None = None, **context: Any) -> None:
        def url(target: str) -> str:
            return relative(path, target)

        context.setdefault("up_next", None)
        search = None
        if index is not None:
            search = {"kind": KIND_LABELS.get(index["kind"], index["kind"].capitalize()),
                      "access": self.cat.tier_label(index.get("access", self.cat.lowest_tier)),
                      "course": index.get("course") or ""}
        html = self.env.get_template(template).render(
            site=self.cat.site, edition=self.view.edition, view=self.view, page_path=path,
            title=title, description=description, url=url, canonical=self.cat.site.base_url +
            path.removesuffix("index.html"), tier_label=self.cat.tier_label,
            root=url("index.html").removesuffix("index.html") or "./", search=search,
            footer=self._footer(), **context)
        self.out.add(path, html)
        if index is not None:
            self.out.pages.append({"path": path, "title": title, "summary": description, **index})

    def _footer(self) -> dict[str, Any]:
        """What the footer tells a reader: this edition in words and the date of the
        measurements."""
        found = self.memo.get(("footer", ""))
        if found is None:
            edition = self.view.edition
            tier = next((t for t in self.cat.site.tiers if t.id == edition.max_tier), None)
            results = self.m.results.get(self.m.primary)
            run = results.latest_run() if results is not None else None
            found = self.memo[("footer", "")] = {
                "edition": f"{tier.label} edition" if tier else f"{edition.id.title()} edition",
                "gpu": run.provenance.gpu_name if run else None,
                "measured": run.provenance.date[:10] if run else None}
        return found  # type: ignore[no-any-return]

    def access_badge(self, kind: str, item_id: str, access: str) -> dict[str, Any]:
        """How a page, card or step shows its tier: the label, whether this edition locks
        it, and the tier's offer (what it gives, where to get it) from site.yaml."""
        locked = self.view.is_locked(kind, item_id)
        tier = next(t for t in self.cat.site.tiers if t.id == access)
        return {"tier": access, "label": tier.label, "locked": locked,
                "lowest": access == self.cat.lowest_tier, "offer": tier.offer,
                "join": f"{JOIN_PAGE}#tier-{access}"}


def hours(minutes: int) -> float:
    """Total time in hours, rounded up to the half hour."""
    return math.ceil(minutes / 30) / 2


def capsule_listing(r: Renderer, cap: CapsuleEntry, page: str) -> dict[str, Any]:
    return {
        "id": cap.id, "number": cap.number, "title": cap.meta.title, "tag": cap.meta.tag,
        "kind": cap.meta.kind, "minutes": cap.minutes, "summary": cap.meta.summary,
        "draft": cap.draft, "access": r.access_badge("capsule", cap.id, cap.access),
        "href": None if cap.draft else relative(page, page_url("capsule", cap.id, r.cat)),
    }


def toc(r: Renderer, body_list: list[Body | None]) -> list[tuple[int, str, str]]:
    out: list[tuple[int, str, str]] = []
    for b in body_list:
        if b is not None:
            out.extend(headings(list(r.tokens(b))))
    return out


def loc_of(body: Body) -> Loc:
    return Loc(body.file, body.line, 1)


PageFn = Callable[[Renderer], None]
