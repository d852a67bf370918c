"""The `curriculum` command: a thin layer over the pipeline.

    curriculum build [--edition public|member|all] [--out DIR] [--strict]
    curriculum check [--strict]
    curriculum serve [--edition member] [--port 8000]
    curriculum bench [...]          (on a machine with a CUDA GPU)
    curriculum schema [--out DIR]   (JSON Schemas of the source formats)

Every command acts on the project in the current folder, or on `--root DIR`.
Imports are lazy: `bench` runs where only a few wheels are installed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from curriculum.errors import ContentError, CurriculumError, Diagnostic


def _console():  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console(stderr=True, highlight=False)


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
    from curriculum.build import build

    editions = None if args.edition in (None, "all") else [args.edition]
    started = time.perf_counter()
    result = build(args.root, out_dir=args.out, editions=editions, strict=args.strict,
                   templates=args.templates)
    report(result.diagnostics.sorted())
    out = (args.out or args.root / "build").resolve()
    for edition, output in result.outputs.items():
        _console().print(f"built [bold]{edition}[/]: {len(output.files)} files in {out / edition}")
    warnings = len(result.diagnostics.warnings)
    _console().print(f"done in {time.perf_counter() - started:.2f} s, {warnings} warning(s)")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from curriculum.build import check_project

    diags, catalog, _ = check_project(args.root, args.templates)
    diags.raise_if_failed(args.strict)
    report(diags.sorted())
    assert catalog is not None
    _console().print(f"ok: {len(catalog.capsules)} capsules, {len(catalog.questions)} questions, "
                     f"{len(catalog.paths)} paths, {len(diags.warnings)} warning(s)")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import functools
    import http.server

    from curriculum.build import build

    result = build(args.root, out_dir=args.out, editions=[args.edition], strict=False,
                   templates=args.templates)
    report(result.diagnostics.sorted())
    folder = (args.out or args.root / "build").resolve() / args.edition
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    _console().print(f"serving the {args.edition} edition at {url} (Ctrl+C stops)")
    if args.open:
        import webbrowser

        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from curriculum.schema import export_schemas

    out = args.out or args.root / "schemas"
    for path in export_schemas(out):
        _console().print(f"wrote {path}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from curriculum.bench import cli as bench_cli

    return bench_cli.run(args)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="curriculum", description=__doc__.split("\n\n")[0])
    p.add_argument("--root", type=Path, default=Path("."), help="project folder (default: .)")
    p.add_argument("--templates", type=Path, default=None,
                   help="templates folder (default: ROOT/templates)")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="build the site's editions into build/<edition>/")
    b.add_argument("--edition", default="all", help="public, member or all (default: all)")
    b.add_argument("--out", type=Path, default=None, help="output folder (default: build/)")
    b.add_argument("--strict", action="store_true", help="treat every warning as an error")
    b.set_defaults(func=cmd_build)

    c = sub.add_parser("check", help="validate content and figures without rendering")
    c.add_argument("--strict", action="store_true", help="treat every warning as an error")
    c.set_defaults(func=cmd_check)

    s = sub.add_parser("serve", help="build one edition and serve it on localhost")
    s.add_argument("--edition", default="member", help="edition to serve (default: member)")
    s.add_argument("--out", type=Path, default=None, help="output folder (default: build/)")
    s.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 picks one)")
    s.add_argument("--open", action="store_true", help="open the site in a browser")
    s.set_defaults(func=cmd_serve)

    sc = sub.add_parser("schema", help="export JSON Schemas of the YAML and front-matter formats")
    sc.add_argument("--out", type=Path, default=None, help="folder (default: schemas/)")
    sc.set_defaults(func=cmd_schema)

    be = sub.add_parser("bench", help="check and time every kernel suite on the GPU")
    try:
        from curriculum.bench import cli as bench_cli

        bench_cli.configure(be)
    except ImportError:
        pass
    be.set_defaults(func=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
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
