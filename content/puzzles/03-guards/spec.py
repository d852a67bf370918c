"""Guards: out[i] = max(a[i], 0) where n is not a multiple of the block."""

import numpy as np

from curriculum.puzzle.spec import In, Out, Size, Spec, cdiv

SPEC = Spec(
    entry="relu_kernel",
    params=(
        In("a", "float32", lambda s: (s["n"],), "the input vector"),
        Out("out", "float32", lambda s: (s["n"],), "max(a, 0)"),
        Size("n", "elements; not a multiple of 256"),
    ),
    grid=lambda s: (cdiv(s["n"], 256),),
    block=(256,),
    inputs=lambda s, rng: {"a": rng.uniform(-1, 1, s["n"]).astype(np.float32)},
    reference=lambda x, s: {"out": np.maximum(x["a"], 0.0)},
    sizes={"n": 10_000_019},
    small={"n": 1000},
    atol=0.0,
    rtol=0.0,
    tolerance_reason="max is exact in float32",
)
