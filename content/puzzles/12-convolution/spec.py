"""Convolution: a 5 x 5 filter over an H x W image, zero outside the image ('same' size)."""

import numpy as np

from curriculum.puzzle.spec import In, Out, Size, Spec, cdiv

R = 2  # filter radius: 5 x 5


def reference(x, s):
    h, w = s["h"], s["w"]
    padded = np.zeros((h + 2 * R, w + 2 * R))
    padded[R:R + h, R:R + w] = x["img"]
    out = np.zeros((h, w))
    for dy in range(2 * R + 1):
        for dx in range(2 * R + 1):
            out += x["f"][dy, dx] * padded[dy:dy + h, dx:dx + w]
    return {"out": out}


SPEC = Spec(
    entry="conv2d_kernel",
    params=(
        In("img", "float32", lambda s: (s["h"], s["w"]), "the image, row-major"),
        In("f", "float32", lambda s: (5, 5), "the filter"),
        Out("out", "float32", lambda s: (s["h"], s["w"]),
            "out[y][x] = sum of f[dy][dx] * img[y+dy-2][x+dx-2]"),
        Size("h", "rows"),
        Size("w", "columns"),
    ),
    grid=lambda s: (cdiv(s["w"], 16), cdiv(s["h"], 16)),
    block=(16, 16),
    inputs=lambda s, rng: {"img": rng.uniform(-1, 1, (s["h"], s["w"])).astype(np.float32),
                           "f": rng.uniform(-1, 1, (5, 5)).astype(np.float32)},
    reference=reference,
    sizes={"h": 1000, "w": 1500},
    small={"h": 20, "w": 33},
    atol=1e-5,
    rtol=1e-5,
    tolerance_reason="25 float32 multiply-adds per element of values below 1",
)
