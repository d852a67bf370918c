"""Axis sum: out[j] = sum over i of a[i][j], the column sums of an M x N matrix."""

import numpy as np

from curriculum.puzzle.spec import In, Out, Size, Spec, cdiv

SPEC = Spec(
    entry="colsum_kernel",
    params=(
        In("a", "float32", lambda s: (s["m"], s["n"]), "the matrix, row-major"),
        Out("out", "float32", lambda s: (s["n"],), "the sum of each column"),
        Size("m", "rows"),
        Size("n", "columns"),
    ),
    grid=lambda s: (cdiv(s["n"], 32),),
    block=(32, 8),
    inputs=lambda s, rng: {"a": rng.uniform(-1, 1, (s["m"], s["n"])).astype(np.float32)},
    reference=lambda x, s: {"out": x["a"].sum(axis=0)},
    sizes={"m": 4096, "n": 3000},
    small={"m": 50, "n": 70},
    atol=1e-3,
    rtol=1e-4,
    tolerance_reason="4096 float32 additions per column; sums about 40 in size",
)
