"""Matmul: c = a @ b for M x K and K x N float32 matrices, 16 x 16 blocks."""

import numpy as np

from curriculum.puzzle.spec import In, Out, Size, Spec, cdiv

SPEC = Spec(
    entry="matmul_kernel",
    params=(
        In("a", "float32", lambda s: (s["m"], s["k"]), "left matrix, row-major"),
        In("b", "float32", lambda s: (s["k"], s["n"]), "right matrix, row-major"),
        Out("c", "float32", lambda s: (s["m"], s["n"]), "a @ b, row-major"),
        Size("m", "rows of a and c"),
        Size("n", "columns of b and c"),
        Size("k", "columns of a, rows of b"),
    ),
    grid=lambda s: (cdiv(s["n"], 16), cdiv(s["m"], 16)),
    block=(16, 16),
    inputs=lambda s, rng: {"a": rng.uniform(-1, 1, (s["m"], s["k"])).astype(np.float32),
                           "b": rng.uniform(-1, 1, (s["k"], s["n"])).astype(np.float32)},
    reference=lambda x, s: {"c": x["a"] @ x["b"]},
    sizes={"m": 1000, "n": 1100, "k": 700},
    small={"m": 17, "n": 19, "k": 23},
    atol=1e-3,
    rtol=1e-4,
    tolerance_reason="700 float32 multiply-adds per element; results about 9 in size",
)
