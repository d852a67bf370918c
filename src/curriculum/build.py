"""`build()`: every stage in order, top to bottom.

load -> validate -> measure -> (per edition) gate -> render -> index -> check
-> write. Nothing is written until every edition has rendered and passed its
checks, so a failed build leaves the previous site untouched.

The second half of the module serves `curriculum serve`: the same pages
rendered one *unit* at a time, the map of what each unit reads, and a
re-validation of one edited capsule, so that an edit re-renders only the pages
that show what changed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from curriculum.catalog import Body, Catalog
from curriculum.check import LeakCheck, check_links
from curriculum.errors import Diagnostic, Diagnostics, Loc, UsageError, did_you_mean
from curriculum.gating import EditionView, for_edition, public_texts, withheld_texts
from curriculum.index import add_indexes
from curriculum.load import RawDoc, load_project
from curriculum.markdown import add_highlighted, highlight_files
from curriculum.measure import Measurements, measure
from curriculum.output import Output, StagedFiles
from curriculum.render import Renderer
from curriculum.validate import validate
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


def render_edition(r: Renderer) -> None:
    """Every page of the renderer's edition, in order."""
    from curriculum.indexes import render_indexes
    from curriculum.pages import render_pages

    render_pages(r)
    render_indexes(r)


def finish_edition(out: Output, view: EditionView, static: dict[str, bytes], date: str,
                   meanwhile: Callable[[], None] | None = None) -> dict[str, bytes]:
    """What every edition gets after its pages: static assets and the indexes (see
    `add_indexes` for `meanwhile`); returns the search index's files."""
    for path, data in static.items():
        out.add(path, data)
    return add_indexes(out, view.catalog, date, meanwhile)


def build(root: Path, out_dir: Path | None = None, editions: list[str] | None = None,
          strict: bool = False, templates: Path | None = None, write: bool = True,
          progress: Callable[[str], None] | None = None) -> BuildResult:
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
    with _forked(min(1, build_jobs() - 1)) as side:
        # While this process loads and validates, a second one highlights the code blocks.
        pending = side.submit(highlight_files, sorted((root / "content").rglob("*.md"))) \
            if side is not None else None
        diags, catalog, measurements = check_project(root, templates)
        if pending is not None and pending.exception() is None:
            add_highlighted(pending.result())  # a failure there costs only the time
    diags.raise_if_failed(strict)
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
    return result


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

    def run(self, edition_id: str) -> tuple[Output, list[Diagnostic], Path | None]:
        """Render, index and check one edition, each file streamed into a staging folder
        as it is made; the folder is kept (to be swapped in) only if the edition passed."""
        diags = Diagnostics()
        edition = next(e for e in self.catalog.site.editions if e.id == edition_id)
        view = for_edition(self.catalog, edition)
        staging = new_staging(self.out_dir / edition_id) if self.out_dir is not None else None
        try:
            out = Output(files=StagedFiles(staging, self.epoch) if staging else {},
                         edition=edition.id)
            renderer = Renderer(view, self.measurements, self.templates, self.root, diags,
                                self.date, out)
            render_edition(renderer)
            leaks = LeakCheck(withheld_texts(self.catalog, view), public_texts(view))

            def check_pages() -> None:  # while Pagefind indexes; its files are checked after
                check_links(out.files, edition.id, diags)
                leaks.scan(out.files, edition.id, diags)

            bundle = finish_edition(out, view, self.static, self.date, meanwhile=check_pages)
            leaks.scan(bundle, edition.id, diags)
            if staging is not None:
                out.chapters = []  # in the EPUBs on disk now; not sent back to the parent
            failed = diags.items if self.strict else diags.errors
            if staging is not None and failed:
                discard(staging)
                staging = None
        except BaseException:
            if staging is not None:
                discard(staging)
            raise
        return out, diags.items, staging


_JOB: _EditionJob | None = None  # the job a forked worker inherits


def _run_job(edition_id: str) -> tuple[Output, list[Diagnostic], Path | None]:
    assert _JOB is not None
    return _JOB.run(edition_id)


def build_jobs() -> int:
    """How many editions to build at once: CURRICULUM_JOBS, else one per CPU core."""
    raw = os.environ.get("CURRICULUM_JOBS", "")
    if raw:
        try:
            return max(1, int(raw))
        except ValueError as exc:
            raise UsageError(f"CURRICULUM_JOBS={raw!r} is not a whole number") from exc
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _can_fork() -> bool:
    """Whether workers may be forked: the system can, and this process runs no other thread
    (a thread holding a lock at the fork would leave that lock held in the worker for good;
    a caller with threads, such as a test runner driving a browser, builds in one process)."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


@contextlib.contextmanager
def _forked(workers: int) -> Iterator[ProcessPoolExecutor | None]:
    """A pool of forked workers beside this process, or None where builds run in one
    process (fewer than one worker asked for, or `_can_fork` says no)."""
    if workers < 1 or not _can_fork():
        yield None
        return
    with ProcessPoolExecutor(max_workers=workers,
                             mp_context=multiprocessing.get_context("fork")) as pool:
        yield pool


def _run_editions(job: _EditionJob, ids: list[str]
                  ) -> list[tuple[Output, list[Diagnostic], Path | None]]:
    """Each edition's build, side by side in forked processes where the system allows.

    Editions share nothing but the checked project, which a forked worker inherits
    without copying; each sends back its pages and diagnostics. The first edition
    runs in this process while the workers run the others.
    """
    global _JOB
    _JOB = job
    try:
        with _forked(min(len(ids), build_jobs()) - 1) as pool:
            if pool is None:
                return [job.run(e) for e in ids]
            rest = [pool.submit(_run_job, e) for e in ids[1:]]
            results: list[tuple[Output, list[Diagnostic], Path | None]] = []
            failure: BaseException | None = None
            try:
                results.append(job.run(ids[0]))
            except BaseException as exc:
                failure = exc
            for future in rest:
                try:
                    results.append(future.result())
                except BaseException as exc:
                    failure = failure or exc
    finally:
        _JOB = None
    if failure is not None:
        for _, _, folder in results:  # what the other editions staged will not be swapped in
            if folder is not None:
                discard(folder)
        raise failure
    return results


def chosen_editions(catalog: Catalog, editions: list[str] | None) -> list[str]:
    known = [e.id for e in catalog.site.editions]
    for e in editions or []:
        if e not in known:
            raise UsageError(f"no edition '{e}' in content/site.yaml; editions: {', '.join(known)}")
    return editions or known


# --- pages one unit at a time (for `serve`) ------------------------------------------------
#
# A unit is one call of a page function in `pages.py`: ("capsule", id) renders one capsule
# page, ("course", id) a course page and its syllabus. Everything `render_pages` renders
# that is no unit of this list (the search page, the 404 page) is the unit ("rest", ""); it
# reads nothing but the site, so it is rendered with the catalog emptied of content.

Unit = tuple[str, str]


def page_units(cat: Catalog) -> list[Unit]:
    """Every unit of an edition, in the order `render_pages` renders them."""
    units: list[Unit] = [("home", "")]
    units += [("course", c) for c in cat.site.courses]
    units += [("capsule", c) for c, cap in cat.capsules.items() if not cap.draft]
    units += [("path", p) for p in sorted(cat.paths)]
    units += [("question", q) for q in sorted(cat.questions)]
    units += [("experiment", e) for e in sorted(cat.experiments)]
    if cat.ladder is not None:
        units.append(("ladder", ""))
    if cat.questions:
        units.append(("review", ""))
    if cat.placement is not None:
        units.append(("placement", ""))
    units.append(("indexes", ""))
    units.append(("rest", ""))
    return units


@dataclass
class Product:
    """What one unit rendered: its files (pages, figures, images), index records and
    EPUB chapters."""

    files: dict[str, bytes]
    pages: list[dict[str, Any]]
    chapters: list[Any]


def render_unit(r: Renderer, unit: Unit) -> Product:
    from curriculum import pages

    kind, item = unit
    r.out = dataclasses.replace(r.out, files={}, pages=[], chapters=[])  # keeps its edition
    if kind == "rest":
        _render_rest(r)
    elif kind == "indexes":
        from curriculum.indexes import render_indexes

        render_indexes(r)
    else:
        fn: Callable[..., None] = {
            "home": pages.home, "course": pages.course, "capsule": pages.capsule,
            "path": pages.learning_path, "question": pages.question,
            "experiment": pages.experiment, "ladder": pages.ladder,
            "review": pages.review, "placement": pages.placement}[kind]
        fn(r, item) if item else fn(r)
    return Product(dict(r.out.files), list(r.out.pages), list(r.out.chapters))


def _render_rest(r: Renderer) -> None:
    """`render_pages` over a catalog holding only the site and its course shells;
    keeps the pages no other unit renders."""
    from curriculum import pages

    full = r.cat
    shells = {cid: dataclasses.replace(entry, parts=(), syllabus=None)
              for cid, entry in full.courses.items()}
    r.cat = dataclasses.replace(full, courses=MappingProxyType(shells),
                                capsules=MappingProxyType({}), questions=MappingProxyType({}),
                                experiments=MappingProxyType({}), paths=MappingProxyType({}),
                                ladder=None, placement=None)
    memo = r.memo
    r.memo = {}  # values cached for the shells must not reach the other units
    try:
        pages.render_pages(r)
    finally:
        r.cat, r.memo = full, memo
    owned = {"index.html"} | {f"courses/{c}/index.html" for c in full.courses} \
        | {f"courses/{c}/syllabus/index.html" for c in full.courses}
    r.out.files = {p: d for p, d in r.out.files.items() if p not in owned}
    r.out.pages = [p for p in r.out.pages if p["path"] not in owned]
    r.out.chapters = []


# --- what each unit reads ---------------------------------------------------------------------
#
# A fact is a named hash of one piece of the edition's catalog. Each unit reads a set of
# facts; after an edit, the units to render again are those reading a fact whose hash
# changed. The map follows what `pages.py` puts in each page's context:
#
#   global          site.yaml, the edition, whether paths and a ladder exist  -> every unit
#   course:C        course.yaml (and syllabus) of C       -> C's course page, its capsules, home
#   nav:C           id, title and draft state of C's capsules, in order
#                                                         -> C's capsule pages (sidebar, pager)
#   cards:C         every listed field of C's capsules    -> C's course page and syllabus
#   counts:C        the counts C's listing shows          -> home
#   capsule:X       X's front matter and text             -> X's page
#   card:X          X as a listing shows it               -> paths, questions, ladder, prerequisites
#   url:X           where X's page is (course, draft)     -> every page linking to X
#   question:Q / qcard:Q / track:T, experiment:E / ecard:E, path:P, ladder  likewise
#   results         kernels/results/*.json and kernels/**/*.cu -> pages citing a figure or chart
#   file:F          an image file                          -> pages showing it
#
# Template edits are not facts: they re-render every unit.


def _h(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode("utf-8")).hexdigest()


class Memo:
    """Values computed from frozen catalog objects, kept across rebuilds: an edit
    replaces one capsule's objects, so the other 999 are hashed once, not per save."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, str], tuple[object, Any]] = {}

    def get(self, obj: object, kind: str, make: Callable[[], Any]) -> Any:
        key = (id(obj), kind)
        hit = self._seen.get(key)
        if hit is None or hit[0] is not obj:  # an id is reused only after its object died
            hit = (obj, make())
            self._seen[key] = hit
        return hit[1]

    def __call__(self, obj: object) -> str:
        """A hash of `obj` (a Body by its text, anything else by its repr)."""
        if obj is None:
            return ""
        return str(self.get(obj, "hash", lambda: hashlib.sha1(
            (obj.text if isinstance(obj, Body) else repr(obj)).encode("utf-8")).hexdigest()))


def _card(cap: Any, locked: bool) -> tuple[object, ...]:
    return (cap.id, cap.number, cap.course, cap.meta.tag, cap.meta.title, cap.meta.kind,
            cap.minutes, cap.meta.summary, cap.draft, cap.access, locked)


def _body_reads(bodies: Iterable[Body | None], root: Path) -> set[str]:
    """Facts a Markdown body reads besides its own text."""
    reads: set[str] = set()
    for body in bodies:
        if body is None:
            continue
        refs = body.refs
        if refs.figures or refs.charts:
            reads.add("results")
        for href, _ in refs.links:
            if href.startswith("capsule:"):
                reads.add("url:" + href.split(":", 1)[1].split("#", 1)[0])
        for src, _, _ in refs.images:
            if ":" not in src and src:
                reads.add("file:" + (Path(body.file).parent / src).as_posix())
    return reads


def unit_facts(view: EditionView, root: Path, results_key: str,
               reads: dict[Unit, set[str]], memo: Memo | None = None,
               footer: str = "") -> dict[str, str]:
    """Every fact of the edition, by name (`reads` names the image files to hash)."""
    from curriculum.pages import _counts

    memo = memo or Memo()
    cat = view.catalog
    # `footer` names the GPU and date of the latest run, which every page's footer shows.
    f: dict[str, str] = {"global": _h(cat.site, view.edition, bool(cat.paths),
                                      cat.ladder is not None, footer),
                         "results": results_key}
    def capsule_facts(cap: Any, locked: bool) -> tuple[str, str]:
        card = _h(_card(cap, locked))
        return card, _h(memo(cap.meta), cap.number, cap.part, cap.figures, card,
                        memo(cap.preview), memo(cap.rest))

    for x, cap in cat.capsules.items():
        locked = view.is_locked("capsule", x)
        card, page = memo.get(cap, f"facts:{locked}", lambda c=cap, lk=locked: capsule_facts(c, lk))
        f[f"card:{x}"], f[f"capsule:{x}"] = card, page
        f[f"url:{x}"] = _h(cap.course, cap.draft)
        # What the index pages show of a capsule: its title and the figures and charts it cites.
        f[f"cites:{x}"] = _h(cap.meta.title, cap.meta.access,
                             [(sorted((k, str(v)) for k, v in m.items() if k != "offset"), c)
                              for b in (cap.preview, cap.rest) if b
                              for m, c in [(fm, "fig") for fm, _ in b.refs.figures]
                              + [({"chart": y}, "chart") for y, _ in b.refs.charts]])
    for cid, entry in cat.courses.items():
        caps = cat.capsules_of(cid)
        f[f"course:{cid}"] = _h(entry.meta, entry.syllabus)
        f[f"nav:{cid}"] = _h([(c.id, c.meta.title, c.draft) for c in caps])
        f[f"cards:{cid}"] = _h([f[f"card:{c.id}"] for c in caps])
        f[f"counts:{cid}"] = _h(_counts(caps))
    tracks: dict[str, list[tuple[object, ...]]] = {}
    for q in sorted(cat.questions.values(), key=lambda q: (q.meta.track, q.meta.order)):
        locked = view.is_locked("question", q.id)
        f[f"question:{q.id}"] = _h(memo(q.meta), memo(q.question), memo(q.answer), q.related,
                                   locked)
        f[f"qcard:{q.id}"] = _h(q.meta.title, q.meta.summary, q.meta.track, q.meta.order,
                                q.access, locked)
        tracks.setdefault(q.meta.track, []).append((q.id, q.meta.order, f[f"qcard:{q.id}"]))
    for track, members in tracks.items():
        f[f"track:{track}"] = _h(members)
    for e in cat.experiments.values():
        locked = view.is_locked("experiment", e.id)
        f[f"experiment:{e.id}"] = _h(memo(e.meta), memo(e.preview), memo(e.rest), locked)
        f[f"ecard:{e.id}"] = _h(e.meta.title, e.meta.summary, e.access, locked)
    for p in cat.paths.values():
        f[f"path:{p.id}"] = memo(p.meta)
    if cat.ladder is not None:
        f["ladder"] = memo(cat.ladder)
    if cat.placement is not None:
        f["placement"] = memo(cat.placement)
    from curriculum.assets import Refused, confine, read_asset

    limit = cat.site.max_asset_bytes
    for names in reads.values():
        for name in names:
            if name.startswith("file:") and name not in f:
                found = confine(name[5:], root, root / "content", limit)
                try:
                    data = b"" if isinstance(found, Refused) else read_asset(found, limit)
                except OSError:
                    data = b""
                f[name] = hashlib.sha1(data).hexdigest() if data else ""
    return f


def unit_reads(view: EditionView, root: Path, memo: Memo | None = None
               ) -> dict[Unit, set[str]]:
    """The facts each unit reads; see the table above."""
    memo = memo or Memo()

    def body_reads(*bodies: Body | None) -> set[str]:
        found: set[str] = set()
        for b in bodies:
            if b is not None:
                found |= memo.get(b, "reads", lambda b=b: _body_reads([b], root))
        return found

    cat = view.catalog
    reads: dict[Unit, set[str]] = {}
    for unit in page_units(cat):
        kind, item = unit
        need = {"global"}
        if kind == "home":
            if cat.placement is not None:
                need.add("placement")
            for cid in cat.site.courses:
                need |= {f"course:{cid}", f"counts:{cid}"}
            need |= {f"path:{p}" for p in cat.paths} | {f"qcard:{q}" for q in cat.questions}
            need |= {f"ecard:{e}" for e in cat.experiments}
        elif kind == "course":
            need |= {f"course:{item}", f"cards:{item}", f"counts:{item}"}
        elif kind == "capsule":
            cap = cat.capsules[item]
            need |= {f"capsule:{item}", f"course:{cap.course}", f"nav:{cap.course}"}
            need |= {f"card:{p}" for p in cap.meta.prerequisites}
            need |= body_reads(cap.preview, cap.rest)
        elif kind == "path":
            need.add(f"path:{item}")
            for step in cat.paths[item].meta.steps:
                k, target = step.target
                need.add({"capsule": "card:", "question": "qcard:",
                          "experiment": "ecard:"}[k] + target)
        elif kind == "question":
            q = cat.questions[item]
            need |= {f"question:{item}", f"track:{q.meta.track}"}
            need |= {f"card:{c}" for c, _ in q.related}
            need |= body_reads(q.question, q.answer)
        elif kind == "experiment":
            e = cat.experiments[item]
            need.add(f"experiment:{item}")
            need |= {f"ecard:{x}" for x in cat.experiments}  # the pager names the next one
            need |= body_reads(e.preview, e.rest)
            if any(i.default_from for i in e.meta.inputs):
                need.add("results")
        elif kind == "review":
            need |= {f"question:{q}" for q in cat.questions}
        elif kind == "indexes":  # every card, and every capsule for what it cites
            need |= {"results"} | {f"qcard:{q}" for q in cat.questions}
            need |= {f"ecard:{e}" for e in cat.experiments}
            need |= {f"cites:{c}" for c in cat.capsules} | {f"url:{c}" for c in cat.capsules}
        elif kind == "placement":
            assert cat.placement is not None
            need |= {"placement", f"course:{cat.placement.course}"}
            need |= {f"card:{i.capsule}" for i in cat.placement.items}
            for rule in cat.placement.suggest:
                need.add(f"path:{rule.path}")
                need |= {{"capsule": "card:", "question": "qcard:", "experiment": "ecard:"}[k]
                         + t for k, t in (s.target for s in cat.paths[rule.path].meta.steps)}
        elif kind == "ladder":
            assert cat.ladder is not None
            need.add("ladder")
            need |= {f"card:{d.lesson}" for m in cat.ladder.modules for d in m.drills}
        reads[unit] = need
    return reads


def results_key(root: Path) -> str:
    """A hash of every input of the measured figures: results files and kernel sources."""
    h = hashlib.sha1()
    kernels = root / "kernels"
    for path in sorted(kernels.rglob("*")) if kernels.is_dir() else []:
        if path.suffix in (".json", ".cu") and path.is_file():
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()


# --- one edited capsule, validated against the rest of the catalog ------------------------


def revalidate_capsule(base: Catalog, docs: list[RawDoc], doc: RawDoc, root: Path,
                       m: Measurements, diags: Diagnostics) -> Catalog | None:
    """The catalog with capsule `doc` replaced, as `validate` + `measure` would build it.

    Only for an existing, placed capsule whose file still loads; every other
    change goes through the whole pipeline. `docs` is the full, current list.
    Diagnostics land in `diags`: those located in `doc.file`, and the cycle check.
    """
    from curriculum import validate as v
    from curriculum.catalog import CapsuleEntry
    from curriculum.markdown import split_at_marker
    from curriculum.measure import _check_figure

    old = base.capsules[doc.id]
    meta = v._model(doc, diags)
    others = [(d, base.capsules[d.id].meta) for d in docs
              if d.kind == "capsule" and d is not doc and d.id in base.capsules]
    v._check_cycles([*others, (doc, meta)] if meta is not None else others, diags)
    if meta is None:
        return None
    tiers = {t.id for t in base.site.tiers}
    if meta.access not in tiers:
        diags.error(doc.positions.loc(("access",)), "access.unknown-tier",
                    f"no access tier '{meta.access}'", did_you_mean(meta.access, tiers) or
                    f"tiers: {', '.join(t.id for t in base.site.tiers)}")
    ids = {"capsule": {d.id for d in docs if d.kind == "capsule"},
           "question": {d.id for d in docs if d.kind == "question"},
           "experiment": {d.id for d in docs if d.kind == "experiment"}}
    for i, pre in enumerate(meta.prerequisites):
        if pre not in ids["capsule"]:
            diags.error(doc.positions.loc(("prerequisites", i)), "capsule.unknown-prerequisite",
                        f"no capsule '{pre}'", did_you_mean(pre, ids["capsule"]))
    head, tail, at = split_at_marker(doc.body, "more")
    preview = v._body(head, doc.file, doc.body_line)
    rest = v._body(tail, doc.file, doc.body_line + at) if tail is not None else None
    if meta.status == "ready":
        if not doc.body.strip():
            diags.error(Loc(doc.file, doc.body_line, 1), "capsule.empty",
                        "a ready capsule needs a body", "write it, or set status: draft")
        for b in (preview, rest):
            if b is not None:
                v._check_body(b, root, ids, diags, base.site.max_asset_bytes)
        known = {c.id for r in m.results.values() for c in r.cases}
        for b in (preview, rest):
            for ref, line in b.refs.figures if b is not None else ():
                _check_figure(m, ref, Loc(b.file, b.line + line, 1), f"capsule '{doc.id}'",
                              known, diags)
            for yaml_text, line in b.refs.charts if b is not None else ():
                m.chart(yaml_text, b.file, b.line + line, diags)
    if diags.errors:
        return None
    figures = sum(len(b.refs.figures) + len(b.refs.charts) for b in (preview, rest) if b)
    entry = CapsuleEntry(doc.id, old.course, old.part, old.number, meta, old.loc, preview, rest,
                         v._minutes(preview, rest), figures)
    capsules = {cid: (entry if cid == doc.id else c) for cid, c in base.capsules.items()}
    questions = dict(base.questions)
    for qid, q in base.questions.items():
        if doc.id in q.meta.concepts:
            terms = {c: v._terms(x.meta.title, x.meta.summary, x.meta.tag,
                                 x.preview.text if x.meta.access == base.lowest_tier else "")
                     for c in q.meta.concepts if (x := capsules.get(c)) is not None}
            related = v.rank_related(v._terms(q.meta.title, q.meta.summary, q.question.text),
                                     terms)
            questions[qid] = dataclasses.replace(q, related=related)
    return dataclasses.replace(base, capsules=MappingProxyType(capsules),
                               questions=MappingProxyType(questions))
