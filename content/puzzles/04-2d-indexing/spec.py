"""2D indexing: out[i][j] = a[i] + b[j], a 2D grid of 2D blocks over an M x N output."""

import numpy as np

from curriculum.puzzle.spec import In, Out, Size, Spec, cdiv

SPEC = Spec(
    entry="outer_add_kernel",
    params=(
        In("a", "float32", lambda s: (s["m"],), "one value per row"),
        In("b", "float32", lambda s: (s["n"],), "one value per column"),
        Out("out", "float32", lambda s: (s["m"], s["n"]), "out[i][j] = a[i] + b[j], row-major"),
        Size("m", "rows"),
        Size("n", "columns"),
    ),
    grid=lambda s: (cdiv(s["n"], 16), cdiv(s["m"], 16)),
    block=(16, 16),
    inputs=lambda s, rng: {"a": rng.uniform(-1, 1, s["m"]).astype(np.float32),
                           "b": rng.uniform(-1, 1, s["n"]).astype(np.float32)},
    reference=lambda x, s: {"out": x["a"][:, None] + x["b"][None, :]},
    sizes={"m": 3001, "n": 2003},
    small={"m": 37, "n": 53},
    atol=1e-6,
    rtol=1e-6,
    tolerance_reason="one float32 rounding of a sum below 2",
)
