"""Shared memory: out = a transposed, through a 32 x 32 tile in shared memory."""

import numpy as np

from curriculum.puzzle.spec import In, Out, Size, Spec, cdiv

SPEC = Spec(
    entry="transpose_kernel",
    params=(
        In("a", "float32", lambda s: (s["m"], s["n"]), "the matrix, row-major"),
        Out("out", "float32", lambda s: (s["n"], s["m"]), "out[j][i] = a[i][j], row-major"),
        Size("m", "rows of a"),
        Size("n", "columns of a"),
    ),
    grid=lambda s: (cdiv(s["n"], 32), cdiv(s["m"], 32)),
    block=(32, 8),
    inputs=lambda s, rng: {"a": rng.uniform(-1, 1, (s["m"], s["n"])).astype(np.float32)},
    reference=lambda x, s: {"out": np.ascontiguousarray(x["a"].T)},
    sizes={"m": 3000, "n": 2000},
    small={"m": 45, "n": 70},
    atol=0.0,
    rtol=0.0,
    tolerance_reason="a copy is exact",
)
