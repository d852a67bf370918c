"""CUDA puzzles on the device: every reference solution passes `curriculum puzzle check`
at the checked sizes and at the small ones; wrong kernels fail with their first
mismatches, a missing guard is caught by the canary tail, and a compile error names
the reader's file and line. Skipped without CuPy and a usable GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

from curriculum.cli import main
from curriculum.puzzle.content import load_puzzles

pytestmark = pytest.mark.gpu

PUZZLES = {p.id: p for p in load_puzzles(REPO)}


@pytest.fixture(scope="module")
def gpu() -> None:
    pytest.importorskip("cupy")
    from curriculum.bench.cupy_backend import open_cupy_backend
    from curriculum.bench.errors import NoGpuError

    try:
        open_cupy_backend().release()
    except NoGpuError as exc:
        pytest.skip(f"no usable GPU: {exc}")


def check(capsys: pytest.CaptureFixture[str], number: int, file: Path,
          *extra: str) -> tuple[int, str, str]:
    code = main(["--root", str(REPO), "puzzle", "check", str(number), str(file), *extra])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("pid", sorted(PUZZLES))
def test_reference_solution_passes_check(gpu: None, capsys: pytest.CaptureFixture[str],
                                         pid: str) -> None:
    p = PUZZLES[pid]
    code, out, err = check(capsys, p.number, p.solution)
    assert code == 0, out + err
    assert "PASSED" in out and "your kernel:" in out and "reference solution:" in out
    assert "ms median" in out


@pytest.mark.parametrize("pid", sorted(PUZZLES))
def test_reference_solution_passes_at_small_sizes(gpu: None, pid: str) -> None:
    from curriculum.puzzle.check import run_check

    p = PUZZLES[pid]
    outcome = run_check(p, p.solution, sizes=p.spec.small, seed=5, timed=False)
    assert outcome.passed, [(c.name, c.bad, c.mismatches[:3], c.overrun)
                            for c in outcome.comparisons]


def test_starter_fails_with_its_first_mismatches(gpu: None, capsys: pytest.CaptureFixture[str]
                                                 ) -> None:
    p = PUZZLES["01-map"]
    code, out, _ = check(capsys, 1, p.starter, "--small")
    assert code == 1 and "FAILED" in out
    assert "out: 1024 of 1024 elements wrong; the first 10:" in out
    lines = [ln for ln in out.splitlines() if ln.startswith("  out[")]
    assert len(lines) == 10 and lines[0].startswith("  out[0]: expected ")
    assert lines[0].endswith("got nan")


def test_wrong_kernel_fails_with_indices_expected_and_got(
        gpu: None, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = PUZZLES["11-matmul"].solution.read_text()
    wrong = tmp_path / "matmul.cu"
    # Drops the last k-tile's contribution for the last row of blocks only.
    wrong.write_text(src.replace("for (int k0 = 0; k0 < k; k0 += TILE)",
                                 "for (int k0 = 0; k0 < k - (blockIdx.y == gridDim.y - 1 ? "
                                 "TILE : 0); k0 += TILE)"))
    code, out, _ = check(capsys, 11, wrong, "--seed", "1")  # seed 1: c[992, 0] is off by 2
    assert code == 1 and "FAILED" in out
    lines = [ln for ln in out.splitlines() if ln.startswith("  c[")]
    assert len(lines) == 10
    assert lines[0].startswith("  c[992, 0]: expected ")  # first row of the last row of blocks


def test_missing_guard_is_caught_by_the_canary(gpu: None, capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    src = PUZZLES["03-guards"].solution.read_text()
    unguarded = tmp_path / "relu.cu"
    unguarded.write_text(src.replace("    if (i >= n) return;\n", ""))
    code, out, _ = check(capsys, 3, unguarded, "--small")
    assert code == 1
    assert "out: all 1000 elements match" in out
    assert "wrote past the end of out (element 1000, 1 past the last)" in out


def test_compile_error_names_the_file_and_line(gpu: None, capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    broken = tmp_path / "broken.cu"
    broken.write_text('extern "C" __global__ void map_kernel(const float* a, float* out, int n) {\n'
                      "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                      "    out[i] = 2.0f * a[j] + 1.0f;\n"
                      "}\n")
    code, out, err = check(capsys, 1, broken)
    assert code == 1 and out == ""
    assert "does not compile" in err and f"{broken}:3: error" in err, err
