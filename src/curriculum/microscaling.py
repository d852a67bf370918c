"""`curriculum artifacts --quant-error`: how much each low-precision weight format loses.

Two fixed-seed 4096 x 4096 weight matrices, one Gaussian and one heavy-tailed (Student t with 3
degrees of freedom, whose largest values sit far out), are quantised to each format below, with
its scales, and dequantised; the relative Frobenius error of the weights and the relative error of
a GEMV output y = W x (x Gaussian, fixed seed) are written as a text table to
`kernels/microscaling/artifacts/01_quant_error.txt`.

Formats, as their public definitions give them:

- NVFP4: E2M1 elements, one E4M3 scale per 16 elements, one FP32 scale per tensor;
- MXFP4 (OCP Microscaling v1.0): E2M1 elements, one E8M0 (power-of-two) scale per 32 elements,
  X = 2^(floor(log2 amax) - 2), elements saturated at +-6;
- INT4 g128: the course's W4A16 layout, integers -8..7, one bf16 scale per 128 elements;
- FP8 E4M3 per row: the course's FP8 GEMV layout, one FP32 scale per row;
- BF16: plain rounding, for scale.

Everything is float64 arithmetic in numpy on the CPU; no GPU is involved or needed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SEED = 20261203
SHAPE = (4096, 4096)
E2M1_MAX, E4M3_MAX = 6.0, 448.0
BITS = {  # bits per weight including scales, for a 4096 x 4096 matrix
    "BF16": 16.0,
    "FP8 E4M3, FP32 scale a row": 8.0 + 32 / 4096,
    "NVFP4 (E2M1, E4M3 per 16, FP32 per tensor)": 4.0 + 8 / 16 + 32 / (4096 * 4096),
    "MXFP4 (E2M1, E8M0 per 32)": 4.0 + 8 / 32,
    "INT4, bf16 scale per 128 (W4A16)": 4.0 + 16 / 128,
}


def _np() -> Any:
    import numpy as np

    return np


def round_float(v: Any, mbits: int, emin: int, vmax: float, xp: Any = None) -> Any:
    """Round to the nearest value of a float format (ties to even), saturating at +-vmax.

    `mbits` mantissa bits, `emin` the smallest normal exponent; below 2^emin the step is the
    subnormal one, 2^(emin - mbits). `xp` is the array module (numpy, the default, or cupy).
    """
    xp = xp or _np()
    a = xp.abs(v)
    e = xp.floor(xp.log2(xp.where(a > 0, a, 1.0)))
    e = xp.maximum(e, emin)
    step = xp.exp2(e - mbits)
    q = xp.round(a / step) * step
    return xp.sign(v) * xp.minimum(q, vmax)


def e2m1(v: Any, xp: Any = None) -> Any:
    return round_float(v, 1, 0, E2M1_MAX, xp)


def e4m3(v: Any, xp: Any = None) -> Any:
    return round_float(v, 3, -6, E4M3_MAX, xp)


def bf16(v: Any, xp: Any = None) -> Any:
    return round_float(v, 7, -126, 3.0e38, xp)


def _blocks(w: Any, size: int) -> Any:
    return w.reshape(w.shape[0], w.shape[1] // size, size)


# --- NVFP4 as stored: codes, scale bytes, tensor scale (shared with the FP4 GEMV, gemv/04) ------

E2M1_LEVELS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # magnitude of E2M1 codes 0..7
NVFP4_BLOCK = 16


def e2m1_values() -> Any:
    """float64 value of each of the 16 E2M1 codes: bit 3 the sign, bits 0-2 index E2M1_LEVELS."""
    np = _np()
    levels = np.array(E2M1_LEVELS)
    return np.concatenate([levels, -levels])


def e4m3_values() -> Any:
    """float64 value of every E4M3 byte (sign, 4 exponent bits of bias 7, 3 mantissa bits);
    0x7F and 0xFF are NaN, so the largest value is 448."""
    np = _np()
    codes = np.arange(256)
    exponent = (codes >> 3) & 0xF
    mantissa = (codes & 7).astype(np.float64)
    magnitude = np.where(
        exponent == 0,
        mantissa / 8.0 * 2.0**-6,
        (1.0 + mantissa / 8.0) * np.exp2(exponent.astype(np.float64) - 7.0),
    )
    values = np.where(codes & 0x80, -magnitude, magnitude)
    values[[0x7F, 0xFF]] = np.nan
    return values


def nvfp4_encode(w: Any, xp: Any = None) -> tuple[Any, Any, float]:
    """(N, K) weights, K a multiple of 16 -> what NVFP4 stores.

    Returns (codes, scale_codes, tensor_scale): E2M1 codes 0..15 (uint8, N x K), the E4M3 byte
    of each block of 16 along K (uint8, N x K/16) and the FP32 tensor scale
    t = amax / (6 x 448), rounded to float32. A block's scale is its amax / 6 / t rounded to
    E4M3; each weight's code is the E2M1 value nearest w / (scale x t). A block whose scale
    rounds to 0 stores codes 0.
    """
    xp = xp or _np()
    np = _np()
    t = float(np.float32(float(xp.abs(w).max()) / (E2M1_MAX * E4M3_MAX)))
    t = t if t > 0 else 1.0
    b = _blocks(w, NVFP4_BLOCK)
    s = e4m3(xp.abs(b).max(axis=2, keepdims=True) / E2M1_MAX / t, xp)
    q = e2m1(b / xp.where(s > 0, s * t, 1.0), xp) * (s > 0)
    levels = xp.asarray(np.array(E2M1_LEVELS, dtype=q.dtype))
    codes = xp.searchsorted(levels, xp.abs(q)).astype(xp.uint8) | ((q < 0).astype(xp.uint8) << 3)
    positive = xp.asarray(e4m3_values()[:0x7F].astype(s.dtype))  # codes 0..126, ascending
    scale_codes = xp.searchsorted(positive, s[..., 0]).astype(xp.uint8)
    return codes.reshape(w.shape), scale_codes, t


def nvfp4_decode(codes: Any, scale_codes: Any, tensor_scale: float, xp: Any = None) -> Any:
    """float64 weights from what `nvfp4_encode` stores (codes and scale bytes as any integers,
    or their float64 upcast)."""
    xp = xp or _np()
    e2 = xp.asarray(e2m1_values())[codes.astype(xp.int64)]
    s = xp.asarray(e4m3_values())[scale_codes.astype(xp.int64)]
    n, k = e2.shape
    return (e2.reshape(n, k // NVFP4_BLOCK, NVFP4_BLOCK) * s[:, :, None] * tensor_scale).reshape(
        n, k
    )


def pack_e2m1(codes: Any, xp: Any = None) -> Any:
    """(N, K) codes 0..15 -> (N, K/8) uint32 words, two codes a byte, the even one in the low
    nibble: word i holds values 8i..8i+7, value 8i + j in bits 4j..4j+3 (little-endian bytes)."""
    xp = xp or _np()
    c = codes.astype(xp.uint32).reshape(codes.shape[0], -1, 8)
    word = xp.zeros(c.shape[:-1], dtype=xp.uint32)
    for j in range(8):
        word |= c[..., j] << (4 * j)
    return word


def unpack_e2m1(words: Any, xp: Any = None) -> Any:
    """The inverse of `pack_e2m1`: (N, K/8) words -> (N, K) uint8 codes."""
    xp = xp or _np()
    w = words.astype(xp.uint32)
    out = xp.empty((*w.shape, 8), dtype=xp.uint8)
    for j in range(8):
        out[..., j] = (w >> (4 * j)) & 0xF
    return out.reshape(w.shape[0], -1)


def nvfp4(w: Any) -> Any:
    """NVFP4 quantise-dequantise: the values `nvfp4_encode` stores, decoded."""
    codes, scale_codes, t = nvfp4_encode(w)
    return nvfp4_decode(codes, scale_codes, t)


def mxfp4(w: Any) -> Any:
    import numpy as np

    b = _blocks(w, 32)
    amax = np.abs(b).max(axis=2, keepdims=True)
    s = np.exp2(np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 2)  # emax of E2M1 is 2
    return (e2m1(b / s) * s).reshape(w.shape)


def int4_g128(w: Any) -> Any:
    import numpy as np

    b = _blocks(w, 128)
    s = bf16(np.abs(b).max(axis=2, keepdims=True) / 7.0)
    s = np.where(s > 0, s, 1.0)
    return (np.clip(np.round(b / s), -8, 7) * s).reshape(w.shape)


def fp8_row(w: Any) -> Any:
    import numpy as np

    s = np.abs(w).max(axis=1, keepdims=True) / E4M3_MAX
    s = np.where(s > 0, s, 1.0)
    return e4m3(w / s) * s


FORMATS = {
    "BF16": bf16,
    "FP8 E4M3, FP32 scale a row": fp8_row,
    "NVFP4 (E2M1, E4M3 per 16, FP32 per tensor)": nvfp4,
    "MXFP4 (E2M1, E8M0 per 32)": mxfp4,
    "INT4, bf16 scale per 128 (W4A16)": int4_g128,
}


def matrices(seed: int = SEED, shape: tuple[int, int] = SHAPE) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return {
        "gaussian": rng.standard_normal(shape),
        "heavy-tailed (Student t, 3 dof)": rng.standard_t(3, size=shape),
    }


def errors(seed: int = SEED, shape: tuple[int, int] = SHAPE) -> list[dict[str, Any]]:
    """One row per (matrix, format): relative errors of W and of y = W x."""
    import numpy as np

    rng = np.random.default_rng(seed + 1)
    x = rng.standard_normal(shape[1])
    rows = []
    for mname, w in matrices(seed, shape).items():
        y = w @ x
        for fname, quantise in FORMATS.items():
            q = quantise(w)
            rows.append(
                {
                    "matrix": mname,
                    "format": fname,
                    "bits": BITS[fname],
                    "rel_err_w": float(np.linalg.norm(q - w) / np.linalg.norm(w)),
                    "rel_err_y": float(np.linalg.norm(q @ x - y) / np.linalg.norm(y)),
                }
            )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    width = max(len(r["format"]) for r in rows)
    out = []
    for mname in dict.fromkeys(r["matrix"] for r in rows):
        out.append(f"{mname} weights, {SHAPE[0]} x {SHAPE[1]}")
        out.append(f"  {'format':<{width}}  bits/weight  rel. err. of W  rel. err. of y = W x")
        for r in rows:
            if r["matrix"] == mname:
                out.append(
                    f"  {r['format']:<{width}}  {r['bits']:11.3f}  {r['rel_err_w']:14.2e}"
                    f"  {r['rel_err_y']:20.2e}"
                )
        out.append("")
    return "\n".join(out)


def write_quant_error(root: Path, out: Path | None = None) -> Path:
    import numpy as np

    folder = (
        (out / "microscaling")
        if out is not None
        else root / "kernels" / "microscaling" / "artifacts"
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "01_quant_error.txt"
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    head = [
        "microscaling/01_quant_error: quantisation error by format; written by "
        "`curriculum artifacts --quant-error`",
        f"numpy {np.__version__}, float64 on the CPU, seed {SEED}; {date}",
        "bits/weight counts the scales; rel. err. is ||Q(W) - W|| / ||W|| (Frobenius) and "
        "||Q(W) x - W x|| / ||W x||",
    ]
    path.write_text("".join(f"// {ln}\n" for ln in head) + table(errors()), encoding="utf-8")
    return path
