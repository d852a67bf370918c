"""The engine: one edition's pages as units, what each unit reads, and which units an
edit makes dirty.

A unit is one call of a page function in `pages.py`: ("capsule", id) renders one capsule
page, ("course", id) a course page and its syllabus, ("indexes", "") the question,
experiment and measurement indexes, ("rest", "") the pages that show no content item
(puzzles, join, search, 404). Each unit reads a set of *facts*: named hashes of pieces of
the edition's catalog (the table below). After an edit, the dirty units are those reading
a fact whose hash changed; a template edit, or no previous state, makes every unit dirty.

`curriculum build` is the engine with every unit dirty, its pages streamed to disk as
they render; `curriculum serve` keeps the engine's state and renders what the watcher's
edits made dirty.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from curriculum import indexes, pages
from curriculum.catalog import Body, Catalog
from curriculum.errors import Diagnostics
from curriculum.gating import EditionView
from curriculum.measure import Measurements
from curriculum.output import Output
from curriculum.render import Renderer

Unit = tuple[str, str]

_PAGE_FUNCTIONS: dict[str, Callable[..., None]] = {
    "home": pages.home, "course": pages.course, "capsule": pages.capsule,
    "path": pages.learning_path, "question": pages.question,
    "experiment": pages.experiment, "ladder": pages.ladder,
    "review": pages.review, "placement": pages.placement,
    "indexes": indexes.render_indexes}


def page_units(cat: Catalog) -> list[Unit]:
    """Every unit of an edition, in render order."""
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
    """One unit, into a fresh in-memory output (the renderer keeps its edition)."""
    kind, item = unit
    r.out = Output(edition=r.out.edition)
    if kind == "rest":
        _render_rest(r)
    else:
        fn = _PAGE_FUNCTIONS[kind]
        fn(r, item) if item else fn(r)
    return Product(dict(r.out.files), r.out.pages, r.out.chapters)


def render_into(r: Renderer, units: Iterable[Unit], out: Output) -> None:
    """Every unit of `units`, each one's files passed on to `out` (which may stream them
    to disk) as soon as it is rendered."""
    for unit in units:
        product = render_unit(r, unit)
        for path, data in product.files.items():
            out.add(path, data)
        out.pages += product.pages
        out.chapters += product.chapters
    r.out = out


def _render_rest(r: Renderer) -> None:
    """`pages.rest` over a catalog holding only the site and its course shells, so that
    these pages read nothing but the site (the unit reads only the global fact)."""
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
        pages.rest(r)
    finally:
        r.cat, r.memo = full, memo


# --- what each unit reads ---------------------------------------------------------------------
#
# The map follows what `pages.py` puts in each page's context:
#
#   global          site.yaml, the edition, whether paths and a ladder exist  -> every unit
#   course:C        course.yaml (and syllabus) of C       -> C's course page, home
#   outline:C       C's title and its parts' ids and titles -> C's capsule pages (sidebar)
#   nav:C/P         id, title and draft state of part P's capsules, in order
#                                                         -> P's capsule pages (sidebar)
#   pager:X         the capsules before and after X, by id and title -> X's page
#   cards:C         every listed field of C's capsules    -> C's course page and syllabus
#   counts:C        the counts C's listing shows          -> home
#   capsule:X       X's front matter and text, its number and part -> X's page
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
        f[f"cards:{cid}"] = _h([f[f"card:{c.id}"] for c in caps])
        f[f"counts:{cid}"] = _h(pages.counts(caps))
        f[f"outline:{cid}"] = _h(entry.meta.title, [(p.id, p.title) for p in entry.parts])
        for part in entry.parts:
            f[f"nav:{cid}/{part.id}"] = _h([(c.id, c.meta.title, c.draft)
                                            for c in (cat.capsules[x] for x in part.capsules)])
        ready = [c for c in caps if not c.draft]
        for i, c in enumerate(ready):
            before = ready[i - 1] if i > 0 else None
            after = ready[i + 1] if i + 1 < len(ready) else None
            f[f"pager:{c.id}"] = _h([(x.id, x.meta.title) if x else None
                                     for x in (before, after)])
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
            need |= {f"capsule:{item}", f"outline:{cap.course}", f"nav:{cap.course}/{cap.part}",
                     f"pager:{item}"}
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




# --- the engine's state between renders ---------------------------------------------------


def footer_key(measurements: Measurements, catalog: Catalog) -> str:
    """The GPU and date of the latest run, which every page's footer shows."""
    latest = measurements.results.get(catalog.site.primary_gpu)
    run = latest.latest_run() if latest is not None else None
    return f"{run.provenance.gpu_name}|{run.provenance.date[:10]}" if run else ""


class Engine:
    """One edition's units, what each read when it was last rendered, and what it made.

    `update` renders the units whose facts changed since the last update (every unit the
    first time, or when `everything` is set, e.g. after a template edit) and keeps each
    unit's product; the state changes only when every dirty unit rendered.
    """

    def __init__(self, root: Path, templates: Path, date: str) -> None:
        self.root = root
        self.templates = templates
        self.date = date
        self.memo = Memo()
        self.facts: dict[str, str] = {}
        self.products: dict[Unit, Product] = {}
        self.results = ""
        self.env: Any = None  # the Jinja environment, reused until a template changes

    def reset(self) -> None:
        """Forget what was rendered (after a failure, it may not match the templates)."""
        self.products = {}
        self.env = None

    def update(self, view: EditionView, measurements: Measurements, everything: bool,
               kernels_changed: bool, diags: Diagnostics) -> list[Unit]:
        """Render the dirty units of `view`; returns them, in render order."""
        if everything:
            self.env = None
        results = results_key(self.root) if kernels_changed or not self.results \
            else self.results
        reads = unit_reads(view, self.root, self.memo)
        facts = unit_facts(view, self.root, results, reads, self.memo,
                           footer_key(measurements, view.catalog))
        stale = {k for k in facts.keys() | self.facts.keys()
                 if facts.get(k) != self.facts.get(k)}
        units = [u for u in page_units(view.catalog)
                 if everything or u not in self.products or reads[u] & stale]
        if any(k.startswith(("url:", "file:")) for k in stale):
            # A Markdown fragment is cached by its text and page; a moved link target
            # or an edited image changes its HTML without changing either.
            measurements.fragments.clear()
        renderer = Renderer(view, measurements, self.templates, self.root, diags, self.date)
        if self.env is not None:
            renderer.env = self.env
        fresh = {unit: render_unit(renderer, unit) for unit in units}
        self.products = {u: fresh.get(u) or self.products[u] for u in reads}  # render order
        self.env = renderer.env
        self.results, self.facts = results, facts
        return units

    def files(self) -> dict[str, bytes]:
        """Every file the units made, in render order."""
        made: dict[str, bytes] = {}
        for product in self.products.values():
            made.update(product.files)
        return made

    def output(self, edition: str, files: dict[str, bytes]) -> Output:
        """`files` with the units' index records and chapters, for the indexes."""
        products = list(self.products.values())
        return Output(files=dict(files), pages=[p for x in products for p in x.pages],
                      chapters=[c for x in products for c in x.chapters], edition=edition)
