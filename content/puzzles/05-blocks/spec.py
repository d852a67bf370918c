"""Blocks: out[i] = |a[i] - b[i]| with a fixed grid far smaller than n (grid-stride loop)."""

import numpy as np

from curriculum.puzzle.spec import In, Out, Size, Spec

SPEC = Spec(
    entry="absdiff_kernel",
    params=(
        In("a", "float32", lambda s: (s["n"],), "first input"),
        In("b", "float32", lambda s: (s["n"],), "second input"),
        Out("out", "float32", lambda s: (s["n"],), "|a - b|"),
        Size("n", "elements; far more than the grid's threads"),
    ),
    grid=lambda s: (132,),
    block=(256,),
    inputs=lambda s, rng: {"a": rng.uniform(-1, 1, s["n"]).astype(np.float32),
                           "b": rng.uniform(-1, 1, s["n"]).astype(np.float32)},
    reference=lambda x, s: {"out": np.abs(x["a"] - x["b"])},
    sizes={"n": (1 << 24) + 3},
    small={"n": 100_003},
    atol=1e-7,
    rtol=1e-6,
    tolerance_reason="one float32 rounding of a difference below 2",
)
