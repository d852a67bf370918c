"""`curriculum serve`: one edition, served from memory, rebuilt as you write.

The site is built once, unit by unit (see `build.page_units`), and served on
127.0.0.1. A watcher on content/, paths/, templates/ and kernels/ hands every
batch of changed files to `LiveSite.apply`, which

1. re-reads what changed: one edited capsule is re-validated on its own
   (`build.revalidate_capsule`); any other source change runs load, validate
   and measure again;
2. hashes the catalog into facts and re-renders only the units reading a fact
   that changed (a template edit re-renders every unit);
3. swaps the new pages in, wakes every open page (a long-poll on
   `/__curriculum/wait`), and then refreshes the search index, sitemap and feed.

When the content does not validate, the last good pages stay served, and every
HTML response carries an overlay listing the errors (file:line: message) until
a later save fixes them. The reload script and the overlay are added to served
responses only; nothing of them is ever written into a build.
"""

from __future__ import annotations

import html
import http.server
import json
import mimetypes
import posixpath
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curriculum.build import (
    Memo,
    Product,
    Unit,
    build_date,
    finish_edition,
    page_units,
    render_unit,
    results_key,
    revalidate_capsule,
    static_files,
    unit_facts,
    unit_reads,
)
from curriculum.catalog import Catalog
from curriculum.check import check_leaks, check_links
from curriculum.errors import Diagnostic, Diagnostics, Loc, UsageError, rel
from curriculum.gating import EditionView, for_edition, public_texts, withheld_texts
from curriculum.load import RawDoc, load_project
from curriculum.measure import Measurements, measure
from curriculum.render import Output, Renderer
from curriculum.validate import validate

PREFIX = "/__curriculum/"
WATCHED = ("content", "paths", "templates", "kernels")
INDEX_FILES = ("search-index.json", "sitemap.xml", "feed.xml")


@dataclass
class Update:
    """What one rebuild did, for the terminal and the open pages."""

    version: int
    ok: bool
    seconds: float
    rebuilt: list[Unit] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # output paths whose bytes changed
    diagnostics: list[Diagnostic] = field(default_factory=list)
    full: bool = False  # the whole catalog was validated again
    index_seconds: float = 0.0  # the search index, sitemap and feed, after the notification


class LiveSite:
    """One edition's pages in memory, and how to bring them up to date."""

    def __init__(self, root: Path, templates: Path, edition: str) -> None:
        self.root = root.resolve()
        self.templates = templates.resolve()
        self.edition_id = edition
        self.files: dict[str, bytes] = {}
        self.errors: list[Diagnostic] = []  # of the latest attempt; empty when it built
        self.version = 0
        self.last: Update | None = None
        self.cond = threading.Condition()
        self.date, _ = build_date()
        # The last good state, and what it was built from.
        self.docs: list[RawDoc] = []
        self.catalog: Catalog | None = None
        self.measurements: Measurements | None = None
        self.diags: list[Diagnostic] = []
        self.results = ""
        self.products: dict[Unit, Product] = {}
        self.facts: dict[str, str] = {}
        self.static: dict[str, bytes] = {}
        self.env: Any = None
        self.memo = Memo()
        self.view: EditionView | None = None
        self.index_files: set[str] = set(INDEX_FILES)  # made from all pages, after them
        self.dirty: set[str] = set()  # source files edited since the last good state

    # -- rebuilding --------------------------------------------------------------------

    def apply(self, changed: Iterable[Path] | None = None) -> Update:
        """Bring the pages up to date with `changed` files (None: build everything)."""
        started = time.perf_counter()
        diags = Diagnostics()
        paths = sorted({Path(p).resolve() for p in changed}) if changed is not None else None
        try:
            update = self._apply(paths, diags, started)
        except UsageError:
            raise
        except Exception as exc:  # a template or renderer failure must not stop the server
            update = self._failed([_exception_diagnostic(exc, self.root)], started)
            self.products = {}  # what was rendered before may not match the templates now
        with self.cond:
            self.version += 1
            update.version = self.version
            self.last = update
            self.cond.notify_all()
        if update.ok and update.changed:
            update.diagnostics += self._check(update.changed, first=update.version == 1)
            indexed = time.perf_counter()
            self._refresh_indexes()
            update.index_seconds = time.perf_counter() - indexed
        return update

    def _check(self, changed: list[str], first: bool) -> list[Diagnostic]:
        """Links (and, in an edition with locked pages, leaks) of the pages just rebuilt.
        The first build's whole-site check is `curriculum build`'s job."""
        assert self.view is not None and self.catalog is not None
        late = Diagnostics()
        with self.cond:
            files = {**{name: b"" for name in self.index_files}, **self.files}
        pages = [] if first else [p for p in changed if p.endswith(".html")]
        check_links(files, self.edition_id, late, pages=pages, prefix="(served)")
        if self.view.locked and not first:
            check_leaks({p: files[p] for p in changed if p in files},
                        withheld_texts(self.catalog, self.view), public_texts(self.view),
                        self.edition_id, late)
        return late.sorted()

    def _apply(self, paths: list[Path] | None, diags: Diagnostics, started: float) -> Update:
        rels = [rel(p, self.root) for p in paths] if paths is not None else None
        templates_changed = rels is None or any(
            p.is_relative_to(self.templates) for p in paths or [])
        kernels_changed = rels is None or any(r.startswith("kernels/") for r in rels)
        sources = [r for r in rels or [] if r.startswith(("content/", "paths/"))]

        full = self.catalog is None or kernels_changed or bool(sources)
        docs, found = self.docs, self.diags
        catalog, measurements = self.catalog, self.measurements
        if sources and not kernels_changed and self._patchable(sources):
            assert catalog is not None and measurements is not None
            file = sources[0]
            docs, doc = self._reload(file, diags)
            if doc is not None:
                full = False
                catalog = revalidate_capsule(catalog, docs, doc, self.root, measurements, diags)
                found = sorted([d for d in self.diags if d.loc.path != file
                                and d.code != "capsule.prerequisite-cycle"] + diags.sorted(),
                               key=Diagnostic.sort_key)
                self.dirty.add(file)
        if full:
            diags = Diagnostics()
            docs = load_project(self.root, diags)
            catalog = validate(docs, self.root, diags, self.templates)
            measurements = measure(catalog, self.root, diags) if catalog is not None else None
            found = diags.sorted()
            self.dirty = {"*"}  # until this state builds, only a full pipeline can follow it
        if catalog is None or measurements is None or any(d.severity == "error" for d in found):
            return self._failed([d for d in found if d.severity == "error"], started, full)

        edition = next((e for e in catalog.site.editions if e.id == self.edition_id), None)
        if edition is None:
            known = ", ".join(e.id for e in catalog.site.editions)
            raise UsageError(f"no edition '{self.edition_id}' in content/site.yaml; "
                             f"editions: {known}")
        view = for_edition(catalog, edition)
        if templates_changed or self.env is None:
            self.static = static_files(self.templates)
            self.env = None
        results = results_key(self.root) if kernels_changed else self.results
        reads = unit_reads(view, self.root, self.memo)
        latest = measurements.results.get(catalog.site.primary_gpu)
        run = latest.latest_run() if latest is not None else None
        footer = f"{run.provenance.gpu_name}|{run.provenance.date[:10]}" if run else ""
        facts = unit_facts(view, self.root, results, reads, self.memo, footer)
        stale = {k for k in facts.keys() | self.facts.keys() if facts.get(k) != self.facts.get(k)}
        units = [u for u in page_units(view.catalog)
                 if templates_changed or u not in self.products or reads[u] & stale]

        if any(k.startswith(("url:", "file:")) for k in stale):
            # A Markdown fragment is cached by its text and page; a moved link target
            # or an edited image changes its HTML without changing either.
            measurements.fragments.clear()
        render_diags = Diagnostics()
        renderer = Renderer(view, measurements, self.templates, self.root, render_diags,
                            self.date)
        if self.env is not None:
            renderer.env = self.env
        fresh = {unit: render_unit(renderer, unit) for unit in units}
        products = {u: fresh.get(u) or self.products[u] for u in reads}  # in render order
        self.env = renderer.env

        files = dict(self.static)
        for product in products.values():
            files.update(product.files)
        for name in self.index_files:
            if name in self.files and name not in files:
                files[name] = self.files[name]
        changed = sorted(p for p in files.keys() | self.files.keys()
                         if p not in self.index_files and files.get(p) != self.files.get(p))
        self.docs, self.catalog, self.measurements, self.view = docs, catalog, measurements, view
        self.diags = [d for d in found if d.severity == "warning"]
        self.results, self.facts, self.products = results, facts, products
        self.dirty = set()
        with self.cond:
            self.files = files
            self.errors = []
        return Update(0, True, time.perf_counter() - started, rebuilt=units, changed=changed,
                      diagnostics=[*self.diags, *render_diags.sorted()], full=full)

    def _patchable(self, sources: list[str]) -> bool:
        """One existing capsule file, and nothing else edited since the last good state."""
        if len(set(sources)) != 1 or not self.dirty <= set(sources):
            return False
        file = sources[0]
        doc = next((d for d in self.docs if d.file == file), None)
        return (doc is not None and doc.kind == "capsule" and self.catalog is not None
                and doc.id in self.catalog.capsules and (self.root / file).is_file())

    def _reload(self, file: str, diags: Diagnostics) -> tuple[list[RawDoc], RawDoc | None]:
        from curriculum.load import _markdown_doc

        old = next(d for d in self.docs if d.file == file)
        doc = _markdown_doc(self.root, self.root / file, "capsule", diags, course=old.course)
        if doc is None:
            return self.docs, None
        return [doc if d is old else d for d in self.docs], doc

    def _failed(self, errors: list[Diagnostic], started: float, full: bool = False) -> Update:
        with self.cond:
            self.errors = errors
        return Update(0, False, time.perf_counter() - started, diagnostics=errors, full=full)

    def _refresh_indexes(self) -> None:
        """The search index, sitemap and feed of the pages now served."""
        assert self.view is not None
        with self.cond:
            pages = {p: d for p, d in self.files.items() if p not in self.index_files}
        products = list(self.products.values())
        out = Output(files=dict(pages), pages=[p for x in products for p in x.pages],
                     chapters=[c for x in products for c in x.chapters], edition=self.edition_id)
        finish_edition(out, self.view, {}, self.date)
        made = {p: d for p, d in out.files.items() if p not in pages or d is not pages[p]}
        with self.cond:
            kept = {p: d for p, d in self.files.items() if p not in self.index_files}
            self.index_files = set(made)
            self.files = {**kept, **made}

    # -- waiting -----------------------------------------------------------------------

    def wait(self, version: int, timeout: float) -> dict[str, Any]:
        """Block until a rebuild newer than `version` finished (or `timeout`)."""
        with self.cond:
            self.cond.wait_for(lambda: self.version != version, timeout=timeout)
            last = self.last
            return {"version": self.version,
                    "changed": last.changed if last and last.version == self.version else [],
                    "errors": [_diagnostic_json(d) for d in self.errors]}


def _diagnostic_json(d: Diagnostic) -> dict[str, Any]:
    return {"file": d.loc.path, "line": d.loc.line, "col": d.loc.col, "code": d.code,
            "message": d.message, "hint": d.hint, "text": d.format()}


def _exception_diagnostic(exc: Exception, root: Path) -> Diagnostic:
    """A template or render failure as a diagnostic, at the template line if known."""
    filename = getattr(exc, "filename", None)
    line = getattr(exc, "lineno", None) or 1
    if filename:
        where = rel(Path(filename), root)
    else:
        import traceback

        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if f.filename.endswith(".html")]
        where, line = (rel(Path(frames[-1].filename), root), frames[-1].lineno or 1) \
            if frames else ("(render)", 1)
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return Diagnostic(Loc(where, line, 1), "template.error", f"{type(exc).__name__}: {message}")


# -- what served pages carry -------------------------------------------------------------

LIVE_JS = """\
// Live reload for `curriculum serve`; served by it alone, never part of a build.
const meta = document.querySelector('meta[name="curriculum-version"]');
let version = meta ? Number(meta.content) : 0;
const shown = document.querySelector(".curriculum-overlay") !== null;
let page = decodeURIComponent(location.pathname).replace(/^\\/+/, "");
if (page === "" || page.endsWith("/")) page += "index.html";

async function follow() {
  for (;;) {
    try {
      const reply = await fetch(`/__curriculum/wait?v=${version}`, { cache: "no-store" });
      if (!reply.ok) throw new Error(String(reply.status));
      const news = await reply.json();
      if (news.version === version) continue;
      version = news.version;
      if (news.errors.length > 0 || shown || news.changed.includes(page)) {
        location.reload();
        return;
      }
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}
follow();
"""

LIVE_CSS = """\
.curriculum-overlay { position: fixed; inset: 1rem 1rem auto 1rem; z-index: 2147483647;
  max-height: 80vh; overflow: auto; padding: 1rem 1.25rem; border: 2px solid #b3261e;
  border-radius: 8px; background: #fff8f7; color: #1d1b1a; font: 14px/1.5 ui-monospace,
  SFMono-Regular, Menlo, Consolas, monospace; box-shadow: 0 8px 32px rgb(0 0 0 / 0.25); }
.curriculum-overlay h2 { margin: 0 0 0.5rem; font-size: 1rem; color: #b3261e; }
.curriculum-overlay ol { margin: 0; padding-left: 1.25rem; }
.curriculum-overlay .where { font-weight: 700; }
.curriculum-overlay .hint { color: #5f5a57; }
"""


def overlay_html(errors: list[Diagnostic]) -> str:
    items = "\n".join(
        f'<li><span class="where">{html.escape(str(d.loc))}</span>: '
        f"error[{html.escape(d.code)}]: {html.escape(d.message)}"
        + (f' <span class="hint">({html.escape(d.hint)})</span>' if d.hint else "") + "</li>"
        for d in errors)
    return ('<div class="curriculum-overlay" role="alert" aria-labelledby="curriculum-overlay-h">'
            f'<h2 id="curriculum-overlay-h">The site did not rebuild: {len(errors)} error(s)</h2>'
            "<p>These pages are the last good build. Fix the source and save; "
            f"this page reloads.</p><ol>\n{items}\n</ol></div>")


def decorate(page: bytes, version: int, errors: list[Diagnostic]) -> bytes:
    """A served HTML page: the reload script, and the error overlay while there are errors."""
    text = page.decode("utf-8")
    head = (f'<meta name="curriculum-version" content="{version}">'
            f'<link rel="stylesheet" href="{PREFIX}live.css">'
            f'<script type="module" src="{PREFIX}live.js"></script>')
    at = text.find("</head>")
    text = text[:at] + head + text[at:] if at >= 0 else head + text
    if errors:
        body = text.find("<body")
        end = text.find(">", body) + 1 if body >= 0 else 0
        text = text[:end] + overlay_html(errors) + text[end:]
    return text.encode("utf-8")


class _Handler(http.server.BaseHTTPRequestHandler):
    site: LiveSite
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        return  # the terminal shows rebuilds, not requests

    def do_GET(self) -> None:  # noqa: N802 - base-class name
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        if path.startswith(PREFIX):
            return self._own(path[len(PREFIX):], urllib.parse.parse_qs(url.query))
        rel_path = posixpath.normpath(path.lstrip("/")) if path.strip("/") else ""
        if rel_path.startswith(".."):
            return self._send(404, b"not found", "text/plain; charset=utf-8")
        with self.site.cond:
            files, version, errors = self.site.files, self.site.version, list(self.site.errors)
        if path.endswith("/") or rel_path == "":
            rel_path = posixpath.join(rel_path, "index.html").lstrip("/")
        elif rel_path not in files and rel_path + "/index.html" in files:
            self.send_response(301)
            self.send_header("Location", path + "/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        status = 200
        if rel_path not in files:
            status, rel_path = 404, "404.html"
        data = files.get(rel_path, b"not found")
        ctype = mimetypes.guess_type(rel_path)[0] or "application/octet-stream"
        if rel_path.endswith(".html"):
            data = decorate(data, version, errors)
            ctype = "text/html"
        if ctype.startswith("text/") or ctype in ("application/javascript", "application/json"):
            ctype += "; charset=utf-8"
        return self._send(status, data, ctype)

    def _own(self, name: str, query: dict[str, list[str]]) -> None:
        if name == "live.js":
            return self._send(200, LIVE_JS.encode(), "text/javascript; charset=utf-8")
        if name == "live.css":
            return self._send(200, LIVE_CSS.encode(), "text/css; charset=utf-8")
        if name == "wait":
            try:
                since = int(query.get("v", ["-1"])[0])
            except ValueError:
                since = -1
            timeout = min(float(query.get("timeout", ["25"])[0]), 60.0)
            news = self.site.wait(since, timeout)
            return self._send(200, json.dumps(news).encode(), "application/json")
        return self._send(404, b"not found", "text/plain; charset=utf-8")

    def _send(self, status: int, data: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)


class Server:
    """The HTTP server, the watcher and the live site, started and stopped together."""

    def __init__(self, root: Path, templates: Path, edition: str, port: int = 8000,
                 log: Callable[[Update], None] | None = None, step_ms: int = 30) -> None:
        self.root = root.resolve()
        self.site = LiveSite(self.root, templates, edition)
        self.log = log or (lambda update: None)
        self.step_ms = step_ms
        handler = type("Handler", (_Handler,), {"site": self.site})
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> Update:
        """Build everything, then serve and watch in background threads."""
        first = self.site.apply(None)
        self.log(first)
        watch = threading.Thread(target=self._watch, name="curriculum-watch", daemon=True)
        serve = threading.Thread(target=self.httpd.serve_forever, name="curriculum-http",
                                 daemon=True)
        self._threads = [watch, serve]
        for t in self._threads:
            t.start()
        return first

    def _watch(self) -> None:
        from watchfiles import watch

        folders = [str(self.root / f) for f in WATCHED if (self.root / f).is_dir()]
        if self.site.templates not in [Path(f) for f in folders]:
            folders.append(str(self.site.templates))
        for batch in watch(*folders, stop_event=self._stop, step=self.step_ms,
                           debounce=1000, raise_interrupt=False):
            paths = [Path(p) for _, p in batch if not _ignored(Path(p))]
            if paths:
                self.log(self.site.apply(paths))

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        for t in self._threads:
            t.join(timeout=5)


def _ignored(path: Path) -> bool:
    """Editor scratch files, which never hold content."""
    name = path.name
    return (name.startswith((".#", "#")) or name.endswith(("~", ".swp", ".swx", ".tmp"))
            or name == "4913" or "/.git/" in path.as_posix() or "__pycache__" in path.parts)
