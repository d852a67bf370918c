"""Compare two built sites file by file, setting the course sidebar aside.

    python bench/site_diff.py OLD_SITE NEW_SITE

Prints the files only one site has, the files that differ outside the sidebar
(`<nav class="sidebar" ...>...</nav>`), and how many differ only inside it. Exits 1
when anything differs outside the sidebar.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SIDEBAR = re.compile(rb'<nav class="sidebar".*?</nav>', re.S)


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def main(argv: list[str]) -> int:
    old, new = Path(argv[0]), Path(argv[1])
    a, b = files(old), files(new)
    only_old, only_new = sorted(a - b), sorted(b - a)
    same = nav_only = 0
    other: list[str] = []
    for rel in sorted(a & b):
        x, y = (old / rel).read_bytes(), (new / rel).read_bytes()
        if x == y:
            same += 1
        elif SIDEBAR.sub(b"", x) == SIDEBAR.sub(b"", y):
            nav_only += 1
        else:
            other.append(rel)
    for rel in only_old:
        print(f"only in {old}: {rel}")
    for rel in only_new:
        print(f"only in {new}: {rel}")
    for rel in other:
        print(f"differs outside the sidebar: {rel}")
    print(f"{same} identical, {nav_only} differ only in the sidebar, {len(other)} differ "
          f"elsewhere, {len(only_old)} only in the old site, {len(only_new)} only in the new")
    return 1 if other or only_old or only_new else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
