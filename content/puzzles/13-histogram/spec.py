"""Histogram: count how many of n values fall in each of 256 bins, with atomics."""

import numpy as np

from curriculum.puzzle.spec import In, Out, Size, Spec

BINS = 256


def inputs(s, rng):
    # Skewed on purpose: a third of the values land in eight bins, so atomics on those
    # addresses collide often.
    n = s["n"]
    spread = rng.integers(0, BINS, n)
    hot = rng.integers(100, 108, n)
    pick = rng.random(n) < 1 / 3
    return {"x": np.where(pick, hot, spread).astype(np.int32)}


SPEC = Spec(
    entry="histogram_kernel",
    params=(
        In("x", "int32", lambda s: (s["n"],), "values, each in 0..255"),
        Out("counts", "int32", lambda s: (BINS,), "counts[v] = how many x equal v",
            zeroed=True),
        Size("n", "values"),
    ),
    grid=lambda s: (264,),
    block=(256,),
    inputs=inputs,
    reference=lambda x, s: {"counts": np.bincount(x["x"].astype(np.int64), minlength=BINS)
                            .astype(np.float64)},
    sizes={"n": 1 << 24},
    small={"n": 5000},
    atol=0.0,
    rtol=0.0,
    tolerance_reason="counts are exact",
)
