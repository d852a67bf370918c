"""Softmax row: out[r] = softmax(x[r]) for rows of 1000 values, one block per row."""

import numpy as np

from curriculum.puzzle.spec import In, Out, Size, Spec


def inputs(s, rng):
    # Each row is shifted by up to 100: exp() of such a value overflows float32
    # (above about 88.7), so the row's maximum must be subtracted first.
    rows, cols = s["rows"], s["cols"]
    x = rng.normal(0.0, 2.0, (rows, cols)) + rng.uniform(-100, 100, (rows, 1))
    return {"x": x.astype(np.float32)}


def reference(x, s):
    z = x["x"] - x["x"].max(axis=1, keepdims=True)
    e = np.exp(z)
    return {"out": e / e.sum(axis=1, keepdims=True)}


SPEC = Spec(
    entry="softmax_kernel",
    params=(
        In("x", "float32", lambda s: (s["rows"], s["cols"]), "the logits, row-major"),
        Out("out", "float32", lambda s: (s["rows"], s["cols"]), "softmax of each row"),
        Size("rows", "rows; one block each"),
        Size("cols", "values per row; not a multiple of the block"),
    ),
    grid=lambda s: (s["rows"],),
    block=(256,),
    inputs=inputs,
    reference=reference,
    sizes={"rows": 4096, "cols": 1000},
    small={"rows": 4, "cols": 37},
    atol=1e-7,
    rtol=1e-4,
    tolerance_reason="float32 exp and a 1000-term sum: relative error a few 1e-6",
)
