"""`python -m curriculum.bench`: the bench without the site's CLI (and its imports)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from curriculum.bench import cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m curriculum.bench", description=cli.__doc__)
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="project root")
    cli.configure(parser)
    return cli.run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
