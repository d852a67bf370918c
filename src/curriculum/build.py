"""`build()`: every stage in order, top to bottom.

load -> validate -> measure -> (per edition) gate -> render -> index -> check
-> write. Each edition's pages are rendered by the engine (`engine.py`) with
every unit dirty and streamed into a staging folder as they render; the
folders are swapped in only once every edition has passed its checks, so a
failed build leaves the previous site untouched.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import marshal
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from curriculum import index, store
from curriculum.bodies import parsed_elsewhere
from curriculum.catalog import Catalog
from curriculum.check import LeakCheck, check_links
from curriculum.engine import page_units, render_into
from curriculum.errors import Diagnostic, Diagnostics, UsageError
from curriculum.gating import EditionView, for_edition, public_texts, withheld_texts
from curriculum.index import SharedBundle, add_indexes, search_digests
from curriculum.load import load_project
from curriculum.markdown import add_highlighted
from curriculum.measure import Measurements, measure
from curriculum.output import Output, StagedFiles
from curriculum.render import Renderer
from curriculum.validate import validate
from curriculum.workers import ParseAhead, build_jobs, forked, scratch_folder
from curriculum.write import discard, new_staging, swap_in


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


def check_project(root: Path, templates: Path | None = None, ahead: ParseAhead | None = None
                  ) -> tuple[Diagnostics, Catalog | None, Measurements | None]:
    """Load, validate and measure: everything short of rendering. With `ahead`, the bodies
    it parses in its second process are taken from there."""
    diags = Diagnostics()
    with parsed_elsewhere(*(ahead.batches if ahead is not None else [])):
        docs = load_project(root, diags)
        catalog = validate(docs, root, diags, templates)
    if catalog is None:
        return diags, None, None
    measurements = measure(catalog, root, diags)
    return diags, catalog, measurements


def static_files(templates: Path) -> dict[str, bytes]:
    from pygments.formatters import HtmlFormatter

    from curriculum.assets import Refused, confine, read_asset

    files = {}
    static = templates / "static"
    for path in sorted(static.rglob("*")):
        if path.is_file() or path.is_symlink():
            rel = path.relative_to(static).as_posix()
            # The same rule as a page's images: a regular file inside the static folder.
            found = confine(rel, static, static, 1 << 30)
            if isinstance(found, Refused):
                raise UsageError(f"templates/static/{rel}: {found.message}")
            files["static/" + rel] = read_asset(found, 1 << 30)
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


def finish_edition(out: Output, view: EditionView, static: dict[str, bytes], date: str,
                   meanwhile: Callable[[], None] | None = None,
                   cancelled: Callable[[], bool] | None = None,
                   shared: SharedBundle | None = None) -> dict[str, bytes]:
    """What every edition gets after its pages: static assets and the indexes (see
    `add_indexes` for `meanwhile`, `cancelled` and `shared`); returns the search index's
    files."""
    for path, data in static.items():
        out.add(path, data)
    return add_indexes(out, view.catalog, date, meanwhile, cancelled, shared)


def build(root: Path, out_dir: Path | None = None, editions: list[str] | None = None,
          strict: bool = False, templates: Path | None = None, write: bool = True,
          progress: Callable[[str], None] | None = None,
          ahead: ParseAhead | None = None) -> BuildResult:
    """Build the chosen editions (all by default) into `out_dir/<edition>/`.

    Raises `ContentError` with every diagnostic when the content does not
    validate, or when `strict` and anything warned. `progress`, if given, is told
    in a line as each stage ends (a large course takes a while).
    """
    say = progress or (lambda line: None)
    started = time.perf_counter()
    root = root.resolve()
    templates = (templates or root / "templates").resolve()
    out_dir = (out_dir or root / "build").resolve()
    if not templates.is_dir():
        raise UsageError(f"no templates folder at {templates}")
    if ahead is None or ahead.root != root:
        ahead = ParseAhead(root)  # forked first: it loads the store below for itself
    store.load(root)  # what the last build highlighted and converted
    with _collector_paused(), ahead:
        diags, catalog, measurements = check_project(root, templates, ahead)
        add_highlighted(ahead.highlighted())  # a failure there costs only the time
    _trim_heap()  # before the editions fork: what a worker inherits is what is in use
    try:
        diags.raise_if_failed(strict)
    except BaseException:
        gc.unfreeze()  # a failed build's catalog is garbage now, cycles and all
        raise
    assert catalog is not None and measurements is not None
    chosen = chosen_editions(catalog, editions)
    say(f"checked {_count(len(catalog.capsules), 'capsule')}, "
        f"{_count(len(catalog.questions), 'question')} and {_count(len(catalog.paths), 'path')} "
        f"in {time.perf_counter() - started:.1f} s; rendering {', '.join(chosen)}")

    date, epoch = build_date()
    job = _EditionJob(root, templates, catalog, measurements, static_files(templates), date,
                      epoch, out_dir if write else None, strict)
    ids = [e.id for e in catalog.site.editions if e.id in chosen]
    result = BuildResult(diags, catalog=catalog)
    staged: dict[str, Path] = {}
    try:
        for edition_id, (out, items, folder) in zip(ids, _run_editions(job, ids), strict=True):
            diags.extend(items)
            result.outputs[edition_id] = out
            if folder is not None:
                staged[edition_id] = folder
        diags.raise_if_failed(strict)
    except BaseException:
        for folder in staged.values():
            discard(folder)
        raise
    pages = sum(len(o.pages) for o in result.outputs.values())
    say(f"rendered, indexed and checked {_count(pages, 'page')} in "
        f"{time.perf_counter() - started:.1f} s")
    for edition_id, folder in staged.items():
        swap_in(folder, out_dir / edition_id)
        files = result.outputs[edition_id].files
        if isinstance(files, StagedFiles):
            files.moved(out_dir / edition_id)
    if write:
        store.save(root)  # for the next build
    return result


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while the project is loaded and validated, and what
    was built then frozen, so that no later pass of the collector walks it.

    Validation builds the catalog: every body's tokens and records, hundreds of thousands
    of objects that live until the build ends and form next to no cycles. With the
    collector on, each full pass walks all of them again as the heap grows; at 1,000
    capsules that was a third of validating, and most of taking the bodies parsed by the
    second process."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()  # `_run_editions` unfreezes it, or `build` when the project failed
    finally:
        if was_enabled:
            gc.enable()


def _trim_heap() -> None:
    """Give the C heap's free pages back to the system, where the C library can
    (glibc's `malloc_trim`).

    Validation frees much of what it allocated (the bodies the second process sent, the
    texts and tokens of capsules packed since), but the C heap keeps the freed pages
    resident; each edition worker forked next would inherit them too."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


Built = tuple[Output, list[Diagnostic], Path | None]  # an edition's files, diagnostics, staging


@dataclass
class _Rendered:
    """One edition between rendering and indexing: its pages are staged, not yet checked."""

    edition_id: str
    view: EditionView
    out: Output
    diags: Diagnostics
    staging: Path | None
    leaks: LeakCheck | None = None


@dataclass
class _EditionJob:
    """What every edition's build reads: the checked project and the build's settings."""

    root: Path
    templates: Path
    catalog: Catalog
    measurements: Measurements
    static: dict[str, bytes]
    date: str
    epoch: int | None
    out_dir: Path | None  # None: render and check, write nothing
    strict: bool
    share_fragments: bool = False  # editions rendered one after another in one process

    def run(self, edition_ids: list[str], exchange: _Exchange) -> list[Built]:
        """Render each edition of `edition_ids`, then index and check each, its files
        streamed into a staging folder as they are made; a folder is kept (to be swapped
        in) only for an edition that passed. In between, every edition of the build, here
        and in other processes, offers what its pages show, to find the pages that all
        show alike (`_Exchange`)."""
        rendered: list[_Rendered] = []
        try:
            for edition_id in edition_ids:
                rendered.append(self.render(edition_id))
                exchange.offer(edition_id, search_digests(rendered[-1].out))
            for r in rendered:  # while the other editions' processes finish rendering
                r.leaks = LeakCheck(withheld_texts(self.catalog, r.view),
                                    lambda view=r.view: public_texts(view))
            # The edition that makes the shared search bundle goes first: the others wait for it.
            order = sorted(rendered, key=lambda r: r.edition_id != exchange.maker)
            built = {r.edition_id: self.finish(r, exchange.shared(r.edition_id)) for r in order}
        except BaseException:
            exchange.fail()
            for r in rendered:
                if r.staging is not None:
                    discard(r.staging)
            raise
        return [built[e] for e in edition_ids]

    def render(self, edition_id: str) -> _Rendered:
        edition = next(e for e in self.catalog.site.editions if e.id == edition_id)
        view = for_edition(self.catalog, edition)
        staging = new_staging(self.out_dir / edition_id) if self.out_dir is not None else None
        diags = Diagnostics()
        try:
            out = Output(files=StagedFiles(staging, self.epoch) if staging else {},
                         edition=edition.id)
            renderer = Renderer(view, self.measurements, self.templates, self.root, diags,
                                self.date)
            renderer.keep_fragments = self.share_fragments
            render_into(renderer, page_units(view.catalog), out)  # every unit is dirty
        except BaseException:
            if staging is not None:
                discard(staging)
            raise
        return _Rendered(edition_id, view, out, diags, staging)

    def finish(self, r: _Rendered, shared: SharedBundle | None) -> Built:
        """Index and check a rendered edition; its staging folder is discarded if it failed."""
        out, diags, leaks = r.out, r.diags, r.leaks
        assert leaks is not None

        def check_pages() -> None:  # while Pagefind indexes; its files are checked after
            check_links(out.files, r.edition_id, diags)
            leaks.scan(out.files, r.edition_id, diags)

        bundle = finish_edition(out, r.view, self.static, self.date, meanwhile=check_pages,
                                shared=shared)
        leaks.scan(bundle, r.edition_id, diags)
        staging = r.staging
        if staging is not None:
            out.chapters = []  # in the EPUBs on disk now; not sent back to the parent
            if diags.items if self.strict else diags.errors:
                discard(staging)
                staging = None
        return out, diags.items, staging


class _OtherEditionFailed(Exception):
    """Another edition's process failed; its own error is the one to report."""


class _Exchange:
    """How the editions of one build find the pages they all show alike (the same title
    and <main>), so that those are indexed for search once, not once per edition
    (`SharedBundle`).

    Each edition offers a digest of each of its pages once it has rendered them
    (`offer`), then waits for every other edition's (`shared`); the first edition makes
    the shared bundle and hands it to the others. Editions may be built in several
    processes at once: all of it goes through files in a scratch folder, and a process
    that fails leaves a mark there, so that none waits for it for good (nor for a process
    that `alive` says has gone). With no folder, nothing is shared.
    """

    def __init__(self, folder: Path | None, editions: list[str],
                 alive: Callable[[], bool] = lambda: True) -> None:
        self.folder = folder if len(editions) > 1 else None
        self.editions = editions
        self.maker = editions[0]
        self.alive = alive
        self.common: frozenset[str] | None = None

    def offer(self, edition_id: str, digests: dict[str, bytes]) -> None:
        if self.folder is not None:
            self._put(f"{edition_id}.digests", marshal.dumps(digests))

    def shared(self, edition_id: str) -> SharedBundle | None:
        if self.folder is None:
            return None
        if self.common is None:
            offers = [marshal.loads(self._get(f"{e}.digests")) for e in self.editions]
            alike = set(offers[0].items()).intersection(*(o.items() for o in offers[1:]))
            common = frozenset(path for path, _ in alike)
            # The search page loads an edition's own bundle first: each must keep a page.
            self.common = common if all(len(o) > len(common) for o in offers) else frozenset()
        if not self.common:
            return None
        return SharedBundle(self.common, edition_id == self.maker, self._publish, self._receive)

    def _publish(self, files: dict[str, bytes], folder: Path | None) -> None:
        self._put("shared", marshal.dumps((files, str(folder) if folder else "")))

    def _receive(self) -> tuple[dict[str, bytes], Path | None]:
        files, folder = marshal.loads(self._get("shared"))
        return files, Path(folder) if folder else None

    def fail(self) -> None:
        if self.folder is not None:
            with contextlib.suppress(OSError):
                (self.folder / "failed").touch()

    def _put(self, name: str, data: bytes) -> None:
        assert self.folder is not None
        part = self.folder / f".{name}.part"
        part.write_bytes(data)
        part.rename(self.folder / name)  # whole or not there

    def _get(self, name: str) -> bytes:
        assert self.folder is not None
        path = self.folder / name
        while not path.exists():
            if (self.folder / "failed").exists() or not self.alive():
                raise _OtherEditionFailed
            time.sleep(0.005)
        return path.read_bytes()


_JOB: _EditionJob | None = None  # the job a forked worker inherits


def _run_jobs(edition_ids: list[str], every: list[str], folder: str | None,
              parent: int) -> list[Built]:
    assert _JOB is not None
    exchange = _Exchange(Path(folder) if folder else None, every,
                         alive=lambda: os.getppid() == parent)
    return _JOB.run(edition_ids, exchange)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _run_editions(job: _EditionJob, ids: list[str]) -> list[Built]:
    """Each edition's build, side by side in forked processes where the system allows.

    Editions share the checked project, which a forked worker inherits without
    copying, and the search bundle of the pages they all show alike (`_Exchange`);
    each sends back its pages and diagnostics. The last edition runs in this process
    while the workers run the others.
    """
    global _JOB
    _JOB = job
    results: list[Built] = []
    failure: BaseException | None = None
    try:
        with contextlib.ExitStack() as stack:
            scratch = scratch_folder(stack, "curriculum-editions-") if len(ids) > 1 else None
            folder = Path(scratch) if scratch else None
            workers = min(len(ids), build_jobs()) - 1
            with forked(workers) as pool:
                if pool is None:
                    job.share_fragments = len(ids) > 1
                    return job.run(ids, _Exchange(folder, ids))
                # Large editions index their search bundles one edition at a time.
                index.PAGEFIND_LOCK = multiprocessing.get_context("fork").Lock()
                gc.freeze()  # the collector leaves the inherited catalog's pages shared
                # This process validated the project, so it takes the last edition, which
                # withholds least and so has the least to leak-check; the workers take the
                # others, one task each (an edition waits for the others' pages, so none
                # may queue behind another).
                groups = [ids[:-1][i::workers] for i in range(workers)]
                futures = [pool.submit(_run_jobs, group, ids, scratch, os.getpid())
                           for group in groups]

                def alive() -> bool:
                    return not any(f.done() and f.exception() is not None for f in futures)

                done: dict[str, Built] = {}
                try:
                    done[ids[-1]] = job.run(ids[-1:], _Exchange(folder, ids, alive))[0]
                except BaseException as exc:
                    failure = exc
                for group, future in zip(groups, futures, strict=True):
                    try:
                        done.update(zip(group, future.result(), strict=True))
                    except BaseException as exc:
                        if failure is None or isinstance(failure, _OtherEditionFailed):
                            failure = exc  # the edition that failed, not one that waited
                results = [done[e] for e in ids if e in done]
    finally:
        _JOB = None
        index.PAGEFIND_LOCK = None
        gc.unfreeze()
    if failure is not None:
        for _, _, staged in results:  # what the other editions staged will not be swapped in
            if staged is not None:
                discard(staged)
        raise failure
    return results


def chosen_editions(catalog: Catalog, editions: list[str] | None) -> list[str]:
    known = [e.id for e in catalog.site.editions]
    for e in editions or []:
        if e not in known:
            raise UsageError(f"no edition '{e}' in content/site.yaml; editions: {', '.join(known)}")
    return editions or known
