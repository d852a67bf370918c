"""Dot product: out[0] = sum of a[i] * b[i] over 2^20 elements, one block of 1024 threads."""

import numpy as np

from curriculum.puzzle.spec import In, Out, Size, Spec

SPEC = Spec(
    entry="dot_kernel",
    params=(
        In("a", "float32", lambda s: (s["n"],), "first vector"),
        In("b", "float32", lambda s: (s["n"],), "second vector"),
        Out("out", "float32", lambda s: (1,), "the dot product"),
        Size("n", "elements"),
    ),
    grid=lambda s: (1,),
    block=(1024,),
    inputs=lambda s, rng: {"a": rng.uniform(-1, 1, s["n"]).astype(np.float32),
                           "b": rng.uniform(-1, 1, s["n"]).astype(np.float32)},
    reference=lambda x, s: {"out": np.array([np.dot(x["a"], x["b"])])},
    sizes={"n": 1 << 20},
    small={"n": 3000},
    atol=1e-2,
    rtol=1e-4,
    tolerance_reason="2^20 float32 products summed in a tree: the sum's size is about "
    "sqrt(n)/3 and each level rounds once",
)
