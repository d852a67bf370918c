"""The `curriculum` command: a thin layer over the pipeline.

    curriculum build [--edition public|account|member|all] [--out DIR] [--strict] [--bench]
    curriculum check [--strict] [--site]
    curriculum serve [--edition EDITION] [--port 8000] [--open]
    curriculum new capsule|question|drill|path ID [...]
    curriculum bench [...]          (on a machine with a CUDA GPU)
    curriculum artifacts [--only ID-GLOB] [--out DIR]   (PTX, SASS, ncu figures; GPU + CUDA tools)
    curriculum puzzle list | show N | check N FILE   (check needs a CUDA GPU)
    curriculum trace [--out DIR]    (a decode step profiled; needs PyTorch and a CUDA GPU)
    curriculum schema [--out DIR]   (JSON Schemas of the source formats)

Every command acts on the project in the current folder, or on `--root DIR`.
Imports are lazy: `bench` runs where only a few wheels are installed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from curriculum.errors import ContentError, CurriculumError, Diagnostic, Diagnostics


def _console():  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console(stderr=True, highlight=False, emoji=False)


def report(diagnostics: list[Diagnostic]) -> None:
    from rich.markup import escape

    console = _console()
    for d in diagnostics:
        colour = "red" if d.severity == "error" else "yellow"
        console.print(f"[bold]{escape(str(d.loc))}[/]: [{colour}]{d.severity}"
                      f"{escape('[' + d.code + ']')}[/]: {escape(d.message)}"
                      + (f"; [dim]{escape(d.hint)}[/]" if d.hint else ""), soft_wrap=True)


def _escape_markup(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def cmd_build(args: argparse.Namespace) -> int:
    from curriculum.workers import ParseAhead

    if args.bench:
        status = bench_before_build(args.root)
        if status != 0:
            _console().print(f"[red]build stopped[/]: `curriculum bench` exited {status}; "
                             "nothing was written")
            return status
    editions = None if args.edition in (None, "all") else [args.edition]
    started = time.perf_counter()
    # The second process starts parsing before this one imports the build's stages.
    with ParseAhead(args.root) as ahead:
        from curriculum.build import build

        console = _console()
        result = build(args.root, out_dir=args.out, editions=editions, strict=args.strict,
                       templates=args.templates, ahead=ahead,
                       progress=lambda line: console.print(f"[dim]{line}[/]"))
    report(result.diagnostics.sorted())
    out = (args.out or args.root / "build").resolve()
    for edition, output in result.outputs.items():
        _console().print(f"built [bold]{edition}[/]: {len(output.files)} files in {out / edition}")
    warnings = len(result.diagnostics.warnings)
    _console().print(f"done in {time.perf_counter() - started:.2f} s, {warnings} warning(s)")
    return 0


def bench_before_build(root: Path) -> int:
    """`build --bench`: on a machine with a usable GPU, run `curriculum bench` with its
    defaults (every case whose result is missing or stale; fresh ones are kept), so the
    build that follows cites current figures. Without one, say so and skip it (0)."""
    try:
        from curriculum.bench import cli as bench_cli
        from curriculum.bench.cupy_backend import open_cupy_backend
        from curriculum.bench.errors import NoGpuError
    except ImportError as exc:
        _console().print(f"[yellow]--bench: skipping the benchmarks[/]: the bench cannot be "
                         f"imported here ({_escape_markup(str(exc))}); building from the "
                         "committed results")
        return 0
    try:
        open_cupy_backend().release()
    except NoGpuError as exc:
        _console().print(f"[yellow]--bench: skipping the benchmarks[/]: no usable GPU "
                         f"({_escape_markup(str(exc))}); building from the committed results, "
                         "so missing and stale figures stay marked as such")
        return 0
    _console().print("--bench: GPU found; running the missing and stale cases first")
    bench_args = argparse.ArgumentParser(add_help=False)
    bench_cli.configure(bench_args)
    options = bench_args.parse_args([])
    options.root = root
    return int(bench_cli.run(options))


def cmd_check(args: argparse.Namespace) -> int:
    from curriculum.workers import ParseAhead

    # As for `build`: a second process parses the later capsules while this one validates.
    with ParseAhead(args.root, highlight=False) as ahead:
        from curriculum.build import check_project

        diags, catalog, _ = check_project(args.root, args.templates, ahead)
    if catalog is not None and args.site:
        _check_built_site(args, catalog, diags)
    diags.raise_if_failed(args.strict)
    report(diags.sorted())
    assert catalog is not None
    _console().print(f"ok: {len(catalog.capsules)} capsules, {len(catalog.questions)} questions, "
                     f"{len(catalog.paths)} paths, {len(diags.warnings)} warning(s)")
    return 0


def _check_built_site(args: argparse.Namespace, catalog: Any, diags: Diagnostics) -> None:
    """`check --site`: links of every built edition on disk, and orphaned capsules."""
    from curriculum.build import chosen_editions
    from curriculum.check import check_orphans, check_site
    from curriculum.errors import UsageError, rel

    out = (args.out or args.root / "build").resolve()
    editions = chosen_editions(catalog, None if args.edition in (None, "all") else [args.edition])
    for edition in editions:
        folder = out / edition
        if not folder.is_dir():
            raise UsageError(f"no built edition at {folder}; run `curriculum build` first")
        n = check_site(folder, edition, diags, prefix=rel(folder, args.root))
        _console().print(f"checked {n} files of the {edition} edition in {folder}")
    check_orphans(catalog, diags)


def cmd_serve(args: argparse.Namespace) -> int:
    from curriculum.serve import Server, Update

    def log(update: Update) -> None:
        report(update.diagnostics)
        if update.indexed:  # the search index, sitemap, feed and EPUB, after a rebuild
            _console().print(f"[dim]indexes made in {update.seconds * 1000:.0f} ms[/]")
            return
        if update.ok:
            what = "built" if update.version == 1 else (
                f"rebuilt {len(update.rebuilt)} unit(s), {len(update.changed)} file(s) changed")
            _console().print(f"[green]{what}[/] in {update.seconds * 1000:.0f} ms")
        else:
            _console().print(f"[red]not rebuilt[/]: {len(update.diagnostics)} error(s); "
                             "the last good pages stay served")

    templates = args.templates or args.root / "templates"
    server = Server(args.root, templates, args.edition, port=args.port, log=log)
    server.start()
    _console().print(f"serving the {server.site.edition_id} edition at {server.url} "
                     "(watching for edits; Ctrl+C stops)")
    if args.open:
        import webbrowser

        webbrowser.open(server.url)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def cmd_new(args: argparse.Namespace) -> int:
    from curriculum.scaffold import scaffold

    for path, action in scaffold(args.root, args.kind, args.id, vars(args),
                                 templates=args.templates):
        _console().print(f"{action} {path}")
    return cmd_check(argparse.Namespace(root=args.root, templates=args.templates, site=False,
                                        strict=False))


def cmd_schema(args: argparse.Namespace) -> int:
    from curriculum.schema import export_schemas

    out = args.out or args.root / "schemas"
    for path in export_schemas(out):
        _console().print(f"wrote {path}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from curriculum.bench import cli as bench_cli

    return bench_cli.run(args)


def cmd_artifacts(args: argparse.Namespace) -> int:
    from curriculum.artifacts import run

    return run(args.root, args.only, args.out, getattr(args, "sanitize", False),
               getattr(args, "quant_error", False))


def cmd_puzzle(args: argparse.Namespace) -> int:
    from curriculum.puzzle import cli as puzzle_cli

    return puzzle_cli.run(args)


def cmd_trace(args: argparse.Namespace) -> int:
    from curriculum import trace

    return trace.cmd(args, args.root)


def _configure_new(p: argparse.ArgumentParser) -> None:
    """Options of `curriculum new` (scaffold.py, which needs PyYAML, is imported on use)."""
    p.add_argument("kind", choices=["capsule", "question", "drill", "path"], help="what to start")
    p.add_argument("id", help="its id: lower-case letters, digits and hyphens")
    p.add_argument("--title", help="title (default: from the id)")
    p.add_argument("--summary", help="one-sentence summary")
    p.add_argument("--access", help="access tier (default: the lowest tier in site.yaml)")
    p.add_argument("--course", help="capsule: course id (default: the only or first course)")
    p.add_argument("--part", help="capsule: part id (default: the course's last part)")
    p.add_argument("--tag", help="capsule: short upper-case badge (default: from the id)")
    p.add_argument("--capsule-kind", dest="capsule_kind", default="concept",
                   choices=["concept", "experiment", "lab", "worked-question", "practice"],
                   help="capsule: kind (default: concept)")
    p.add_argument("--track", help="question: track (default: the most used track)")
    p.add_argument("--order", type=int, help="question: position in its track (default: last)")
    p.add_argument("--concept", action="append", default=[],
                   help="question: related capsule id (repeatable; default: the first capsule)")
    p.add_argument("--module", help="drill: ladder module, e.g. M03 (default: the last module)")
    p.add_argument("--lesson", help="drill: capsule id it practises (default: the first capsule)")
    p.add_argument("--category", default="kernels", help="drill: category (default: kernels)")
    p.add_argument("--hours", type=float, default=1.0, help="drill: expected hours (default: 1)")
    p.add_argument("--step", action="append", default=[],
                   help="path: a step as capsule:ID, question:ID or experiment:ID (repeatable)")


def parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser. Given `argv`, the commands whose options come from
    modules that take a while to import (the GPU harness, artifacts, puzzles, traces) get
    their options only if `argv` names them or asks for help: a build does not wait a
    tenth of a second for them."""
    words = set(argv) if argv is not None else None
    full = words is None or not words.isdisjoint({"-h", "--help"})

    def wanted(command: str) -> bool:
        return full or command in words  # type: ignore[operator]

    p = argparse.ArgumentParser(prog="curriculum", description=__doc__.split("\n\n")[0])
    p.add_argument("--root", type=Path, default=Path("."), help="project folder (default: .)")
    p.add_argument("--templates", type=Path, default=None,
                   help="templates folder (default: ROOT/templates)")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="build the site's editions into build/<edition>/")
    b.add_argument("--edition", default="all",
                   help="an edition id of site.yaml (public, account, member) or all (default: all)")
    b.add_argument("--out", type=Path, default=None, help="output folder (default: build/)")
    b.add_argument("--strict", action="store_true", help="treat every warning as an error")
    b.add_argument("--bench", action="store_true",
                   help="first run `curriculum bench` for missing and stale cases when a GPU "
                   "is present (skipped, with a note, when none is)")
    b.set_defaults(func=cmd_build)

    c = sub.add_parser("check", help="validate content and figures without rendering")
    c.add_argument("--strict", action="store_true", help="treat every warning as an error")
    c.add_argument("--site", action="store_true",
                   help="also check links in the built editions and report orphaned capsules")
    c.add_argument("--edition", default="all", help="with --site: edition to check (default: all)")
    c.add_argument("--out", type=Path, default=None, help="with --site: build folder (default: build/)")
    c.set_defaults(func=cmd_check)

    s = sub.add_parser("serve", help="serve one edition on localhost, rebuilding on every edit")
    s.add_argument("--edition", default="",
                   help="edition to serve (default: the edition whose max_tier is the highest "
                        "tier of site.yaml, which shows every page in full: member in this "
                        "repository's course; public shows what a reader without an account "
                        "sees)")
    s.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 picks one)")
    s.add_argument("--open", action="store_true", help="open the site in a browser")
    s.set_defaults(func=cmd_serve)

    n = sub.add_parser("new", help="start a capsule, question, drill or path from a template")
    _configure_new(n)
    n.set_defaults(func=cmd_new)

    sc = sub.add_parser("schema", help="export JSON Schemas of the YAML and front-matter formats")
    sc.add_argument("--out", type=Path, default=None, help="folder (default: schemas/)")
    sc.set_defaults(func=cmd_schema)

    be = sub.add_parser("bench", help="check and time every kernel suite on the GPU")
    if wanted("bench"):
        try:
            from curriculum.bench import cli as bench_cli

            bench_cli.configure(be)
        except ImportError:
            pass
    be.set_defaults(func=cmd_bench)

    ar = sub.add_parser("artifacts", help="write the PTX, SASS and ncu figures pages show "
                        "(needs a GPU, nvcc, cuobjdump and ncu)")
    if wanted("artifacts"):
        from curriculum.artifacts import configure as configure_artifacts

        configure_artifacts(ar)
    ar.set_defaults(func=cmd_artifacts)

    pz = sub.add_parser("puzzle", help="CUDA puzzles: list, show one, check your kernel on the GPU")
    if wanted("puzzle"):
        from curriculum.puzzle import cli as puzzle_cli

        puzzle_cli.configure(pz)
    pz.set_defaults(func=cmd_puzzle)

    tr = sub.add_parser("trace", help="profile a decode step, eager and as a CUDA graph, on the GPU")
    if wanted("trace"):
        from curriculum import trace

        trace.configure(tr)
    tr.set_defaults(func=cmd_trace)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser(argv).parse_args(argv)
    args.root = args.root.resolve()
    try:
        return int(args.func(args))
    except ContentError as exc:
        report(exc.diagnostics)
        mode = " (--strict: warnings count as errors)" if exc.strict else ""
        _console().print(f"[red]build failed[/]: {exc}{mode}; nothing was written")
        return exc.exit_code
    except CurriculumError as exc:
        _console().print(f"[red]error[/]: {_escape_markup(str(exc))}")
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
