"""`curriculum serve`: one edition, served from memory, rebuilt as you write.

The site is built once, unit by unit (see `engine.page_units`), and served on
127.0.0.1. A watcher on content/, paths/, templates/ and kernels/ hands every
batch of changed files to `LiveSite.apply`, which

1. re-reads what changed: one edited capsule, or one course.yaml that keeps the
   same capsules, is re-validated on its own (`validate.revalidate_capsule`,
   `validate.revalidate_course`); any other source change runs load, validate
   and measure again;
2. hashes the catalog into facts and re-renders only the units reading a fact
   that changed (a template edit re-renders every unit): `engine.Engine`;
3. swaps the new pages in and wakes every open page (a long-poll on
   `/__curriculum/wait`); the page the author is looking at reloads now.

The checks of the rebuilt pages and the indexes (search, sitemap, feed, EPUB) follow
off the edit path, in the `Indexer`'s thread: edits saved one after another are
indexed once, and a run still going when a newer rebuild lands is stopped.

When the content does not validate, the last good pages stay served, and every
HTML response carries an overlay listing the errors (file:line: message) until
a later save fixes them. The reload script and the overlay are added to served
responses only; nothing of them is ever written into a build.
"""

from __future__ import annotations

import dataclasses
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

from curriculum.build import build_date, finish_edition, static_files
from curriculum.catalog import Catalog
from curriculum.check import check_leaks, check_links
from curriculum.engine import Engine, Unit
from curriculum.errors import Diagnostic, Diagnostics, Loc, UsageError, rel
from curriculum.gating import EditionView, for_edition, public_texts, withheld_texts
from curriculum.index import Cancelled
from curriculum.load import RawDoc, load_project, markdown_doc, yaml_doc
from curriculum.measure import Measurements, measure
from curriculum.validate import revalidate_capsule, revalidate_course, validate

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
    index_seconds: float = 0.0  # the checks and indexes, after the notification
    indexed: bool = False  # this report comes from the indexer, after the rebuild's own
    late: list[Diagnostic] = field(default_factory=list)  # the checks made with the indexes


def fullest_edition(catalog: Catalog) -> str:
    """The edition whose `max_tier` is the last (highest) tier of site.yaml: the one an
    author sees every page of in full; the first such edition when several are."""
    rank = catalog.tier_rank
    editions = catalog.site.editions
    return max(editions, key=lambda e: (rank[e.max_tier], -editions.index(e))).id


class LiveSite:
    """One edition's pages in memory, and how to bring them up to date. `edition` ""
    serves the fullest edition (`fullest_edition`)."""

    def __init__(self, root: Path, templates: Path, edition: str = "") -> None:
        self.root = root.resolve()
        self.templates = templates.resolve()
        self.edition_id = edition
        self.files: dict[str, bytes] = {}
        self.errors: list[Diagnostic] = []  # of the latest attempt; empty when it built
        self.version = 0
        self.files_version = 0
        self.last: Update | None = None
        self.cond = threading.Condition()
        self.date, _ = build_date()
        # The last good state, and what it was built from.
        self.docs: list[RawDoc] = []
        self.catalog: Catalog | None = None
        self.measurements: Measurements | None = None
        self.diags: list[Diagnostic] = []
        self.engine = Engine(self.root, self.templates, self.date)
        self.static: dict[str, bytes] = {}
        self.view: EditionView | None = None
        self.index_files: set[str] = set(INDEX_FILES)  # made from all pages, after them
        self.dirty: set[str] = set()  # source files edited since the last good state
        # Where the indexes are made after each rebuild: None, on the caller's thread before
        # `apply` returns; an `Indexer`, in its own thread (`Server` starts one).
        self.indexer: Indexer | None = None

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
            self.engine.reset()  # what was rendered before may not match the templates now
        with self.cond:
            self.version += 1
            update.version = self.version
            if update.ok:
                self.files_version = self.version  # the rebuild whose pages are served
            self.last = update
            self.cond.notify_all()
        if update.ok and update.changed:
            if self.indexer is not None and update.version > 1:
                self.indexer.request(update)  # off the edit path: the watcher is free again
            else:
                self.finish(update, update.changed, lambda: False)
        return update

    def finish(self, update: Update, changed: Iterable[str],
               cancelled: Callable[[], bool]) -> bool:
        """The checks of the pages `changed` since the indexes were last made, and the
        indexes (search, sitemap, feed, EPUB) of the pages now served; False, leaving the
        served indexes as they were, when `cancelled` says a newer rebuild came first."""
        started = time.perf_counter()
        try:
            late = self._check(sorted(changed), first=update.version == 1)
            if cancelled():
                return False
            self._refresh_indexes(update.version, cancelled)
        except Cancelled:
            return False
        update.late = late
        update.diagnostics += late
        update.index_seconds = time.perf_counter() - started
        return True

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
        kind = self._patchable(sources) if sources and not kernels_changed else None
        if kind is not None:
            assert catalog is not None and measurements is not None
            file = sources[0]
            reloaded, doc = self._reload(file, kind, diags)
            patched: tuple[bool, Catalog | None] = (False, None)
            if doc is not None and kind == "capsule":
                patched = True, revalidate_capsule(catalog, reloaded, doc, self.root,
                                                   measurements, diags)
                stale = {file}
            elif doc is not None:
                patched = revalidate_course(catalog, reloaded, doc, diags)
                stale = {d.file for d in reloaded
                         if d.kind in ("syllabus", "placement") or d is doc}
            if patched[0]:
                full = False
                docs, catalog = reloaded, patched[1]
                found = sorted([d for d in self.diags if d.loc.path not in stale
                                and d.code != "capsule.prerequisite-cycle"] + diags.sorted(),
                               key=Diagnostic.sort_key)
                self.dirty.add(file)
            else:
                diags = Diagnostics()
        if full:
            diags = Diagnostics()
            docs = load_project(self.root, diags)
            catalog = validate(docs, self.root, diags, self.templates)
            measurements = measure(catalog, self.root, diags) if catalog is not None else None
            found = diags.sorted()
            self.dirty = {"*"}  # until this state builds, only a full pipeline can follow it
        if catalog is None or measurements is None or any(d.severity == "error" for d in found):
            return self._failed([d for d in found if d.severity == "error"], started, full)

        if not self.edition_id:  # the default: the edition that shows every tier's text
            self.edition_id = fullest_edition(catalog)
        edition = next((e for e in catalog.site.editions if e.id == self.edition_id), None)
        if edition is None:
            known = ", ".join(e.id for e in catalog.site.editions)
            raise UsageError(f"no edition '{self.edition_id}' in content/site.yaml; "
                             f"editions: {known}")
        view = for_edition(catalog, edition)
        if templates_changed or not self.static:
            self.static = static_files(self.templates)
        render_diags = Diagnostics()
        units = self.engine.update(view, measurements, templates_changed, kernels_changed,
                                   render_diags)
        files = {**self.static, **self.engine.files()}
        for name in self.index_files:
            if name in self.files and name not in files:
                files[name] = self.files[name]
        changed = sorted(p for p in files.keys() | self.files.keys()
                         if p not in self.index_files and files.get(p) != self.files.get(p))
        self.docs, self.catalog, self.measurements, self.view = docs, catalog, measurements, view
        self.diags = [d for d in found if d.severity == "warning"]
        self.dirty = set()
        with self.cond:
            self.files = files
            self.errors = []
        return Update(0, True, time.perf_counter() - started, rebuilt=units, changed=changed,
                      diagnostics=[*self.diags, *render_diags.sorted()], full=full)

    def _patchable(self, sources: list[str]) -> str | None:
        """What kind of file one edit touched, if it can be re-validated on its own: one
        existing capsule or course.yaml, and nothing else edited since the last good state."""
        if len(set(sources)) != 1 or not self.dirty <= set(sources):
            return None
        file = sources[0]
        doc = next((d for d in self.docs if d.file == file), None)
        if doc is None or self.catalog is None or not (self.root / file).is_file():
            return None
        if doc.kind == "capsule" and doc.id in self.catalog.capsules:
            return "capsule"
        if doc.kind == "course" and doc.id in self.catalog.courses:
            return "course"
        return None

    def _reload(self, file: str, kind: str, diags: Diagnostics
                ) -> tuple[list[RawDoc], RawDoc | None]:
        old = next(d for d in self.docs if d.file == file)
        path = self.root / file
        doc = markdown_doc(self.root, path, kind, diags, course=old.course) if kind == "capsule" \
            else yaml_doc(self.root, path, kind, old.id, diags, course=old.course)
        if doc is None:
            return self.docs, None
        return [doc if d is old else d for d in self.docs], doc

    def _failed(self, errors: list[Diagnostic], started: float, full: bool = False) -> Update:
        with self.cond:
            self.errors = errors
        return Update(0, False, time.perf_counter() - started, diagnostics=errors, full=full)

    def _refresh_indexes(self, version: int, cancelled: Callable[[], bool]) -> None:
        """The search index, sitemap, feed and EPUB of the pages of rebuild `version`."""
        assert self.view is not None
        view, engine = self.view, self.engine
        with self.cond:
            if self.files_version != version:
                raise Cancelled
            pages = {p: d for p, d in self.files.items() if p not in self.index_files}
        out = engine.output(self.edition_id, pages)
        finish_edition(out, view, {}, self.date, cancelled=cancelled)
        made = {p: d for p, d in out.files.items() if p not in pages or d is not pages[p]}
        with self.cond:
            if self.files_version != version or cancelled():
                raise Cancelled  # a newer rebuild's pages are served; its indexes follow
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


class Indexer:
    """Makes a live site's indexes off the edit path: each request replaces the one
    waiting; a request is taken up after a quiet spell (`quiet_s`, so that edits saved one
    after another are indexed once), and a run still going when a newer rebuild lands is
    stopped and started again on the newer pages. `log` is told of each finished run."""

    def __init__(self, site: LiveSite, log: Callable[[Update], None],
                 quiet_s: float = 0.3) -> None:
        self.site = site
        self.log = log
        self.quiet_s = quiet_s
        self.cond = threading.Condition()
        self.pending: Update | None = None
        self.changed: set[str] = set()  # pages rebuilt since the last finished run
        self.stopping = False
        self.runs = 0  # finished runs
        self.thread = threading.Thread(target=self._run, name="curriculum-index", daemon=True)
        self.thread.start()

    def request(self, update: Update) -> None:
        with self.cond:
            self.pending = update
            self.changed |= set(update.changed)
            self.cond.notify_all()

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.thread.join(timeout=5)

    def idle(self, timeout: float) -> bool:
        """Wait until no request is waiting or running; False after `timeout` seconds."""
        with self.cond:
            return self.cond.wait_for(lambda: self.pending is None and not self.changed,
                                      timeout=timeout)

    def _run(self) -> None:
        while True:
            with self.cond:
                self.cond.wait_for(lambda: self.pending is not None or self.stopping)
                if self.stopping:
                    return
                update = self.pending
                # A quiet spell: a newer request replaces this one.
                if self.cond.wait_for(lambda u=update: self.pending is not u or self.stopping,
                                      timeout=self.quiet_s):
                    continue
                changed = set(self.changed)
            assert update is not None

            def cancelled(update: Update = update) -> bool:
                return self.stopping or self.pending is not update

            if self.site.finish(update, changed, cancelled):
                with self.cond:
                    self.changed -= changed
                    if self.pending is update:
                        self.pending = None
                    self.runs += 1
                    self.cond.notify_all()
                self.log(update)


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
        """Build everything, then serve and watch in background threads; after each
        rebuild the indexes are made by a third (see `Indexer`)."""
        first = self.site.apply(None)
        self.log(first)
        self.site.indexer = Indexer(self.site, self.log_indexed)
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

    def log_indexed(self, update: Update) -> None:
        """The indexes of a rebuild are made: how long they took, and what the late checks
        of its pages found."""
        self.log(dataclasses.replace(update, seconds=update.index_seconds, rebuilt=[],
                                     changed=[], diagnostics=update.late, indexed=True))

    def stop(self) -> None:
        if self.site.indexer is not None:
            self.site.indexer.stop()
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
