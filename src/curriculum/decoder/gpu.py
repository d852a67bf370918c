"""The GPU half of `python -m curriculum.decoder` (the package's docstring says what it does
and why).

Imported only where CuPy, PyTorch and a CUDA GPU are present. Our decoder is a list of
launches of the course's kernels (CuPy RawModule, compiled with the options their suites
declare, launched with their suites' plans); the PyTorch decoder reads the same weights
through zero-copy views. Each phase writes the data file again, so a run that is cut short
keeps what it measured; every failing piece is named in the file and in the log.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from curriculum import decoder as D
from curriculum.bench.api import Version
from curriculum.results import source_hash

LOG2E = 1.4426950408889634
ROPE_POSITIONS = 1 << 16  # rows of the RoPE table; positions are reset before each timing
PIECES = (
    "gemm",
    "gemv_b1",
    "gemv_b4",
    "gemv_b16",
    "flash",
    "split_kv_b1",
    "split_kv_b16",
    "rmsnorm",
    "swiglu",
    "glue",
)
TOLERANCE = 2e-2
TOLERANCE_REASON = (
    "bf16 keeps 8 significant bits (unit roundoff 2^-9 = 0.2%); each layer rounds its "
    "activations about ten times in either model, at different places (our GEMM writes "
    "fp32 and rounds once after the residual add, PyTorch rounds each matmul's output), "
    "so the two drift apart by a few roundoffs a layer; 2% over 8 layers leaves room for "
    "that and none for a wrong index, a missing head or a transposed weight, which move "
    "the error to order 1"
)


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


# --- loading the course's kernels ------------------------------------------------------------


def _suite(root: Path, topic: str) -> Any:
    """kernels/<topic>/suite.py as a module (the bench's name for it, imported once)."""
    name = f"curriculum_suite_{topic}"
    if name in sys.modules:
        return sys.modules[name]
    path = root / "kernels" / topic / "suite.py"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        sys.modules.pop(name, None)
        raise
    return module


@dataclass
class Kernels:
    """Compiled modules by kernel id, the suites' Python modules, and what failed."""

    modules: dict[str, Any]
    suites: dict[str, Any]
    versions: dict[str, Version]
    errors: dict[str, str]
    sms: int

    def fn(self, kid: str, entry: str) -> Any:
        from curriculum.bench import kit

        if kid not in self.modules:
            raise RuntimeError(f"{kid} is not loaded: {self.errors.get(kid, 'unknown')}")
        return kit.kernel(self.modules[kid], entry)


def load_kernels(
    root: Path, cp: Any, ids: tuple[str, ...] = (*D.COURSE_KERNELS, D.GLUE)
) -> Kernels:
    from curriculum.bench import kit

    modules: dict[str, Any] = {}
    suites: dict[str, Any] = {}
    versions: dict[str, Version] = {}
    errors: dict[str, str] = {}
    for kid in ids:
        try:
            if kid == D.GLUE:
                source = (root / D.GLUE_FILE).read_text(encoding="utf-8")
                options: tuple[str, ...] = ("--std=c++17", "-arch=sm_90")
            else:
                topic, stem = kid.split("/")
                suite = _suite(root, topic)
                suites[topic] = suite
                path = root / "kernels" / topic / f"{stem}.cu"
                source = path.read_text(encoding="utf-8")
                version = Version(
                    topic=topic, path=path, number=int(stem[:2]), name=stem[3:], source=source
                )
                versions[kid] = version
                bench = next(b for b in suite.SUITE.benchmarks if b.claims(version))
                options = tuple(bench.compile_options) + tuple(bench.version_options.get(stem, ()))
            module = cp.RawModule(code=source, options=options, backend="nvrtc")
            if getattr(module, "compile", None) is not None:
                module.compile()
            modules[kid] = module
        except Exception as exc:
            errors[kid] = f"{type(exc).__name__}: {exc}"
    sms = kit.device_limits(cp.cuda.Device().id)[0]
    return Kernels(modules, suites, versions, errors, sms)


# --- launches: the suites' plans, bound to buffers once --------------------------------------


@dataclass
class Launch:
    op: D.Op
    run: Callable[[], None]


def _grid_1d(items: int, sms: int, threads: int = 256) -> int:
    return max(1, min(-(-items // threads), sms * 8))


def gemm_launch(k: Kernels, a: Any, b: Any, c: Any, m: int, n: int, kk: int) -> Callable[[], None]:
    """12_wgmma_tma: C (fp32, m x n) = A (bf16, m x k) B (bf16, k x n), as gemm's `launch`."""
    gs = k.suites["gemm"]
    version = k.versions[D.GEMM]
    prepared = gs._prepare(k.modules[D.GEMM], version)
    geometry = prepared.geometry
    if not geometry.accepts({"m": m, "n": n, "k": kk}):
        raise ValueError(f"{D.GEMM} needs multiples of {geometry.multiple}, got {m, n, kk}")
    tmap_a, tmap_b = gs._wgmma_tensor_maps(a, b, m, n, kk)
    args = (tmap_a, tmap_b, c, np.int32(m), np.int32(n), np.int32(kk))
    grid, block, smem = geometry.grid(m, n), geometry.block, geometry.dynamic_smem
    kernel = prepared.kernel
    return lambda: kernel(grid, block, args, shared_mem=smem)


def gemv_launch(
    k: Kernels, x: Any, w: Any, y: Any, batch: int, kk: int, n: int
) -> Callable[[], None]:
    """01_bf16: y (batch x n) = x (batch x k) W^T, W n x k, as gemv's `_launch`."""
    gv = k.suites["gemv"]
    entry, blocks, threads = gv.plan(k.versions[D.GEMV], {"batch": batch, "k": kk, "n": n}, k.sms)
    fn = k.fn(D.GEMV, entry)
    args = (x, w, y, np.int32(kk), np.int32(n))
    return lambda: fn((blocks,), (threads,), args)


def rmsnorm_launch(
    k: Kernels, x: Any, gamma: Any, y: Any, rows: int, cols: int
) -> Callable[[], None]:
    from curriculum.bench import kit

    rn = k.suites["rmsnorm"]
    planned = rn.plan(k.versions[D.RMSNORM], {"rows": rows, "cols": cols})
    entry, block = planned[0], planned[1]
    fn = k.fn(D.RMSNORM, entry)
    # (entry, block) or (entry, block, grid or None): None is a persistent grid
    grid = planned[2] if len(planned) > 2 and planned[2] else kit.resident_grid(fn, block, rows)
    args = (x, gamma, y, np.int32(rows), np.int32(cols), np.float32(rn.EPS))
    return lambda: fn((grid,), (block,), args)


def swiglu_launch(
    k: Kernels, gate: Any, up: Any, out: Any, tokens: int, d: int
) -> Callable[[], None]:
    sw = k.suites["swiglu"]
    blocks = sw.blocks({"tokens": tokens, "d": d})
    fn = k.fn(D.SWIGLU, "fused")
    args = (gate, up, out)
    return lambda: fn((blocks,), (sw.BLOCK,), args)


def flash_launch(k: Kernels, q: Any, kk: Any, v: Any, o: Any, h: int, s: int) -> Callable[[], None]:
    at = k.suites["attention"]
    found = at.problems("02_flash_fwd", {"b": 1, "h": h, "s": s, "d": 128})
    if found:
        raise ValueError("; ".join(found))
    fn = at._kernel(k.modules[D.FLASH], "flash_fwd", at.FLASH_SMEM)
    args = (q, kk, v, o, np.int32(s), np.float32(LOG2E / math.sqrt(128)))
    grid = (s // at.FLASH_BM, h, 1)
    return lambda: fn(grid, (at.FLASH_THREADS,), args, shared_mem=at.FLASH_SMEM)


class SplitKV:
    """04_split_kv with its own partial-state buffers (one set a batch), as attention's
    `_launch_decode`."""

    def __init__(self, k: Kernels, cp: Any, b: int, hq: int, hkv: int, t: int) -> None:
        at = k.suites["attention"]
        found = at.problems("04_split_kv", {"b": b, "hq": hq, "hkv": hkv, "t": t, "d": 128})
        if found:
            raise ValueError("; ".join(found))
        self.plan = at.plan_splits(t, b * hkv, k.sms)
        states = b * hq * self.plan.splits
        self.parts = (
            cp.empty(states, cp.float32),
            cp.empty(states, cp.float32),
            cp.empty(states * 128, cp.float32),
        )
        self.fn = k.fn(D.SPLIT_KV, "split_kv")
        self.grid = (self.plan.splits, hkv, b)
        self.sizes = (
            np.int32(t),
            np.int32(self.plan.tokens_per_split),
            np.float32(LOG2E / math.sqrt(128)),
        )

    def launch(self, q: Any, kc: Any, vc: Any, out: Any) -> Callable[[], None]:
        args = (q, kc, vc, *self.parts, out, *self.sizes)
        fn, grid = self.fn, self.grid
        return lambda: fn(grid, (256,), args)


def glue_launch(
    k: Kernels, entry: str, grid: tuple[int, ...], block: int, args: tuple[Any, ...]
) -> Callable[[], None]:
    fn = k.fn(D.GLUE, entry)
    return lambda: fn(grid, (block,), args)


# --- the model's weights and state -----------------------------------------------------------


def rope_table(cfg: D.Config, positions: int = ROPE_POSITIONS) -> np.ndarray:
    """[positions, head_dim / 2, 2] float32 (cos, sin) of position * base^(-2i / head_dim),
    computed in float64 and rounded once: both models read this one table."""
    half = cfg.head_dim // 2
    inv = cfg.rope_base ** (-np.arange(half, dtype=np.float64) * 2.0 / cfg.head_dim)
    ang = np.arange(positions, dtype=np.float64)[:, None] * inv[None, :]
    return np.stack([np.cos(ang), np.sin(ang)], axis=-1).astype(np.float32)


class Weights:
    """Seeded random bf16 weights (uint16 bit patterns): each matrix in both layouts, n x k
    for the GEMV and k x n for the GEMM (the same values)."""

    def __init__(self, cp: Any, cfg: D.Config) -> None:
        from curriculum.bench import kit

        rng = cp.random.default_rng(D.SEED)

        def normal(shape: tuple[int, ...], scale: float, shift: float = 0.0) -> Any:
            x = rng.standard_normal(shape, dtype=cp.float32) * np.float32(scale)
            return kit.to_bf16_bits(x + np.float32(shift))

        h = cfg.hidden
        self.emb = normal((cfg.vocab, h), 1.0)
        self.layers: list[dict[str, Any]] = []
        for _ in range(cfg.layers):
            layer: dict[str, Any] = {"n1": normal((h,), 0.1, 1.0), "n2": normal((h,), 0.1, 1.0)}
            for name, (kin, nout) in cfg.matrices().items():
                if name == "lm_head":
                    continue
                w = normal((nout, kin), 1.0 / math.sqrt(kin))
                layer[name] = w
                layer[name + "_t"] = cp.ascontiguousarray(w.T)
            self.layers.append(layer)
        self.nf = normal((h,), 0.1, 1.0)
        self.lm = normal((cfg.vocab, h), 1.0 / math.sqrt(h))
        self.rope = cp.asarray(rope_table(cfg))


def _caches(cp: Any, cfg: D.Config, b: int) -> tuple[list[Any], list[Any]]:
    shape = (b, cfg.kv_heads, cfg.context, cfg.head_dim)
    return (
        [cp.zeros(shape, cp.uint16) for _ in range(cfg.layers)],
        [cp.zeros(shape, cp.uint16) for _ in range(cfg.layers)],
    )


class Ours:
    """The decoder as lists of launches: one for a prefill of `cfg.prompt` tokens (batch 1),
    one a decode batch; each list's ops are exactly `decoder.prefill_ops` / `decode_ops`."""

    def __init__(self, cp: Any, k: Kernels, cfg: D.Config, w: Weights) -> None:
        self.cp, self.k, self.cfg, self.w = cp, k, cfg, w
        self.caches = {b: _caches(cp, cfg, b) for b in cfg.batches if b != 1}
        self.caches[1] = _caches(cp, cfg, 1)
        self.state: dict[int, dict[str, Any]] = {}
        self.errors: dict[str, str] = {}

    def _bind(self, ops: list[D.Op], make: Callable[[D.Op], Callable[[], None]]) -> list[Launch]:
        out = []
        for op in ops:
            try:
                out.append(Launch(op, make(op)))
            except Exception as exc:  # keep going: every op that cannot be bound is named
                self.errors[op.name] = f"{type(exc).__name__}: {exc}"
        return out

    def prefill(self) -> list[Launch]:
        cp, k, cfg, w = self.cp, self.k, self.cfg, self.w
        s, h, hq, hkv = cfg.prompt, cfg.hidden, cfg.q_heads, cfg.kv_heads
        u16, f32 = cp.uint16, cp.float32
        st = {
            "ids": cp.zeros(s, cp.int32),
            "x": cp.zeros((s, h), u16),
            "xn": cp.zeros((s, h), u16),
            "qkv32": cp.zeros((s, cfg.qkv), f32),
            "q": cp.zeros((hq, s, 128), u16),
            "krep": cp.zeros((hq, s, 128), u16),
            "vrep": cp.zeros((hq, s, 128), u16),
            "o": cp.zeros((hq, s, 128), u16),
            "a": cp.zeros((s, cfg.attn), u16),
            "c32": cp.zeros((s, h), f32),
            "gu32": cp.zeros((2, s, cfg.mlp), f32),
            "gu": cp.zeros((2, s, cfg.mlp), u16),
            "act": cp.zeros((s, cfg.mlp), u16),
            "xl": cp.zeros((1, h), u16),
            "logits": cp.zeros((1, cfg.vocab), u16),
            "next": cp.zeros(1, cp.int32),
            "pos": cp.zeros(1, cp.int32),
        }
        self.state[0] = st
        kc, vc = self.caches[1]
        n8 = np.int64(s * h // 8)
        ew = _grid_1d(s * h // 8, k.sms)

        def make(op: D.Op) -> Callable[[], None]:
            part = op.name.split(".")[-1]
            layer = int(op.name[1:].split(".")[0]) if op.name.startswith("L") else -1
            lw = w.layers[layer] if layer >= 0 else {}
            if part == "embed":
                return glue_launch(k, "embed", (s,), 256, (st["ids"], w.emb, st["x"], np.int32(h)))
            if part in ("norm1", "norm2"):
                return rmsnorm_launch(k, st["x"], lw["n" + part[-1]], st["xn"], s, h)
            if part == "qkv":
                return gemm_launch(k, st["xn"], lw["qkv_t"], st["qkv32"], s, cfg.qkv, h)
            if part == "rope":
                return glue_launch(
                    k,
                    "rope_prefill",
                    (s, hq + 2 * hkv),
                    64,
                    (
                        st["qkv32"],
                        w.rope,
                        st["q"],
                        st["krep"],
                        st["vrep"],
                        kc[layer],
                        vc[layer],
                        np.int32(s),
                        np.int32(hq),
                        np.int32(hkv),
                        np.int32(cfg.context),
                        np.int32(0),
                    ),
                )
            if part == "attention":
                return flash_launch(k, st["q"], st["krep"], st["vrep"], st["o"], hq, s)
            if part == "heads_to_rows":
                return glue_launch(
                    k,
                    "heads_to_rows",
                    (_grid_1d(hq * s * 16, k.sms),),
                    256,
                    (st["o"], st["a"], np.int32(s), np.int32(hq)),
                )
            if part == "o":
                return gemm_launch(k, st["a"], lw["o_t"], st["c32"], s, h, cfg.attn)
            if part in ("add1", "add2"):
                return glue_launch(k, "add_f32", (ew,), 256, (st["x"], st["c32"], n8))
            if part in ("gate", "up"):
                out = st["gu32"][0 if part == "gate" else 1]
                return gemm_launch(k, st["xn"], lw[part + "_t"], out, s, cfg.mlp, h)
            if part == "round":
                n4 = 2 * s * cfg.mlp // 4
                return glue_launch(
                    k, "to_bf16", (_grid_1d(n4, k.sms),), 256, (st["gu32"], st["gu"], np.int64(n4))
                )
            if part == "swiglu":
                return swiglu_launch(k, st["gu"][0], st["gu"][1], st["act"], s, cfg.mlp)
            if part == "down":
                return gemm_launch(k, st["act"], lw["down_t"], st["c32"], s, h, cfg.mlp)
            if part == "final_norm":
                return rmsnorm_launch(k, st["x"][s - 1 :], w.nf, st["xl"], 1, h)
            if part == "lm_head":
                return gemv_launch(k, st["xl"], w.lm, st["logits"], 1, h, cfg.vocab)
            if part == "argmax":
                return glue_launch(
                    k,
                    "argmax_step",
                    (1,),
                    1024,
                    (st["logits"], st["next"], st["pos"], np.int32(cfg.vocab), np.int32(0)),
                )
            raise KeyError(f"no launch for {op.name}")

        return self._bind(D.prefill_ops(cfg), make)

    def decode(self, b: int) -> list[Launch]:
        cp, k, cfg, w = self.cp, self.k, self.cfg, self.w
        h, hq, hkv = cfg.hidden, cfg.q_heads, cfg.kv_heads
        u16 = cp.uint16
        st = {
            "ids": cp.zeros(b, cp.int32),
            "pos": cp.zeros(1, cp.int32),
            "x": cp.zeros((b, h), u16),
            "xn": cp.zeros((b, h), u16),
            "qkv": cp.zeros((b, cfg.qkv), u16),
            "q": cp.zeros((b, hq, 128), u16),
            "att": cp.zeros((b, hq, 128), u16),
            "y": cp.zeros((b, h), u16),
            "gu": cp.zeros((2, b, cfg.mlp), u16),
            "act": cp.zeros((b, cfg.mlp), u16),
            "logits": cp.zeros((b, cfg.vocab), u16),
        }
        self.state[b] = st
        kc, vc = self.caches[b]
        n8 = np.int64(b * h // 8)
        ew = _grid_1d(b * h // 8, k.sms)
        split = SplitKV(k, cp, b, hq, hkv, cfg.context)

        def make(op: D.Op) -> Callable[[], None]:
            part = op.name.split(".")[-1]
            layer = int(op.name[1:].split(".")[0]) if op.name.startswith("L") else -1
            lw = w.layers[layer] if layer >= 0 else {}
            if part == "embed":
                return glue_launch(k, "embed", (b,), 256, (st["ids"], w.emb, st["x"], np.int32(h)))
            if part in ("norm1", "norm2"):
                return rmsnorm_launch(k, st["x"], lw["n" + part[-1]], st["xn"], b, h)
            if part == "qkv":
                return gemv_launch(k, st["xn"], lw["qkv"], st["qkv"], b, h, cfg.qkv)
            if part == "rope":
                return glue_launch(
                    k,
                    "rope_decode",
                    (b, hq + 2 * hkv),
                    64,
                    (
                        st["qkv"],
                        w.rope,
                        st["pos"],
                        st["q"],
                        kc[layer],
                        vc[layer],
                        np.int32(hq),
                        np.int32(hkv),
                        np.int32(cfg.context),
                    ),
                )
            if part == "attention":
                return split.launch(st["q"], kc[layer], vc[layer], st["att"])
            if part == "o":
                return gemv_launch(k, st["att"], lw["o"], st["y"], b, cfg.attn, h)
            if part in ("add1", "add2"):
                return glue_launch(k, "add_bf16", (ew,), 256, (st["x"], st["y"], n8))
            if part in ("gate", "up"):
                out = st["gu"][0 if part == "gate" else 1]
                return gemv_launch(k, st["xn"], lw[part], out, b, h, cfg.mlp)
            if part == "swiglu":
                return swiglu_launch(k, st["gu"][0], st["gu"][1], st["act"], b, cfg.mlp)
            if part == "down":
                return gemv_launch(k, st["act"], lw["down"], st["y"], b, cfg.mlp, h)
            if part == "final_norm":
                return rmsnorm_launch(k, st["x"], w.nf, st["xn"], b, h)
            if part == "lm_head":
                return gemv_launch(k, st["xn"], w.lm, st["logits"], b, h, cfg.vocab)
            if part == "argmax":
                return glue_launch(
                    k,
                    "argmax_step",
                    (b,),
                    1024,
                    (st["logits"], st["ids"], st["pos"], np.int32(cfg.vocab), np.int32(1)),
                )
            raise KeyError(f"no launch for {op.name}")

        return self._bind(D.decode_ops(cfg, b), make)


def run_all(launches: list[Launch]) -> None:
    for launch in launches:
        launch.run()


# --- the same model in PyTorch ---------------------------------------------------------------


class TorchDecoder:
    """The same decoder in plain PyTorch ops over zero-copy views of the same weights."""

    def __init__(self, torch: Any, cfg: D.Config, w: Weights) -> None:
        from curriculum.bench import kit

        self.torch, self.cfg = torch, cfg
        tv = kit.torch_view
        self.emb, self.nf, self.lm = tv(w.emb), tv(w.nf), tv(w.lm)
        self.layers = [
            {n: tv(a) for n, a in layer.items() if not n.endswith("_t")} for layer in w.layers
        ]
        self.rope = torch.as_tensor(w.rope, device="cuda")  # [P, 64, 2] fp32

    def rmsnorm(self, x: Any, g: Any, dtype: Any = None) -> Any:
        xf = x.float() if dtype is None else x.to(dtype)
        gf = g.float() if dtype is None else g.to(dtype)
        y = xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.cfg.eps) * gf
        return y.to(x.dtype)

    def rotate(self, x: Any, cs: Any) -> Any:
        xf = x.to(cs.dtype)
        half = x.shape[-1] // 2
        x1, x2 = xf[..., :half], xf[..., half:]
        c, s = cs[..., 0], cs[..., 1]
        return self.torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1).to(x.dtype)

    def prefill(
        self,
        ids: Any,
        kcs: list[Any],
        vcs: list[Any],
        layers: int | None = None,
        dtype: Any = None,
        taps: dict[str, Any] | None = None,
    ) -> tuple[Any, Any]:
        """Hidden states after the last layer run, and the last token's logits. `dtype`
        (float64) runs the whole model in that type from the same bf16 weights."""
        torch, cfg = self.torch, self.cfg
        F = torch.nn.functional
        s, hq, hkv, d = ids.shape[0], cfg.q_heads, cfg.kv_heads, cfg.head_dim

        def wt(t: Any) -> Any:
            return t if dtype is None else t.to(dtype)

        x = wt(self.emb[ids])
        cs = self.rope[:s, None]
        if dtype is not None:
            cs = cs.to(dtype)
        for i, lw in enumerate(self.layers[: layers or cfg.layers]):
            hn = self.rmsnorm(x, lw["n1"], dtype)
            qkv = F.linear(hn, wt(lw["qkv"]))
            q, k, v = qkv.split([hq * d, hkv * d, hkv * d], dim=-1)
            q = self.rotate(q.view(s, hq, d), cs).transpose(0, 1)
            k = self.rotate(k.view(s, hkv, d), cs).transpose(0, 1)
            v = v.view(s, hkv, d).transpose(0, 1)
            if dtype is None:
                kcs[i][0, :, :s] = k
                vcs[i][0, :, :s] = v
            a = F.scaled_dot_product_attention(q[None], k[None], v[None], enable_gqa=True)[0]
            x = x + F.linear(a.transpose(0, 1).reshape(s, hq * d), wt(lw["o"]))
            hn = self.rmsnorm(x, lw["n2"], dtype)
            gate, up = F.linear(hn, wt(lw["gate"])), F.linear(hn, wt(lw["up"]))
            act = F.silu(gate) * up
            if taps is not None and i == 0:
                taps.update(q=q, k=k, v=v, attn=a, act=act)
            x = x + F.linear(act, wt(lw["down"]))
        logits = F.linear(self.rmsnorm(x[-1:], self.nf, dtype), wt(self.lm))
        return x, logits

    def decode(self, ids: Any, pos: Any, kcs: list[Any], vcs: list[Any]) -> Any:
        """One step of `ids.shape[0]` sequences at position `pos` (a 1-element tensor):
        writes K and V into slot pos % T, attends over all T slots, picks the next ids and
        moves pos on, in place. Returns the logits."""
        torch, cfg = self.torch, self.cfg
        F = torch.nn.functional
        b, hq, hkv, d = ids.shape[0], cfg.q_heads, cfg.kv_heads, cfg.head_dim
        x = self.emb[ids]
        cs = self.rope.index_select(0, pos).view(1, 1, d // 2, 2)
        slot = torch.remainder(pos, cfg.context)
        for i, lw in enumerate(self.layers):
            hn = self.rmsnorm(x, lw["n1"])
            q, k, v = F.linear(hn, lw["qkv"]).split([hq * d, hkv * d, hkv * d], dim=-1)
            q = self.rotate(q.view(b, hq, d), cs)
            k = self.rotate(k.view(b, hkv, d), cs)
            kcs[i].index_copy_(2, slot, k.view(b, hkv, 1, d))
            vcs[i].index_copy_(2, slot, v.view(b, hkv, 1, d))
            # grouped heads without copying the cache: a KV head's query group as a length
            a = F.scaled_dot_product_attention(q.view(b, hkv, hq // hkv, d), kcs[i], vcs[i])
            x = x + F.linear(a.reshape(b, hq * d), lw["o"])
            hn = self.rmsnorm(x, lw["n2"])
            x = x + F.linear(F.silu(F.linear(hn, lw["gate"])) * F.linear(hn, lw["up"]), lw["down"])
        logits = F.linear(self.rmsnorm(x, self.nf), self.lm)
        ids.copy_(logits.argmax(dim=-1))
        pos.add_(1)
        return logits


# --- measuring helpers -------------------------------------------------------------------------


class CupyTimer:
    """bench.timing's Timer with CuPy events on one stream; nothing is flushed (decode steps
    and prefills run back to back, and the weights are many times the L2)."""

    def __init__(self, cp: Any, stream: Any) -> None:
        self.cp, self.stream = cp, stream
        self.a, self.b = cp.cuda.Event(), cp.cuda.Event()

    def flush_l2(self) -> None:
        return None

    def elapsed_ms(self, fn: Callable[[], None], flush: bool = True) -> float:
        self.a.record(self.stream)
        fn()
        self.b.record(self.stream)
        self.b.synchronize()
        return float(self.cp.cuda.get_elapsed_time(self.a, self.b))


class TorchTimer:
    def __init__(self, torch: Any) -> None:
        self.a = torch.cuda.Event(enable_timing=True)
        self.b = torch.cuda.Event(enable_timing=True)

    def flush_l2(self) -> None:
        return None

    def elapsed_ms(self, fn: Callable[[], None], flush: bool = True) -> float:
        self.a.record()
        fn()
        self.b.record()
        self.b.synchronize()
        return float(self.a.elapsed_time(self.b))


def _inductor_counters(torch: Any) -> dict[str, Any]:
    """Inductor's counters so far (cudagraph_skips says whether reduce-overhead replayed)."""
    try:
        from torch._dynamo.utils import counters

        return {k: int(v) for k, v in counters["inductor"].items()}
    except Exception as exc:
        return {"error": repr(exc)}


def _stat(stat: Any) -> dict[str, Any]:
    return {
        "median_us": round(stat.median_ms * 1e3, 3),
        "p20_us": round(stat.p20_ms * 1e3, 3),
        "p80_us": round(stat.p80_ms * 1e3, 3),
        "samples": stat.samples,
    }


def rel_err(cp: Any, got: Any, want: Any) -> float:
    g, w = cp.asarray(got, dtype=cp.float64), cp.asarray(want, dtype=cp.float64)
    den = float(cp.linalg.norm(w))
    return float(cp.linalg.norm(g - w)) / den if den > 0 else float(cp.linalg.norm(g))


def bf16_f64(cp: Any, bits: Any) -> Any:
    from curriculum.bench import kit

    return kit.bf16_bits_to_float64(bits)


def _t2c(cp: Any, t: Any) -> Any:
    """A torch CUDA tensor as a CuPy float64 array (a copy)."""
    return cp.asarray(t.detach().double().contiguous())


def _git_rev(root: Path) -> str:
    env = os.environ.get("CURRICULUM_GIT_REV")
    if env:
        return env
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _driver() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


# --- pieces: each kernel alone, at the decoder's sizes, in a child process --------------------


def run_piece(root: Path, cfg: D.Config, piece: str) -> int:
    """Check one piece against a float64 reference; print one JSON line; exit 0 or 1."""
    import cupy as cp

    out: dict[str, Any] = {"piece": piece}
    try:
        out.update(_check_piece(root, cp, cfg, piece))
    except Exception as exc:
        out.update(
            passed=False,
            error=f"{type(exc).__name__}: {exc}",
            where=traceback.format_exc(limit=3).splitlines()[-3:],
        )
    _say("PIECE " + json.dumps(out))
    return 0 if out.get("passed") else 1


def _check_piece(root: Path, cp: Any, cfg: D.Config, piece: str) -> dict[str, Any]:
    from curriculum.bench import kit

    kid = {
        "gemm": D.GEMM,
        "flash": D.FLASH,
        "rmsnorm": D.RMSNORM,
        "swiglu": D.SWIGLU,
        "glue": D.GLUE,
    }.get(piece) or (D.GEMV if piece.startswith("gemv") else D.SPLIT_KV)
    k = load_kernels(root, cp, (kid,))
    if k.errors:
        return {"passed": False, "error": "; ".join(f"{a}: {b}" for a, b in k.errors.items())}
    rng = cp.random.default_rng(7)
    h = cfg.hidden

    def bf(shape: tuple[int, ...], scale: float = 1.0) -> Any:
        return kit.to_bf16_bits(rng.standard_normal(shape, dtype=cp.float32) * np.float32(scale))

    def f64(bits: Any) -> Any:
        return bf16_f64(cp, bits)

    def done(err: float, tol: float, **extra: Any) -> dict[str, Any]:
        return {"passed": bool(err <= tol), "rel_err": err, "tolerance": tol, **extra}

    if piece == "gemm":
        m, n = cfg.prompt, cfg.qkv
        a, b = bf((m, h)), bf((h, n))
        c = cp.full((m, n), np.nan, cp.float32)
        gemm_launch(k, a, b, c, m, n, h)()
        cp.cuda.runtime.deviceSynchronize()
        return done(rel_err(cp, c, f64(a) @ f64(b)), 1e-3)
    if piece.startswith("gemv"):
        batch = int(piece.split("_b")[1])
        x, w = bf((batch, h)), bf((cfg.mlp, h))
        y = cp.full((batch, cfg.mlp), 0xFFFF, cp.uint16)
        gemv_launch(k, x, w, y, batch, h, cfg.mlp)()
        cp.cuda.runtime.deviceSynchronize()
        return done(rel_err(cp, f64(y), f64(x) @ f64(w).T), 1e-2)
    if piece == "rmsnorm":
        x, g = bf((cfg.prompt, h)), bf((h,), 0.1)
        y = cp.full((cfg.prompt, h), 0xFFFF, cp.uint16)
        rmsnorm_launch(k, x, g, y, cfg.prompt, h)()
        cp.cuda.runtime.deviceSynchronize()
        xf = f64(x)
        want = xf / cp.sqrt((xf * xf).mean(axis=1, keepdims=True) + cfg.eps) * f64(g)
        return done(rel_err(cp, f64(y), want), 1e-2)
    if piece == "swiglu":
        g, u = bf((cfg.prompt, cfg.mlp)), bf((cfg.prompt, cfg.mlp))
        o = cp.full((cfg.prompt, cfg.mlp), 0xFFFF, cp.uint16)
        swiglu_launch(k, g, u, o, cfg.prompt, cfg.mlp)()
        cp.cuda.runtime.deviceSynchronize()
        gf = f64(g)
        return done(rel_err(cp, f64(o), gf / (1 + cp.exp(-gf)) * f64(u)), 1e-2)
    if piece == "flash":
        hq, s = cfg.q_heads, cfg.prompt
        q, kk, v = bf((hq, s, 128)), bf((hq, s, 128)), bf((hq, s, 128))
        o = cp.full((hq, s, 128), 0xFFFF, cp.uint16)
        flash_launch(k, q, kk, v, o, hq, s)()
        cp.cuda.runtime.deviceSynchronize()
        rows = slice(0, 256)  # 256 query rows of every head against all keys
        sc = cp.einsum("hsd,htd->hst", f64(q)[:, rows], f64(kk)) / math.sqrt(128)
        p = cp.exp(sc - sc.max(axis=-1, keepdims=True))
        want = cp.einsum("hst,htd->hsd", p / p.sum(axis=-1, keepdims=True), f64(v))
        return done(rel_err(cp, f64(o)[:, rows], want), 1e-2)
    if piece.startswith("split_kv"):
        b = int(piece.split("_b")[1])
        hq, hkv, t = cfg.q_heads, cfg.kv_heads, cfg.context
        q, kc, vc = bf((b, hq, 128)), bf((b, hkv, t, 128)), bf((b, hkv, t, 128))
        o = cp.full((b, hq, 128), 0xFFFF, cp.uint16)
        SplitKV(k, cp, b, hq, hkv, t).launch(q, kc, vc, o)()
        cp.cuda.runtime.deviceSynchronize()
        qf = f64(q).reshape(b, hkv, hq // hkv, 128)
        sc = cp.einsum("bhgd,bhtd->bhgt", qf, f64(kc)) / math.sqrt(128)
        p = cp.exp(sc - sc.max(axis=-1, keepdims=True))
        want = cp.einsum("bhgt,bhtd->bhgd", p / p.sum(axis=-1, keepdims=True), f64(vc))
        return done(rel_err(cp, f64(o), want.reshape(b, hq, 128)), 1e-2)
    if piece == "glue":
        return _check_glue(cp, k, cfg, bf, f64)
    raise KeyError(f"no piece {piece!r}; pieces: {', '.join(PIECES)}")


def _check_glue(
    cp: Any, k: Kernels, cfg: D.Config, bf: Callable[..., Any], f64: Callable[[Any], Any]
) -> dict[str, Any]:
    """Every glue entry against a CuPy float64 formula; the worst error and each entry's."""
    from curriculum.bench import kit

    h, hq, hkv, t = cfg.hidden, cfg.q_heads, cfg.kv_heads, cfg.context
    s, b = 256, 4
    errs: dict[str, Any] = {}
    table = cp.asarray(rope_table(cfg, 4096)).astype(cp.float64)

    def run(name: str, fn: Callable[[], Any]) -> None:
        try:
            errs[name] = fn()
            cp.cuda.runtime.deviceSynchronize()
        except Exception as exc:
            errs[name] = f"{type(exc).__name__}: {exc}"

    def rot(x: Any, pos: Any) -> Any:  # x [..., 128] float64, pos broadcastable to x[..., 0]
        cs = table[pos]
        c, sn = cs[..., 0], cs[..., 1]
        x1, x2 = x[..., :64], x[..., 64:]
        return cp.concatenate([x1 * c - x2 * sn, x2 * c + x1 * sn], axis=-1)

    def embed() -> float:
        emb = bf((1000, h))
        ids = cp.asarray([3, 999, 0, 512], dtype=cp.int32)
        x = cp.full((4, h), 0xFFFF, cp.uint16)
        glue_launch(k, "embed", (4,), 256, (ids, emb, x, np.int32(h)))()
        return float(cp.abs(f64(x) - f64(emb[ids])).max())

    def rope_prefill() -> float:
        qkv = rng_f32((s, cfg.qkv))
        q = cp.zeros((hq, s, 128), cp.uint16)
        kr, vr = cp.zeros_like(q), cp.zeros_like(q)
        kc, vc = cp.zeros((hkv, t, 128), cp.uint16), cp.zeros((hkv, t, 128), cp.uint16)
        pos0 = 100
        glue_launch(
            k,
            "rope_prefill",
            (s, hq + 2 * hkv),
            64,
            (
                qkv,
                cp.asarray(rope_table(cfg, 4096)),
                q,
                kr,
                vr,
                kc,
                vc,
                np.int32(s),
                np.int32(hq),
                np.int32(hkv),
                np.int32(t),
                np.int32(pos0),
            ),
        )()
        x = qkv.astype(cp.float64).reshape(s, hq + 2 * hkv, 128)
        pos = cp.arange(pos0, pos0 + s)[:, None]
        wq = rot(x[:, :hq], pos).transpose(1, 0, 2)
        wk = rot(x[:, hq : hq + hkv], pos).transpose(1, 0, 2)
        wv = x[:, hq + hkv :].transpose(1, 0, 2)
        g = hq // hkv
        slots = (pos0 + cp.arange(s)) % t
        return max(
            rel_err(cp, f64(q), wq),
            rel_err(cp, f64(kr), cp.repeat(wk, g, axis=0)),
            rel_err(cp, f64(vr), cp.repeat(wv, g, axis=0)),
            rel_err(cp, f64(kc[:, slots]), wk),
            rel_err(cp, f64(vc[:, slots]), wv),
        )

    def rope_decode() -> float:
        qkv = bf((b, cfg.qkv))
        q = cp.zeros((b, hq, 128), cp.uint16)
        kc, vc = cp.zeros((b, hkv, t, 128), cp.uint16), cp.zeros((b, hkv, t, 128), cp.uint16)
        pos = cp.asarray([t + 5], dtype=cp.int32)
        glue_launch(
            k,
            "rope_decode",
            (b, hq + 2 * hkv),
            64,
            (
                qkv,
                cp.asarray(rope_table(cfg, 4096)),
                pos,
                q,
                kc,
                vc,
                np.int32(hq),
                np.int32(hkv),
                np.int32(t),
            ),
        )()
        x = f64(qkv).reshape(b, hq + 2 * hkv, 128)
        p = t + 5
        return max(
            rel_err(cp, f64(q), rot(x[:, :hq], p)),
            rel_err(cp, f64(kc[:, :, 5]), rot(x[:, hq : hq + hkv], p)),
            rel_err(cp, f64(vc[:, :, 5]), x[:, hq + hkv :]),
        )

    def heads_to_rows() -> float:
        o = bf((hq, s, 128))
        a = cp.full((s, hq * 128), 0xFFFF, cp.uint16)
        glue_launch(
            k,
            "heads_to_rows",
            (_grid_1d(hq * s * 16, k.sms),),
            256,
            (o, a, np.int32(s), np.int32(hq)),
        )()
        return float(cp.abs(f64(a) - f64(o).transpose(1, 0, 2).reshape(s, hq * 128)).max())

    def add_f32() -> float:
        x, c = bf((s, h)), rng_f32((s, h))
        want = f64(x) + c.astype(cp.float64)
        glue_launch(
            k, "add_f32", (_grid_1d(s * h // 8, k.sms),), 256, (x, c, np.int64(s * h // 8))
        )()
        return rel_err(cp, f64(x), want)

    def add_bf16() -> float:
        x, y = bf((b, h)), bf((b, h))
        want = f64(x) + f64(y)
        glue_launch(
            k, "add_bf16", (_grid_1d(b * h // 8, k.sms),), 256, (x, y, np.int64(b * h // 8))
        )()
        return rel_err(cp, f64(x), want)

    def to_bf16() -> float:
        c = rng_f32((s, h))
        o = cp.full((s, h), 0xFFFF, cp.uint16)
        glue_launch(
            k, "to_bf16", (_grid_1d(s * h // 4, k.sms),), 256, (c, o, np.int64(s * h // 4))
        )()
        return float(cp.abs(o.astype(cp.int32) - kit.to_bf16_bits(c).astype(cp.int32)).max())

    def argmax() -> float:
        logits = bf((b, cfg.vocab))
        ids, pos = cp.full(b, -1, cp.int32), cp.zeros(1, cp.int32)
        glue_launch(
            k, "argmax_step", (b,), 1024, (logits, ids, pos, np.int32(cfg.vocab), np.int32(1))
        )()
        want = cp.argmax(f64(logits), axis=1)
        return float((ids != want).sum()) + abs(int(pos[0]) - 1)

    grng = cp.random.default_rng(11)

    def rng_f32(shape: tuple[int, ...]) -> Any:
        return grng.standard_normal(shape, dtype=cp.float32)

    for name, fn in (
        ("embed", embed),
        ("rope_prefill", rope_prefill),
        ("rope_decode", rope_decode),
        ("heads_to_rows", heads_to_rows),
        ("add_f32", add_f32),
        ("add_bf16", add_bf16),
        ("to_bf16", to_bf16),
        ("argmax_step", argmax),
    ):
        run(name, fn)
    # exact moves (embed, heads_to_rows, to_bf16 in ulps, argmax in mismatches) must be 0;
    # arithmetic ones within bf16 rounding
    limits = {"embed": 0.0, "heads_to_rows": 0.0, "to_bf16": 0.0, "argmax_step": 0.0}
    bad = [n for n, e in errs.items() if isinstance(e, str) or e > limits.get(n, 1e-2)]
    worst = max((e for e in errs.values() if not isinstance(e, str)), default=0.0)
    return {"passed": not bad, "rel_err": worst, "entries": errs, "failed": bad}


def check_pieces(root: Path, cfg: D.Config, log: Callable[[str], None]) -> dict[str, Any]:
    """Every piece in its own child process, all at once: a piece that faults (and so
    poisons its CUDA context) leaves the others' verdicts intact."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root / "src"), env.get("PYTHONPATH")) if p)

    def one(piece: str) -> dict[str, Any]:
        cmd = [sys.executable, "-m", "curriculum.decoder", "--root", str(root), "--piece", piece]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
        except subprocess.TimeoutExpired:
            return {"piece": piece, "passed": False, "error": "timed out after 240 s"}
        for line in done.stdout.splitlines():
            if line.startswith("PIECE "):
                return json.loads(line[len("PIECE ") :])
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"piece": piece, "passed": False, "error": f"exit {done.returncode}: {tail}"}

    with ThreadPoolExecutor(max_workers=len(PIECES)) as pool:
        results = list(pool.map(one, PIECES))
    out = {}
    for r in results:
        out[r.pop("piece")] = r
    for piece, r in out.items():
        verdict = "ok" if r.get("passed") else "FAILED"
        err = r.get("rel_err")
        log(
            f"  piece {piece:13s} {verdict:6s} rel_err {err if err is None else f'{err:.2e}'}"
            + (f"  {r.get('error') or r.get('failed')}" if not r.get("passed") else "")
        )
    return out


# --- the run -------------------------------------------------------------------------------


class Run:
    def __init__(self, args: argparse.Namespace, cfg: D.Config) -> None:
        import cupy as cp
        import torch

        self.cp, self.torch, self.args, self.cfg = cp, torch, args, cfg
        self.root = args.root.resolve()
        self.out = args.out or self.root / "kernels" / D.TOPIC
        self.started = time.perf_counter()
        self.failures: dict[str, str] = {}
        self.data: dict[str, Any] = {
            "format": D.FORMAT,
            "provenance": {},
            "config": D.config_dict(cfg),
            "work": D.work_model(cfg),
            "checks": {},
            "pieces": {},
            "timing": {"prefill": {}, "decode": {}},
            "breakdown": {},
            "failures": {},
            "tolerance_reason": TOLERANCE_REASON,
            "timing_method": (
                "CUDA events around one step (ours eager: the Python loop of "
                "launches; graph: one replay) after warm-up, the median of "
                "repetitions until it settles (bench.timing); L2 not flushed"
            ),
            "model_notes": (
                "prefix LM: the prompt attends to all of itself (the flash kernel "
                "has no causal mask); decode steps write K and V into slot "
                "position % context of a rolling cache and attend over all of it"
            ),
        }

    def fail(self, name: str, exc: BaseException | str) -> None:
        msg = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        self.failures[name] = msg
        _say(f"FAILED {name}: {msg}")

    def provenance(self) -> dict[str, Any]:
        cp, torch = self.cp, self.torch
        props = torch.cuda.get_device_properties(0)
        sources = {
            kid: source_hash(self.root / "kernels" / f"{kid}.cu") for kid in D.COURSE_KERNELS
        }
        sources[D.GLUE] = source_hash(self.root / D.GLUE_FILE)
        for mod in ("__init__", "__main__", "gpu"):
            sources[f"src/curriculum/decoder/{mod}.py"] = source_hash(
                self.root / "src" / "curriculum" / "decoder" / f"{mod}.py"
            )
        return {
            "gpu_name": torch.cuda.get_device_name(0),
            "sm_count": props.multi_processor_count,
            "driver": _driver(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cupy": cp.__version__,
            "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "git_rev": _git_rev(self.root),
            "seconds": round(time.perf_counter() - self.started, 1),
            "sources": sources,
        }

    def save(self) -> None:
        try:
            self.data["provenance"] = self.provenance()
        except Exception as exc:  # a lost CUDA context must not lose what was measured
            self.data["provenance"]["error"] = f"{type(exc).__name__}: {exc}"
        self.data["failures"] = dict(self.failures)
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / (D.DATA_FILE + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(self.out / D.DATA_FILE)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def policy(self) -> Any:
        from curriculum.bench.timing import TimingPolicy

        return TimingPolicy(
            warmup_ms=50.0,
            warmup_launches=3,
            min_samples=30,
            batch=10,
            rel_tol=0.005,
            max_samples=400,
            time_cap_s=self.args.time_cap,
        )

    # -- phases --

    def main(self) -> int:
        cp, cfg = self.cp, self.cfg
        _say(f"decoder: {cfg}")
        _say("pieces, each in its own process:")
        self.data["pieces"] = check_pieces(self.root, cfg, _say)
        for piece, r in self.data["pieces"].items():
            if not r.get("passed"):
                self.fail(f"piece {piece}", str(r.get("error") or r.get("failed") or r))
        try:
            if not self.setup():
                self.save()
                return 1
        except Exception as exc:
            self.fail("setup", exc)
            _say(traceback.format_exc(limit=6))
            self.save()
            return 1
        for phase in (
            self.check_layer0,
            self.check_prefill,
            self.check_decode,
            self.time_ours,
            self.time_torch,
            self.profile,
            self.time_compiled,
        ):
            try:
                phase()
            except Exception as exc:
                self.fail(phase.__name__, exc)
                _say(traceback.format_exc(limit=6))
                try:
                    cp.cuda.runtime.deviceSynchronize()
                except Exception as sticky:  # the context is gone: keep what was measured
                    self.fail("cuda context", sticky)
                    break
            self.save()
        self.save()
        _say(
            f"wrote {self.out / D.DATA_FILE} in {self.elapsed():.1f} s; "
            f"{len(self.failures)} failures"
            + (": " + ", ".join(self.failures) if self.failures else "")
        )
        return 1 if self.failures else 0

    def setup(self) -> bool:
        """Compile, make the weights, bind every launch; False (failures named) if not."""
        cp, cfg = self.cp, self.cfg
        self.k = load_kernels(self.root, cp)
        for kid, msg in self.k.errors.items():
            self.fail(f"compile {kid}", msg)
        if self.k.errors:
            return False
        self.w = Weights(cp, cfg)
        self.ours = Ours(cp, self.k, cfg, self.w)
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.pre = self.ours.prefill()
        self.dec = {b: self.ours.decode(b) for b in cfg.batches}
        for name, msg in self.ours.errors.items():
            self.fail(f"bind {name}", msg)
        if self.ours.errors:
            return False
        self.tm = TorchDecoder(self.torch, cfg, self.w)
        self.tcaches = {
            b: tuple(
                [self.torch.zeros(c.shape, dtype=self.torch.bfloat16, device="cuda") for c in cs]
                for cs in self.ours.caches[b]
            )
            for b in cfg.batches
        }
        self.data["copy_gbps"] = self.copy_bandwidth()
        _say(f"copy bandwidth {self.data['copy_gbps']:.0f} GB/s (read + write)")
        return True

    def copy_bandwidth(self) -> float:
        from curriculum.bench.timing import time_call

        cp = self.cp
        n = 1 << 30
        a, b = cp.ones(n, cp.uint8), cp.empty(n, cp.uint8)
        with self.stream:
            stat = time_call(
                lambda: cp.copyto(b, a), CupyTimer(cp, self.stream), self.policy(), flush_l2=False
            )
        return 2 * n / (stat.median_ms * 1e-3) / 1e9

    def ids_prompt(self) -> Any:
        rng = self.cp.random.default_rng(D.SEED + 1)
        return rng.integers(0, self.cfg.vocab, self.cfg.prompt).astype(self.cp.int32)

    def settle(self) -> None:
        """Wait for everything: state written by CuPy on the default stream or by PyTorch is
        not ordered with our non-blocking stream otherwise."""
        self.cp.cuda.runtime.deviceSynchronize()

    def run_ours(self, launches: list[Launch]) -> None:
        with self.stream:
            run_all(launches)

    def check_layer0(self) -> None:
        """Layer 0 of the prefill, op by op, against PyTorch bf16 and float64."""
        cp, torch = self.cp, self.torch
        st = self.ours.state[0]
        ids = self.ids_prompt()
        st["ids"][...] = ids
        tids = torch.as_tensor(ids, device="cuda").long()
        layer0 = [ln for ln in self.pre if ln.op.name == "embed" or ln.op.name.startswith("L0.")]
        taps: dict[str, Any] = {}
        kc, vc = self.tcaches[1]
        x_t, _ = self.tm.prefill(tids, kc, vc, layers=1, taps=taps)
        taps64: dict[str, Any] = {}
        x_64, _ = self.tm.prefill(tids, kc, vc, layers=1, dtype=torch.float64, taps=taps64)
        steps: dict[str, Any] = {}
        self.settle()
        for ln in layer0:  # one at a time, so a fault names its op
            try:
                with self.stream:
                    ln.run()
                self.stream.synchronize()
            except Exception as exc:
                self.fail(f"launch {ln.op.name}", exc)
                raise
            got = {
                "L0.rope": lambda: bf16_f64(cp, st["q"]),
                "L0.attention": lambda: bf16_f64(cp, st["o"]),
                "L0.swiglu": lambda: bf16_f64(cp, st["act"]),
            }.get(ln.op.name)
            want = {"L0.rope": "q", "L0.attention": "attn", "L0.swiglu": "act"}.get(ln.op.name)
            if got is not None and want is not None:
                steps[ln.op.name] = {
                    "vs_torch": rel_err(cp, got(), _t2c(cp, taps[want])),
                    "vs_float64": rel_err(cp, got(), _t2c(cp, taps64[want])),
                }
        ours = bf16_f64(cp, st["x"])
        e_ours, e_torch = (
            rel_err(cp, ours, _t2c(cp, x_64)),
            rel_err(cp, _t2c(cp, x_t), _t2c(cp, x_64)),
        )
        self.data["checks"]["layer0_float64"] = {
            "what": "hidden state after layer 0 of the prefill, ours against float64 (the same "
            "bf16 weights and inputs, every operation in float64)",
            "rel_err": e_ours,
            "torch_rel_err": e_torch,
            "tolerance": 1e-2,
            "passed": bool(e_ours <= 1e-2),
            "ops": steps,
        }
        self.data["checks"]["layer0_torch"] = {
            "what": "hidden state after layer 0 of the prefill, ours against PyTorch bf16",
            "rel_err": rel_err(cp, ours, _t2c(cp, x_t)),
            "tolerance": 1e-2,
            "passed": bool(rel_err(cp, ours, _t2c(cp, x_t)) <= 1e-2),
        }
        _say(
            f"layer 0: ours vs float64 {e_ours:.2e}, PyTorch bf16 vs float64 {e_torch:.2e}; "
            f"ops {json.dumps(steps)}"
        )

    def check_prefill(self) -> None:
        cp, torch, cfg = self.cp, self.torch, self.cfg
        st = self.ours.state[0]
        ids = self.ids_prompt()
        st["ids"][...] = ids
        self.settle()
        self.run_ours(self.pre)
        self.stream.synchronize()
        kc, vc = self.tcaches[1]
        with torch.no_grad():
            x_t, logits_t = self.tm.prefill(torch.as_tensor(ids, device="cuda").long(), kc, vc)
        torch.cuda.synchronize()
        e_x = rel_err(cp, bf16_f64(cp, st["x"]), _t2c(cp, x_t))
        e_l = rel_err(cp, bf16_f64(cp, st["logits"]), _t2c(cp, logits_t))
        kerr = max(
            rel_err(cp, bf16_f64(cp, self.ours.caches[1][0][i]), _t2c(cp, kc[i]))
            for i in range(cfg.layers)
        )
        same = int(st["next"][0]) == int(logits_t.argmax())
        self.data["checks"]["prefill"] = {
            "what": f"prefill of {cfg.prompt} tokens: last token's logits, ours against the "
            "PyTorch model on the same weights (bf16)",
            "rel_err": e_l,
            "hidden_rel_err": e_x,
            "kv_rel_err": kerr,
            "max_abs": float(cp.abs(bf16_f64(cp, st["logits"]) - _t2c(cp, logits_t)).max()),
            "agree_pct": 100.0 if same else 0.0,
            "tolerance": TOLERANCE,
            "passed": bool(max(e_l, e_x, kerr) <= TOLERANCE),
        }
        _say(
            f"prefill: logits {e_l:.2e}, hidden {e_x:.2e}, KV cache {kerr:.2e}, "
            f"next token {'agrees' if same else 'differs'}"
        )

    def _seed_decode(self, b: int, from_prefill: bool) -> None:
        """Ours and PyTorch at batch b in the same state: caches, ids, position."""
        cp, torch, cfg = self.cp, self.torch, self.cfg
        st = self.ours.state[b]
        kcs, vcs = self.ours.caches[b]
        if not from_prefill:
            rng = cp.random.default_rng(D.SEED + 100 + b)
            for c in (*kcs, *vcs):
                c[...] = self._bf(rng, c.shape)
            st["ids"][...] = rng.integers(0, cfg.vocab, b).astype(cp.int32)
        else:
            st["ids"][...] = self.ours.state[0]["next"][0]
        st["pos"][...] = cfg.prompt
        tk, tv = self.tcaches[b]
        for src, dst in zip((*kcs, *vcs), (*tk, *tv), strict=True):
            dst.copy_(torch.as_tensor(src.view(cp.int16), device="cuda").view(torch.bfloat16))
        cp.cuda.runtime.deviceSynchronize()

    def _bf(self, rng: Any, shape: tuple[int, ...]) -> Any:
        from curriculum.bench import kit

        return kit.to_bf16_bits(rng.standard_normal(shape, dtype=self.cp.float32))

    def _torch_state(self, b: int) -> tuple[Any, Any]:
        torch, st = self.torch, self.ours.state[b]
        ids = torch.as_tensor(st["ids"], device="cuda").long().clone()
        pos = torch.as_tensor(st["pos"], device="cuda").long().clone()
        return ids, pos

    def check_decode(self) -> None:
        cp, torch, cfg = self.cp, self.torch, self.cfg
        for b in cfg.batches:
            steps = 4 if b == 1 else 2
            try:
                self._seed_decode(b, from_prefill=(b == 1))
                st = self.ours.state[b]
                ids_t, pos_t = self._torch_state(b)
                tk, tv = self.tcaches[b]
                errs, agree = [], 0
                for _ in range(steps):
                    forced = ids_t.clone()
                    st["ids"][...] = cp.asarray(forced.int())
                    self.settle()
                    self.run_ours(self.dec[b])
                    self.stream.synchronize()
                    with torch.no_grad():
                        logits_t = self.tm.decode(ids_t, pos_t, list(tk), list(tv))
                    torch.cuda.synchronize()
                    ours = bf16_f64(cp, st["logits"])
                    errs.append(rel_err(cp, ours, _t2c(cp, logits_t)))
                    agree += int((cp.asarray(ids_t.int()) == st["ids"]).sum())
                # graph replay against an eager step from the same state
                pos0, ids0 = st["pos"].copy(), st["ids"].copy()
                self.settle()
                with self.stream:
                    run_all(self.dec[b])
                self.stream.synchronize()
                eager = st["logits"].copy()
                st["pos"][...] = pos0
                st["ids"][...] = ids0
                self.settle()
                graph = self.graph(b)
                graph.launch(self.stream)
                self.stream.synchronize()
                diff = int((st["logits"] != eager).sum())
                self.data["checks"][f"decode_b{b}"] = {
                    "what": f"{steps} decode steps at batch {b}, context {cfg.context}"
                    + (" after the prefill" if b == 1 else " over a random cache")
                    + ", tokens forced to PyTorch's: logits, ours against PyTorch (bf16)",
                    "rel_err": max(errs),
                    "per_step": errs,
                    "steps": steps,
                    "agree_pct": 100.0 * agree / (steps * b),
                    "tolerance": TOLERANCE,
                    "graph_vs_eager_mismatches": diff,
                    "passed": bool(max(errs) <= TOLERANCE and diff == 0),
                }
                _say(
                    f"decode b{b}: logits rel err per step {[f'{e:.2e}' for e in errs]}, "
                    f"argmax agrees {agree}/{steps * b}, graph vs eager {diff} values differ"
                )
            except Exception as exc:
                self.fail(f"check decode b{b}", exc)
                _say(traceback.format_exc(limit=6))
                cp.cuda.runtime.deviceSynchronize()

    def graph(self, b: int) -> Any:
        """Our decode step (b > 0) or prefill (b == 0) captured once as a CUDA graph."""
        if not hasattr(self, "_graphs"):
            self._graphs: dict[int, Any] = {}
        if b not in self._graphs:
            launches = self.pre if b == 0 else self.dec[b]
            self.stream.begin_capture()
            try:
                with self.stream:
                    run_all(launches)
            finally:
                g = self.stream.end_capture()
            if getattr(g, "upload", None) is not None:
                g.upload(self.stream)
            self._graphs[b] = g
        return self._graphs[b]

    def _time(self, fn: Callable[[], None], timer: Any) -> dict[str, Any]:
        from curriculum.bench.timing import time_call

        return _stat(time_call(fn, timer, self.policy(), flush_l2=False))

    def _reset(self, b: int) -> None:
        st = self.ours.state[b]
        st["pos"][...] = self.cfg.prompt
        self.settle()

    def time_ours(self) -> None:
        cp, cfg = self.cp, self.cfg
        timer = CupyTimer(cp, self.stream)
        tp = self.data["timing"]["prefill"]
        self.ours.state[0]["ids"][...] = self.ids_prompt()
        self.settle()
        tp["ours_eager"] = self._time(lambda: self.run_ours(self.pre), timer)
        g = self.graph(0)
        tp["ours_graph"] = self._time(lambda: g.launch(self.stream), timer)
        _say(
            f"prefill ours: eager {tp['ours_eager']['median_us']:.0f} us, "
            f"graph {tp['ours_graph']['median_us']:.0f} us"
        )
        for b in cfg.batches:
            row = self.data["timing"]["decode"].setdefault(str(b), {})
            self._reset(b)
            row["ours_eager"] = self._time(lambda b=b: self.run_ours(self.dec[b]), timer)
            self._reset(b)
            gb = self.graph(b)
            row["ours_graph"] = self._time(lambda gb=gb: gb.launch(self.stream), timer)
            _say(
                f"decode b{b} ours: eager {row['ours_eager']['median_us']:.1f} us, "
                f"graph {row['ours_graph']['median_us']:.1f} us"
            )
            self.save()

    def time_torch(self) -> None:
        torch, cfg = self.torch, self.cfg
        timer = TorchTimer(torch)
        tp = self.data["timing"]["prefill"]
        ids = torch.as_tensor(self.ids_prompt(), device="cuda").long()
        kc, vc = self.tcaches[1]
        with torch.no_grad():
            tp["torch_eager"] = self._time(lambda: self.tm.prefill(ids, kc, vc), timer)
            _say(f"prefill PyTorch eager {tp['torch_eager']['median_us']:.0f} us")
            for b in cfg.batches:
                row = self.data["timing"]["decode"].setdefault(str(b), {})
                ids_t, pos_t = self._torch_state(b)
                tk, tv = (list(x) for x in self.tcaches[b])
                row["torch_eager"] = self._time(
                    lambda ids_t=ids_t, pos_t=pos_t, tk=tk, tv=tv: self.tm.decode(
                        ids_t, pos_t, tk, tv
                    ),
                    timer,
                )
                pos_t.fill_(cfg.prompt)
                try:
                    side = torch.cuda.Stream()
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        for _ in range(3):
                            self.tm.decode(ids_t, pos_t, tk, tv)
                    torch.cuda.current_stream().wait_stream(side)
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        self.tm.decode(ids_t, pos_t, tk, tv)
                    pos_t.fill_(cfg.prompt)
                    row["torch_graph"] = self._time(g.replay, timer)
                except Exception as exc:
                    self.fail(f"torch graph b{b}", exc)
                    row["torch_graph"] = {"error": f"{type(exc).__name__}: {exc}"}
                _say(
                    f"decode b{b} PyTorch: eager {row['torch_eager']['median_us']:.1f} us, "
                    f"graph {row['torch_graph'].get('median_us', float('nan')):.1f} us"
                )
                self.save()

    def time_compiled(self) -> None:
        torch, cfg = self.torch, self.cfg
        if self.args.no_compile:
            return
        chosen = (
            tuple(int(b) for b in self.args.compile_batches.split(","))
            if self.args.compile_batches
            else cfg.batches
        )
        timer = TorchTimer(torch)
        try:  # say why a mode falls back (cudagraph skips, say) in the log
            torch._logging.set_logs(perf_hints=True)
        except Exception as exc:
            _say(f"perf hints unavailable: {exc!r}")
        config: Any = torch._dynamo.config
        for name in ("cache_size_limit", "recompile_limit"):
            if hasattr(config, name):
                setattr(config, name, max(getattr(config, name), 64))
        tp = self.data["timing"]["prefill"]
        ids = torch.as_tensor(self.ids_prompt(), device="cuda").long()
        kc, vc = self.tcaches[1]
        mode = self.args.prefill_compile_mode
        t0 = time.perf_counter()
        try:
            fn = torch.compile(self.tm.prefill, mode=mode, dynamic=False)
            with torch.no_grad():
                fn(ids, kc, vc)
                torch.cuda.synchronize()
                spent = time.perf_counter() - t0
                tp["torch_compile"] = {
                    **self._time(lambda: fn(ids, kc, vc), timer),
                    "mode": mode,
                    "compile_s": round(spent, 1),
                }
            _say(
                f"prefill torch.compile({mode}) {tp['torch_compile']['median_us']:.0f} us "
                f"(compiled in {spent:.0f} s)"
            )
        except Exception as exc:
            self.fail("torch.compile prefill", exc)
            tp["torch_compile"] = {"error": f"{type(exc).__name__}: {exc}", "mode": mode}
        self.save()
        mode = self.args.decode_compile_mode
        for b in cfg.batches:
            row = self.data["timing"]["decode"].setdefault(str(b), {})
            if b not in chosen:
                continue
            t0 = time.perf_counter()
            try:
                ids_t, pos_t = self._torch_state(b)
                tk, tv = (list(x) for x in self.tcaches[b])
                for t in (ids_t, pos_t, *tk, *tv):
                    torch._dynamo.mark_static_address(t)
                fn = torch.compile(self.tm.decode, mode=mode, dynamic=False)
                with torch.no_grad():
                    for _ in range(3):
                        fn(ids_t, pos_t, tk, tv)
                    torch.cuda.synchronize()
                    spent = time.perf_counter() - t0
                    pos_t.fill_(cfg.prompt)
                    row["torch_compile"] = {
                        **self._time(lambda fn=fn, a=(ids_t, pos_t, tk, tv): fn(*a), timer),
                        "mode": mode,
                        "compile_s": round(spent, 1),
                        "inductor_counters": _inductor_counters(torch),
                    }
                _say(
                    f"decode b{b} torch.compile({mode}) {row['torch_compile']['median_us']:.1f} us "
                    f"(compiled in {spent:.0f} s); inductor counters "
                    f"{row['torch_compile']['inductor_counters']}"
                )
            except Exception as exc:
                self.fail(f"torch.compile decode b{b}", exc)
                row["torch_compile"] = {"error": f"{type(exc).__name__}: {exc}", "mode": mode}
            self.save()

    def profile(self) -> None:
        """One prefill and one decode step of ours under torch.profiler (graph replay, and
        eager where the replay shows no kernels), summed by kernel."""
        from curriculum.trace import profile_run

        cfg = self.cfg

        def kernels_of(parsed: dict[str, Any]) -> list[tuple[str, float]]:
            return [(r[0], r[4]) for r in parsed["gpu"] if r[1] == "k"]

        targets: list[tuple[str, int]] = [("prefill", 0)] + [
            (f"decode_b{b}", b) for b in (cfg.batches[0], cfg.batches[-1])
        ]
        for key, b in targets:
            launches = self.pre if b == 0 else self.dec[b]
            if b:
                self._reset(b)
            g = self.graph(b)
            g.launch(self.stream)
            self.stream.synchronize()
            rec = kernels_of(
                profile_run(self.torch, lambda g=g: (g.launch(self.stream), self.stream.synchronize()))
            )
            how = "graph replay"
            if len(rec) < len(launches):
                rec = kernels_of(
                    profile_run(
                        self.torch,
                        lambda ls=launches: (self.run_ours(ls), self.stream.synchronize()),
                    )
                )
                how = "eager"
            bd = D.breakdown(rec)
            kinds = [D.kind_of(name) for name, _ in rec]
            if kinds == [ln.op.kind for ln in launches]:  # one kernel a launch, in order
                bd["ops"] = D.op_breakdown(cfg, [ln.op for ln in launches], [d for _, d in rec])
            else:
                bd["ops_error"] = f"{len(rec)} kernels do not line up with {len(launches)} launches"
            bd["what"] = (
                f"ours, {'prefill of ' + str(cfg.prompt) + ' tokens' if b == 0 else f'decode step at batch {b}'}"
                f", {how}, kernel time summed by kernel"
            )
            bd["how"] = how
            self.data["breakdown"][key] = bd
            top = sorted(bd["kinds"].items(), key=lambda kv: -kv[1]["us"])
            _say(
                f"breakdown {key} ({how}, {bd['kernels']} kernels, {bd['kernel_us']:.0f} us): "
                + ", ".join(f"{k} {v['pct']:.0f}%" for k, v in top)
            )


def run(args: argparse.Namespace, cfg: D.Config) -> int:
    return Run(args, cfg).main()
