"""Map: out[i] = 2 * a[i] + 1, one thread per element, n a multiple of the block."""

import numpy as np

from curriculum.puzzle.spec import In, Out, Size, Spec

SPEC = Spec(
    entry="map_kernel",
    params=(
        In("a", "float32", lambda s: (s["n"],), "the input vector"),
        Out("out", "float32", lambda s: (s["n"],), "2 * a + 1"),
        Size("n", "elements; a multiple of 256"),
    ),
    grid=lambda s: (s["n"] // 256,),
    block=(256,),
    inputs=lambda s, rng: {"a": rng.uniform(-1, 1, s["n"]).astype(np.float32)},
    reference=lambda x, s: {"out": 2.0 * x["a"] + 1.0},
    sizes={"n": 1 << 24},
    small={"n": 1024},
    atol=1e-6,
    rtol=1e-6,
    tolerance_reason="one float32 rounding of a value below 3",
)
