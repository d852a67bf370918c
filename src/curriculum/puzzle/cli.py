"""`curriculum puzzle list | show N | check N FILE`.

    list           number, title and difficulty of every puzzle
    show N         puzzle N's spec, arguments, launch, hints and the starter's path
    check N FILE   compile FILE, check it on fresh random inputs, time it against the
                   reference solution (needs CuPy and a CUDA GPU; without them: exit 2)

Exit codes: 0 passed, 1 wrong output or a file that does not compile or run,
2 a usage problem (no such puzzle, no such file, no GPU).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from curriculum.puzzle.spec import argument_rows, launch_text, stars

if TYPE_CHECKING:
    from curriculum.puzzle.content import Puzzle


def configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="puzzle_command", required=True)
    sub.add_parser("list", help="every puzzle: number, title, difficulty")
    show = sub.add_parser("show", help="a puzzle's spec, shapes, hints and starter file")
    show.add_argument("n", help="puzzle number")
    check = sub.add_parser("check", help="check and time your kernel on the GPU")
    check.add_argument("n", help="puzzle number")
    check.add_argument("file", type=Path, help="your .cu file (start from the starter)")
    check.add_argument("--seed", type=int, default=None,
                       help="seed of the random inputs (default: a fresh one, printed)")
    check.add_argument("--small", action="store_true",
                       help="run at the puzzle's small sizes (quicker to debug)")


def _out(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def _err(line: str) -> None:
    sys.stderr.write(line + "\n")


def run(args: argparse.Namespace) -> int:
    from curriculum.errors import Diagnostics
    from curriculum.puzzle.content import load_puzzles

    diags = Diagnostics()
    puzzles = load_puzzles(args.root, diags)
    for d in diags.sorted():
        _err(d.format())
    if args.puzzle_command == "list":
        return _list(puzzles)
    puzzle = _pick(puzzles, args.n)
    if puzzle is None:
        return 2
    if args.puzzle_command == "show":
        return _show(puzzle, args.root)
    return _check(puzzle, args)


def _pick(puzzles: list[Puzzle], n: str) -> Puzzle | None:
    known = ", ".join(str(p.number) for p in puzzles) or "none"
    try:
        number = int(n)
    except ValueError:
        _err(f"error: '{n}' is not a puzzle number; puzzles: {known}")
        return None
    found = next((p for p in puzzles if p.number == number), None)
    if found is None:
        _err(f"error: no puzzle {number}; puzzles: {known}")
    return found


def _list(puzzles: list[Puzzle]) -> int:
    if not puzzles:
        _err("no puzzles in content/puzzles/")
        return 0
    width = max(len(p.meta.title) for p in puzzles)
    _out(f"{'N':>2}  {'title':<{width}}  difficulty")
    for p in puzzles:
        _out(f"{p.number:>2}  {p.meta.title:<{width}}  {stars(p.meta.difficulty)} "
             f"({p.meta.difficulty}/5)")
    return 0


def _show(p: Puzzle, root: Path) -> int:
    _out(f"Puzzle {p.number}: {p.meta.title}  [{stars(p.meta.difficulty)}]")
    _out(p.meta.summary)
    _out()
    _out(p.body.text.strip())
    _out()
    _out(f'Kernel: extern "C" __global__ void {p.spec.entry}(...)')
    for name, role, dtype, shape, doc in argument_rows(p.spec):
        _out(f"  {name:<6} {role:<24} {dtype:<8} {shape:<18} {doc}")
    _out(f"Launch: {launch_text(p.spec)}")
    _out(f"Tolerance: |got - want| <= {p.spec.atol:g} + {p.spec.rtol:g} * |want| "
         f"({p.spec.tolerance_reason})")
    _out()
    for i, hint in enumerate(p.meta.hints, start=1):
        _out(f"Hint {i}: {hint}")
    _out()
    starter = p.starter.relative_to(root.resolve()) if p.starter.is_relative_to(root.resolve()) \
        else p.starter
    _out(f"Starter: {starter}")
    _out(f"Copy it, fill in the kernel, then: curriculum puzzle check {p.number} FILE")
    return 0


def _check(p: Puzzle, args: argparse.Namespace) -> int:
    from curriculum.bench.errors import NoGpuError
    from curriculum.puzzle.check import PuzzleError, run_check

    sizes = p.spec.small if args.small else p.spec.sizes
    try:
        outcome = run_check(p, args.file, sizes=sizes, seed=args.seed)
    except NoGpuError as exc:
        _err(f"puzzle check needs CuPy and a CUDA GPU, and none is usable here: {exc}")
        return 2
    except PuzzleError as exc:
        _err(f"error: {exc}")
        return exc.exit_code
    shape = ", ".join(f"{k}={v}" for k, v in outcome.sizes.items())
    _out(f"puzzle {p.number} ({p.meta.title}) at {shape}, seed {outcome.seed}")
    for c in outcome.comparisons:
        if not c.bad:
            _out(f"{c.name}: all {c.total} elements match")
        else:
            _out(f"{c.name}: {c.bad} of {c.total} elements wrong; the first "
                 f"{len(c.mismatches)}:")
            for m in c.mismatches:
                _out(f"  {c.name}{list(m.index)}: expected {m.want!r}, got {m.got!r}")
        if c.overrun is not None:
            _out(f"{c.name}: the kernel wrote past the end of {c.name} (element "
                 f"{c.total + c.overrun}, {c.overrun + 1} past the last): guard the index")
    if not outcome.passed:
        _out("FAILED")
        return 1
    assert outcome.yours_ms is not None
    _out(f"your kernel:        {_ms(outcome.yours_ms)}")
    if outcome.reference_ms is not None:
        ratio = outcome.yours_ms[0] / outcome.reference_ms[0]
        _out(f"reference solution: {_ms(outcome.reference_ms)}  (yours takes {ratio:.2f}x)")
    else:
        _out(f"reference solution: not timed ({outcome.reference_note})")
    _out("PASSED")
    return 0


def _ms(t: tuple[float, float, float]) -> str:
    median, p20, p80 = t
    return f"{median:.4f} ms median (20th-80th percentile {p20:.4f}-{p80:.4f} ms)"
