"""Pooling: out[i] = a[i-7] + ... + a[i], a trailing window of 8 (terms before 0 are 0)."""

import numpy as np

from curriculum.puzzle.spec import In, Out, Size, Spec, cdiv

WINDOW = 8


def reference(x, s):
    a = x["a"]
    out = np.zeros_like(a)
    for k in range(WINDOW):
        out[k:] += a[: a.size - k]
    return {"out": out}


SPEC = Spec(
    entry="pool_kernel",
    params=(
        In("a", "float32", lambda s: (s["n"],), "the input vector"),
        Out("out", "float32", lambda s: (s["n"],), "sum of a[i-7 .. i], missing terms 0"),
        Size("n", "elements"),
    ),
    grid=lambda s: (cdiv(s["n"], 256),),
    block=(256,),
    inputs=lambda s, rng: {"a": rng.uniform(-1, 1, s["n"]).astype(np.float32)},
    reference=reference,
    sizes={"n": (1 << 22) + 5},
    small={"n": 1000},
    atol=1e-5,
    rtol=1e-5,
    tolerance_reason="eight float32 additions of values below 1, in any order",
)
