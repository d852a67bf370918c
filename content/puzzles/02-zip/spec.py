"""Zip: out[i] = a[i] * b[i], two inputs read at the same index."""

import numpy as np

from curriculum.puzzle.spec import In, Out, Size, Spec

SPEC = Spec(
    entry="zip_kernel",
    params=(
        In("a", "float32", lambda s: (s["n"],), "first input"),
        In("b", "float32", lambda s: (s["n"],), "second input"),
        Out("out", "float32", lambda s: (s["n"],), "a * b, element by element"),
        Size("n", "elements; a multiple of 256"),
    ),
    grid=lambda s: (s["n"] // 256,),
    block=(256,),
    inputs=lambda s, rng: {"a": rng.uniform(-1, 1, s["n"]).astype(np.float32),
                           "b": rng.uniform(-1, 1, s["n"]).astype(np.float32)},
    reference=lambda x, s: {"out": x["a"] * x["b"]},
    sizes={"n": 1 << 24},
    small={"n": 1024},
    atol=1e-7,
    rtol=1e-6,
    tolerance_reason="one float32 rounding of a product below 1",
)
