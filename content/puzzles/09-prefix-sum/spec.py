"""Prefix sum: an inclusive scan of each row of 1024 values, one block per row."""

import numpy as np

from curriculum.puzzle.spec import In, Out, Size, Spec

SPEC = Spec(
    entry="scan_kernel",
    params=(
        In("a", "float32", lambda s: (s["rows"], 1024), "rows of 1024 values"),
        Out("out", "float32", lambda s: (s["rows"], 1024), "out[r][i] = a[r][0] + ... + a[r][i]"),
        Size("rows", "rows; one block each"),
    ),
    grid=lambda s: (s["rows"],),
    block=(1024,),
    inputs=lambda s, rng: {"a": rng.uniform(-1, 1, (s["rows"], 1024)).astype(np.float32)},
    reference=lambda x, s: {"out": np.cumsum(x["a"], axis=1)},
    sizes={"rows": 4096},
    small={"rows": 3},
    atol=1e-4,
    rtol=1e-4,
    tolerance_reason="up to 1024 float32 additions per element in a different order; "
    "partial sums stay below about 40",
)
