"""Every puzzle's reference solution, run on the CPU under `puzzle_emulation.h` at the
puzzle's small sizes, with the same poisoned outputs, canary tails and comparison as
`curriculum puzzle check`; and the emulation's own controls (a starter, a missing
guard and a wrong shuffle fail). Needs g++ with C++20; the GPU tests run the same
solutions on the device."""

from __future__ import annotations

import ctypes
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO

from curriculum.puzzle.check import CANARY, compare, overrun, upcast
from curriculum.puzzle.content import Puzzle, load_puzzles

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")

HEADER = Path(__file__).with_name("puzzle_emulation.h")
PUZZLES = {p.id: p for p in load_puzzles(REPO)}
C_TYPES = {"float32": "float", "int32": "int"}


def emulate(p: Puzzle, source: Path, tmp: Path, sizes: dict[str, int] | None = None,
            seed: int = 3) -> list[tuple[str, int, int | None]]:
    """(output, wrong elements, first canary element written) for each output."""
    spec = p.spec
    sizes = dict(sizes or spec.small)
    params, names = [], []
    for q in spec.params:
        ctype = "int" if q.role == "size" else C_TYPES[q.dtype] + "*"
        params.append(("const " if q.role == "in" else "") + f"{ctype} {q.name}")
        names.append(q.name)
    cpp = tmp / f"{p.id}.cpp"
    cpp.write_text(f'#include "{HEADER}"\n#include "{source}"\n'
                   f'extern "C" void run(int gx, int gy, int gz, int bx, int by, int bz, '
                   f'{", ".join(params)}) {{ launch({spec.entry}, dim3(gx, gy, gz), '
                   f'dim3(bx, by, bz), {", ".join(names)}); }}\n')
    lib_path = tmp / f"{p.id}.so"
    proc = subprocess.run(["g++", "-std=c++20", "-O1", "-w", "-shared", "-fPIC", "-pthread",
                           "-o", str(lib_path), str(cpp)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[:4000]
    lib = ctypes.CDLL(str(lib_path))
    inputs = spec.inputs(sizes, np.random.default_rng(seed))
    outputs, tails, args = {}, {}, []
    for q in spec.params:
        if q.role == "size":
            args.append(ctypes.c_int(sizes[q.name]))
        elif q.role == "in":
            inputs[q.name] = np.ascontiguousarray(inputs[q.name])
            args.append(inputs[q.name].ctypes.data_as(ctypes.c_void_p))
        else:
            n = math.prod(q.dims(sizes))
            buf = np.empty(n + CANARY, dtype=q.dtype)
            if buf.dtype.kind == "f":
                buf.fill(np.nan)
            else:
                buf.view(np.uint8).fill(0xFF)
            if q.zeroed:
                buf[:n] = 0
            outputs[q.name], tails[q.name] = buf[:n].reshape(q.dims(sizes)), buf[n:]
            args.append(buf.ctypes.data_as(ctypes.c_void_p))
    grid, block = spec.launch(sizes)
    lib.run(*[ctypes.c_int(v) for v in (*grid, *block)], *args)
    want = spec.reference(upcast(inputs), sizes)
    return [(q.name, compare(q.name, outputs[q.name], want[q.name], spec.atol, spec.rtol).bad,
             overrun(tails[q.name])) for q in spec.outputs]


@pytest.mark.parametrize("pid", sorted(PUZZLES))
def test_solution_passes_under_emulation(pid: str, tmp_path: Path) -> None:
    p = PUZZLES[pid]
    assert emulate(p, p.solution, tmp_path) == [(q.name, 0, None) for q in p.spec.outputs]


def test_solutions_at_sizes_spanning_several_blocks(tmp_path: Path) -> None:
    cases = {"11-matmul": {"m": 100, "n": 90, "k": 70}, "10-axis-sum": {"m": 300, "n": 100},
             "14-softmax-row": {"rows": 3, "cols": 1000}}
    for pid, sizes in cases.items():
        p = PUZZLES[pid]
        assert emulate(p, p.solution, tmp_path, sizes) == [(q.name, 0, None)
                                                           for q in p.spec.outputs]


def test_emulation_catches_wrong_kernels(tmp_path: Path) -> None:
    starter = PUZZLES["01-map"]
    assert emulate(starter, starter.starter, tmp_path) == [("out", 1024, None)]
    guards = PUZZLES["03-guards"]
    unguarded = tmp_path / "relu.cu"
    unguarded.write_text(guards.solution.read_text().replace("    if (i >= n) return;\n", ""))
    assert emulate(guards, unguarded, tmp_path) == [("out", 0, 0)]
    scan = PUZZLES["09-prefix-sum"]
    wrong = tmp_path / "scan.cu"
    wrong.write_text(scan.solution.read_text().replace("__shfl_up_sync", "__shfl_down_sync"))
    [(_, bad, _)] = emulate(scan, wrong, tmp_path)
    assert bad > 3000
