"""`python -m curriculum.decoder`: a decoder forward pass built from the course's kernels.

A small decoder (random weights, seeded, nothing downloaded) whose every step is a list of
launches of the course's own kernels, loaded from their .cu files and launched as their
suites launch them: RMSNorm (`rmsnorm/02_persistent_bf16`), the wgmma GEMM
(`gemm/12_wgmma_tma`) for prefill and the bf16 GEMV (`gemv/01_bf16`) for decode, flash
attention (`attention/02_flash_fwd`) for prefill and split-KV decoding
(`attention/04_split_kv`), and the fused SwiGLU (`swiglu/02_fused`), with small glue
kernels between them (`kernels/decoder/glue.cuh`: embedding gather, RoPE, layout moves,
residual adds, argmax). On a CUDA GPU the command (`__main__`; the GPU half is `gpu`):

- checks every piece on its own, each in a child process, so that one piece that faults
  does not hide the others; then the whole prefill and several decode steps against the
  same model written in PyTorch on the same weights, and layer 0 against float64;
- times a prefill of one prompt and decode steps at a few batch sizes, eager and replayed
  as a CUDA graph, against the PyTorch model eager, graph-captured and `torch.compile`d,
  in the same run (CUDA events after warm-up, the median of many);
- profiles one prefill and one decode step of ours and sums each kernel's time;
- writes everything to `kernels/decoder/decoder.json` with its provenance.

The model is a prefix LM with a sliding window: the course's flash kernel has no causal
mask, so the prompt attends to all of itself, and the split-KV kernel reads whole 64-token
steps of a cache of exactly T slots, so each decode step writes its K and V into slot
`position % T` of a rolling cache and attends over the last T tokens (itself included).
The PyTorch model does the same, so the comparison is exact in what it computes.

Pages cite the data as `{fig:decoder/KEY.FIELD}` (see `figure`) and draw it with chart
kinds `breakdown` and `throughput`. Everything here and in `__main__` runs without a GPU;
`gpu` is imported only where CuPy, PyTorch and a CUDA GPU are present.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from curriculum import datafile

FORMAT = 1
DATA_FILE = "decoder.json"
TOPIC = "decoder"
SEED = 20261203

# Kernel sources the decoder launches (topic/stem), and the glue file.
GEMM = "gemm/12_wgmma_tma"
GEMV = "gemv/01_bf16"
FLASH = "attention/02_flash_fwd"
SPLIT_KV = "attention/04_split_kv"
RMSNORM = "rmsnorm/02_persistent_bf16"
SWIGLU = "swiglu/02_fused"
GLUE = "decoder/glue"
GLUE_FILE = "kernels/decoder/glue.cuh"
COURSE_KERNELS = (GEMM, GEMV, FLASH, SPLIT_KV, RMSNORM, SWIGLU)

# The size rules of those kernels, mirrored from their headers and suites.
GEMM_TILE = (128, 256, 64)  # M, N, K multiples of 12_wgmma_tma
GEMV_BATCHES = (1, 4, 16)
GEMV_K, GEMV_N = 64, 32
FLASH_ROWS = 128
DECODE_STEP_TOKENS = 64
GROUP = 4
HEAD_DIM = 128
SWIGLU_VALUES = 4096  # tokens * d a multiple of this

IMPLS = ("ours_eager", "ours_graph", "torch_eager", "torch_graph", "torch_compile")
IMPL_LABELS = {
    "ours_eager": "ours, eager (a launch per kernel)",
    "ours_graph": "ours, CUDA graph replay",
    "torch_eager": "PyTorch eager",
    "torch_graph": "PyTorch eager, CUDA graph",
    "torch_compile": "torch.compile",
}


@dataclass(frozen=True)
class Config:
    """The decoder's shape: Llama-like blocks (RMSNorm, RoPE, grouped KV heads, SwiGLU)."""

    layers: int = 8
    hidden: int = 2048
    q_heads: int = 16
    kv_heads: int = 4
    head_dim: int = 128
    mlp: int = 8192
    vocab: int = 32768
    prompt: int = 2048  # prefill tokens (one prompt)
    context: int = 2048  # KV slots a decode step attends over (the rolling window)
    batches: tuple[int, ...] = (1, 4, 16)
    eps: float = 1e-5
    rope_base: float = 10000.0

    @property
    def qkv(self) -> int:
        return (self.q_heads + 2 * self.kv_heads) * self.head_dim

    @property
    def attn(self) -> int:
        return self.q_heads * self.head_dim

    def matrices(self) -> dict[str, tuple[int, int]]:
        """(in, out) of every weight matrix of one layer, and of the LM head."""
        h = self.hidden
        return {
            "qkv": (h, self.qkv),
            "o": (self.attn, h),
            "gate": (h, self.mlp),
            "up": (h, self.mlp),
            "down": (self.mlp, h),
            "lm_head": (h, self.vocab),
        }

    def layer_params(self) -> int:
        m = self.matrices()
        return sum(a * b for k, (a, b) in m.items() if k != "lm_head") + 2 * self.hidden

    def weight_bytes(self) -> int:
        """bf16 bytes a decode step reads: every layer, the final norm and the LM head (the
        embedding table is only gathered: a row a token)."""
        return 2 * (self.layers * self.layer_params() + self.hidden + self.hidden * self.vocab)

    def kv_bytes(self, batch: int) -> int:
        """bf16 K and V a decode step reads: every layer, every sequence, T slots."""
        return 2 * 2 * batch * self.kv_heads * self.context * self.head_dim * self.layers

    def decode_bytes(self, batch: int) -> int:
        """The floor's bytes: weights and KV cache read once (activations are kilobytes)."""
        return self.weight_bytes() + self.kv_bytes(batch)

    def matmul_params(self) -> int:
        return self.layers * (self.layer_params() - 2 * self.hidden)

    def decode_flops(self, batch: int) -> float:
        """2 FLOPs a weight a token, plus 4 T D a query head a layer for attention."""
        matmul = 2.0 * batch * (self.matmul_params() + self.hidden * self.vocab)
        attention = 4.0 * batch * self.q_heads * self.context * self.head_dim * self.layers
        return matmul + attention

    def prefill_flops(self) -> float:
        """2 S FLOPs a weight, 4 S^2 D a head a layer (no causal mask), the LM head once."""
        s = self.prompt
        matmul = 2.0 * s * self.matmul_params() + 2.0 * self.hidden * self.vocab
        attention = 4.0 * s * s * self.q_heads * self.head_dim * self.layers
        return matmul + attention

    def prefill_bytes(self) -> int:
        """Weights once, the prompt's K and V written once (bf16)."""
        kv = 2 * 2 * self.prompt * self.kv_heads * self.head_dim * self.layers
        return self.weight_bytes() + kv


def problems(cfg: Config) -> list[str]:
    """Every size rule of the launched kernels that `cfg` breaks; empty when it fits."""
    out: list[str] = []
    h, s, t = cfg.hidden, cfg.prompt, cfg.context
    if cfg.head_dim != HEAD_DIM:
        out.append(f"head_dim {cfg.head_dim}: the attention kernels and the glue are built for 128")
    if cfg.q_heads != GROUP * cfg.kv_heads:
        out.append(f"{cfg.q_heads} query heads: {SPLIT_KV} serves {GROUP} a KV head")
    tm, tn, tk = GEMM_TILE
    if s % tm:
        out.append(f"prompt {s}: {GEMM} needs M a multiple of {tm}")
    for name, (k, n) in cfg.matrices().items():
        if name != "lm_head" and (n % tn or k % tk):
            out.append(f"{name} ({k} x {n}): {GEMM} needs N a multiple of {tn}, K of {tk}")
        if k % GEMV_K or n % GEMV_N:
            out.append(f"{name} ({k} x {n}): {GEMV} needs K a multiple of {GEMV_K}, N of {GEMV_N}")
    for b in cfg.batches:
        if b not in GEMV_BATCHES:
            out.append(f"batch {b}: {GEMV} is instantiated for {GEMV_BATCHES}")
        if (b * cfg.mlp) % SWIGLU_VALUES:
            out.append(f"batch {b} x mlp {cfg.mlp}: {SWIGLU} needs a multiple of {SWIGLU_VALUES}")
    if (s * cfg.mlp) % SWIGLU_VALUES:
        out.append(f"prompt x mlp: {SWIGLU} needs a multiple of {SWIGLU_VALUES}")
    if s % FLASH_ROWS:
        out.append(f"prompt {s}: {FLASH} needs a multiple of {FLASH_ROWS}")
    if t % DECODE_STEP_TOKENS:
        out.append(f"context {t}: {SPLIT_KV} reads whole steps of {DECODE_STEP_TOKENS} tokens")
    if s > t:
        out.append(f"prompt {s} longer than the {t} cache slots")
    if not ((h % 512 == 0 and h <= 2048) or (h % 1024 == 0 and 4096 <= h <= 16384)):
        out.append(
            f"hidden {h}: {RMSNORM} takes multiples of 512 up to 2048, or of 1024 "
            "from 4096 to 16384"
        )
    if h % 8:
        out.append(f"hidden {h}: the glue moves 8 values a thread")
    return out


@dataclass(frozen=True)
class Op:
    """One launch of a step: what it computes, which kernel, at which size."""

    name: str  # e.g. "L0.qkv"
    kind: str  # gemm, gemv, flash, split_kv, rmsnorm, swiglu, glue
    kernel: str  # a COURSE_KERNELS id, or "decoder/glue:<entry>"
    dims: dict[str, int] = field(default_factory=dict)


def _glue(name: str, entry: str, **dims: int) -> Op:
    return Op(name, "glue", f"{GLUE}:{entry}", dims)


def prefill_ops(cfg: Config) -> list[Op]:
    """Every launch of a prefill of one prompt, in order."""
    s, h = cfg.prompt, cfg.hidden
    ops = [_glue("embed", "embed", rows=s, hidden=h)]
    for i in range(cfg.layers):
        p = f"L{i}."
        ops += [
            Op(p + "norm1", "rmsnorm", RMSNORM, {"rows": s, "cols": h}),
            Op(p + "qkv", "gemm", GEMM, {"m": s, "n": cfg.qkv, "k": h}),
            _glue(p + "rope", "rope_prefill", s=s, heads=cfg.q_heads + 2 * cfg.kv_heads),
            Op(p + "attention", "flash", FLASH, {"b": 1, "h": cfg.q_heads, "s": s, "d": 128}),
            _glue(p + "heads_to_rows", "heads_to_rows", s=s, h=cfg.q_heads),
            Op(p + "o", "gemm", GEMM, {"m": s, "n": h, "k": cfg.attn}),
            _glue(p + "add1", "add_f32", n=s * h),
            Op(p + "norm2", "rmsnorm", RMSNORM, {"rows": s, "cols": h}),
            Op(p + "gate", "gemm", GEMM, {"m": s, "n": cfg.mlp, "k": h}),
            Op(p + "up", "gemm", GEMM, {"m": s, "n": cfg.mlp, "k": h}),
            _glue(p + "round", "to_bf16", n=2 * s * cfg.mlp),
            Op(p + "swiglu", "swiglu", SWIGLU, {"tokens": s, "d": cfg.mlp}),
            Op(p + "down", "gemm", GEMM, {"m": s, "n": h, "k": cfg.mlp}),
            _glue(p + "add2", "add_f32", n=s * h),
        ]
    ops += [
        Op("final_norm", "rmsnorm", RMSNORM, {"rows": 1, "cols": h}),
        Op("lm_head", "gemv", GEMV, {"batch": 1, "k": h, "n": cfg.vocab}),
        _glue("argmax", "argmax_step", rows=1),
    ]
    return ops


def decode_ops(cfg: Config, batch: int) -> list[Op]:
    """Every launch of one decode step of `batch` sequences, in order."""
    b, h = batch, cfg.hidden
    ops = [_glue("embed", "embed", rows=b, hidden=h)]
    for i in range(cfg.layers):
        p = f"L{i}."
        ops += [
            Op(p + "norm1", "rmsnorm", RMSNORM, {"rows": b, "cols": h}),
            Op(p + "qkv", "gemv", GEMV, {"batch": b, "k": h, "n": cfg.qkv}),
            _glue(p + "rope", "rope_decode", b=b, heads=cfg.q_heads + 2 * cfg.kv_heads),
            Op(
                p + "attention",
                "split_kv",
                SPLIT_KV,
                {"b": b, "hq": cfg.q_heads, "hkv": cfg.kv_heads, "t": cfg.context, "d": 128},
            ),
            Op(p + "o", "gemv", GEMV, {"batch": b, "k": cfg.attn, "n": h}),
            _glue(p + "add1", "add_bf16", n=b * h),
            Op(p + "norm2", "rmsnorm", RMSNORM, {"rows": b, "cols": h}),
            Op(p + "gate", "gemv", GEMV, {"batch": b, "k": h, "n": cfg.mlp}),
            Op(p + "up", "gemv", GEMV, {"batch": b, "k": h, "n": cfg.mlp}),
            Op(p + "swiglu", "swiglu", SWIGLU, {"tokens": b, "d": cfg.mlp}),
            Op(p + "down", "gemv", GEMV, {"batch": b, "k": cfg.mlp, "n": h}),
            _glue(p + "add2", "add_bf16", n=b * h),
        ]
    ops += [
        Op("final_norm", "rmsnorm", RMSNORM, {"rows": b, "cols": h}),
        Op("lm_head", "gemv", GEMV, {"batch": b, "k": h, "n": cfg.vocab}),
        _glue("argmax", "argmax_step", rows=b),
    ]
    return ops


# --- per-kernel breakdown (profiler records -> shares) ----------------------------------------

KIND_LABELS = {
    "gemm": "GEMM (gemm/12 wgmma + TMA)",
    "gemv": "GEMV (gemv/01 bf16)",
    "flash": "flash attention (attention/02)",
    "split_kv": "split-KV decode (attention/04)",
    "rmsnorm": "RMSNorm (rmsnorm/02 bf16)",
    "swiglu": "SwiGLU (swiglu/02 fused)",
    "glue": "glue (embed, RoPE, layout, adds, argmax)",
    "other": "other",
}
# Kernel entry names -> kind (the profiler reports entry names).
ENTRY_KINDS = {
    "gemm_bf16_wgmma_tma": "gemm",
    "flash_fwd": "flash",
    "split_kv": "split_kv",
    "persistent_bf16_vpt2": "rmsnorm",
    "persistent_bf16_vpt4": "rmsnorm",
    "fused": "swiglu",
    "embed": "glue",
    "rope_prefill": "glue",
    "rope_decode": "glue",
    "heads_to_rows": "glue",
    "add_f32": "glue",
    "add_bf16": "glue",
    "to_bf16": "glue",
    "argmax_step": "glue",
}


def kind_of(entry: str) -> str:
    """The breakdown kind of a kernel's entry name (as the profiler reports it)."""
    name = entry.strip()
    if name.startswith("void "):
        name = name[5:]
    name = name.split("(", 1)[0].split("<", 1)[0].strip()
    if name in ENTRY_KINDS:
        return ENTRY_KINDS[name]
    if name.startswith("bf16_b") and name[6:].isdigit():
        return "gemv"
    return "other"


def breakdown(kernels: list[tuple[str, float]]) -> dict[str, Any]:
    """(entry name, duration µs) records of one step -> totals by kind and by entry, with
    each kind's share of the summed kernel time."""
    by_kind: dict[str, dict[str, float]] = {}
    by_entry: dict[str, dict[str, float]] = {}
    for name, dur in kernels:
        kind = kind_of(name)
        for table, key in ((by_kind, kind), (by_entry, name.split("(", 1)[0])):
            row = table.setdefault(key, {"count": 0, "us": 0.0})
            row["count"] += 1
            row["us"] += float(dur)
    total = sum(r["us"] for r in by_kind.values())
    for row in (*by_kind.values(), *by_entry.values()):
        row["us"] = round(row["us"], 3)
        row["pct"] = round(100.0 * row["us"] / total, 2) if total > 0 else 0.0
    return {
        "kernels": len(kernels),
        "kernel_us": round(total, 3),
        "kinds": by_kind,
        "entries": by_entry,
    }


# Ops of a step grouped for the breakdown: (group, label), in the order a layer runs them.
OP_GROUPS: dict[str, tuple[str, str]] = {
    "embed": ("embed_argmax", "embed, argmax (glue)"),
    "argmax": ("embed_argmax", "embed, argmax (glue)"),
    "norm1": ("norms", "RMSNorm (rmsnorm/02)"),
    "norm2": ("norms", "RMSNorm (rmsnorm/02)"),
    "final_norm": ("norms", "RMSNorm (rmsnorm/02)"),
    "qkv": ("qkv", "QKV projection"),
    "rope": ("rope", "RoPE, cache write (glue)"),
    "attention": ("attention", "attention"),
    "heads_to_rows": ("heads_to_rows", "heads to rows (glue)"),
    "o": ("o", "output projection"),
    "add1": ("adds", "residual adds (glue)"),
    "add2": ("adds", "residual adds (glue)"),
    "gate": ("gate_up", "gate and up projections"),
    "up": ("gate_up", "gate and up projections"),
    "round": ("round", "fp32 to bf16 (glue)"),
    "swiglu": ("swiglu", "SwiGLU (swiglu/02)"),
    "down": ("down", "down projection"),
    "lm_head": ("lm_head", "LM head (gemv/01)"),
}
OP_FIELDS = ("us", "pct", "gbps", "tflops", "count")


def op_work(cfg: Config, op: Op) -> tuple[float, float]:
    """(FLOPs, minimum bytes) of one launch: inputs read once, outputs written once, bf16
    except the GEMM's fp32 output and the RoPE table."""
    d = op.dims
    hd = cfg.head_dim
    if op.kind == "gemm":
        m, n, k = d["m"], d["n"], d["k"]
        return 2.0 * m * n * k, float(2 * m * k + 2 * k * n + 4 * m * n)
    if op.kind == "gemv":
        b, k, n = d["batch"], d["k"], d["n"]
        return 2.0 * b * k * n, float(2 * n * k + 2 * b * k + 2 * b * n)
    if op.kind == "flash":
        b, h, sq = d["b"], d["h"], d["s"]
        return 4.0 * b * h * sq * sq * hd, float(4 * 2 * b * h * sq * hd)
    if op.kind == "split_kv":
        b, hq, hkv, t = d["b"], d["hq"], d["hkv"], d["t"]
        return 4.0 * b * hq * t * hd, float(2 * 2 * b * hkv * t * hd + 2 * 2 * b * hq * hd)
    if op.kind == "rmsnorm":
        r, c = d["rows"], d["cols"]
        return 4.0 * r * c, float(2 * 2 * r * c + 2 * c)
    if op.kind == "swiglu":
        n = d["tokens"] * d["d"]
        return 4.0 * n, float(3 * 2 * n)
    entry = op.kernel.split(":", 1)[1]
    hq, hkv = cfg.q_heads, cfg.kv_heads
    if entry == "embed":
        return 0.0, float(2 * 2 * d["rows"] * d["hidden"])
    if entry == "rope_prefill":  # fp32 in; q, the repeated K and V, and the cache out
        sq = d["s"]
        out = 2 * sq * hd * (hq + 2 * hq + 2 * hkv)
        return 6.0 * sq * (hq + hkv) * hd // 2, float(4 * sq * d["heads"] * hd + out)
    if entry == "rope_decode":
        return 6.0 * d["b"] * (hq + hkv) * hd // 2, float(2 * 2 * d["b"] * d["heads"] * hd)
    if entry == "heads_to_rows":
        return 0.0, float(2 * 2 * d["s"] * d["h"] * hd)
    if entry == "add_f32":
        return float(d["n"]), float(8 * d["n"])
    if entry == "add_bf16":
        return float(d["n"]), float(6 * d["n"])
    if entry == "to_bf16":
        return 0.0, float(6 * d["n"])
    if entry == "argmax_step":
        return 0.0, float(2 * d["rows"] * cfg.vocab)
    raise KeyError(f"no work model for {op.kernel}")


def op_breakdown(cfg: Config, ops: list[Op], durations: list[float]) -> dict[str, Any]:
    """Summed time, share, and achieved GB/s and TFLOP/s of each op group of one step, from
    the kernel durations (µs) in launch order (one kernel a launch)."""
    if len(ops) != len(durations):
        raise ValueError(f"{len(durations)} kernels for {len(ops)} launches")
    rows: dict[str, dict[str, Any]] = {}
    for op, dur in zip(ops, durations, strict=True):
        group, label = OP_GROUPS[op.name.split(".")[-1]]
        flops, nbytes = op_work(cfg, op)
        row = rows.setdefault(
            group,
            {
                "label": label,
                "kind": op.kind if op.kind != "glue" else "glue",
                "count": 0,
                "us": 0.0,
                "flops": 0.0,
                "bytes": 0.0,
            },
        )
        row["count"] += 1
        row["us"] += float(dur)
        row["flops"] += flops
        row["bytes"] += nbytes
    total = sum(r["us"] for r in rows.values())
    for row in rows.values():
        us = row["us"]
        row["pct"] = round(100.0 * us / total, 2) if total > 0 else 0.0
        row["gbps"] = round(row["bytes"] / (us * 1e-6) / 1e9, 1) if us > 0 else 0.0
        row["tflops"] = round(row["flops"] / (us * 1e-6) / 1e12, 2) if us > 0 else 0.0
        row["us"] = round(us, 3)
    return rows


# --- the data file: validation and figures -----------------------------------------------------

REQUIRED = ("format", "provenance", "config", "work", "checks", "timing", "breakdown")


def validate(data: Any) -> list[str]:
    """Problems with a decoder data file; empty when it can be read by pages."""
    if not isinstance(data, dict):
        return ["not a JSON object"]
    out = [f"missing {k!r}" for k in REQUIRED if k not in data]
    if out:
        return out
    if data["format"] != FORMAT:
        out.append(f"format {data['format']!r}, expected {FORMAT}")
    timing = data["timing"]
    for phase in ("prefill", "decode"):
        if phase not in timing:
            out.append(f"timing has no {phase}")
    for key, row in _timing_rows(data):
        for name in ("median_us", "p20_us", "p80_us"):
            v = row.get(name)
            if not isinstance(v, (int, float)) or not v > 0:
                out.append(f"timing {key}: {name} is {v!r}, not a positive number")
        if (
            all(isinstance(row.get(n), (int, float)) for n in ("median_us", "p20_us", "p80_us"))
            and not row["p20_us"] <= row["median_us"] <= row["p80_us"]
        ):
            out.append(f"timing {key}: percentiles out of order")
    for name, check in data["checks"].items():
        if not isinstance(check, dict) or "passed" not in check:
            out.append(f"check {name!r} has no 'passed'")
    return out


def _timing_rows(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for impl, row in data["timing"].get("prefill", {}).items():
        if isinstance(row, dict) and "median_us" in row:
            rows.append((f"prefill_{impl}", row))
    for batch, impls in data["timing"].get("decode", {}).items():
        for impl, row in (impls or {}).items():
            if isinstance(row, dict) and "median_us" in row:
                rows.append((f"decode_{impl}@batch={batch}", row))
    return rows


def data_path(root: Path) -> Path:
    """The data file under `root` (the project root or its kernels/ folder)."""
    return datafile.find(root, TOPIC, DATA_FILE)


def load(root: Path) -> dict[str, Any]:
    """The decoder data; ValueError (with the fix) when there is none or it is invalid."""
    path = data_path(root)
    data = datafile.read(path, f"decoder data at {path}; run `python -m curriculum.decoder` on a GPU")
    found = validate(data)
    if found:
        raise ValueError(f"{path}: " + "; ".join(found))
    return data


def data_hash(root: Path | None) -> str:
    return datafile.digest(None if root is None else data_path(root))


# Figure keys and fields. Timings: `prefill_<impl>` and `decode_<impl>@batch=N`.
TIMING_FIELDS: dict[str, tuple[str, str]] = {
    "us": ("us", "time of one step, CUDA events, median"),
    "ms": ("ms", "time of one step, CUDA events, median"),
    "tokens_per_s": ("rate", "tokens a second: tokens of one step over its median time"),
    "per_token_us": ("us", "median step time over the tokens of the step"),
    "speedup": ("x", "ours eager over this, same phase and batch"),
    "vs_ours_graph": ("x", "this over ours replayed as a graph (above 1: ours is faster)"),
    "pct_floor": (
        "pct",
        "the bandwidth floor (weights + KV bytes over the same-run copy "
        "bandwidth) over this step time",
    ),
    "tflops": ("tflops", "FLOPs of the step over its median time"),
    "compile_s": ("s", "seconds torch.compile took before the first step ran"),
}
CHECK_FIELDS: dict[str, tuple[str, str]] = {
    "rel_err": ("sci", "||ours - reference|| / ||reference||"),
    "max_abs": ("sci", "largest |ours - reference|"),
    "tolerance": ("sci", "the largest rel_err accepted"),
    "agree_pct": ("pct", "share of next tokens (argmax) equal to the reference's"),
    "steps": ("count", "decode steps compared"),
    "torch_rel_err": ("sci", "PyTorch bf16's own error against the same float64 reference"),
    "hidden_rel_err": ("sci", "hidden states after the last layer, relative error"),
    "kv_rel_err": ("sci", "KV cache written by the prefill, largest relative error of a layer"),
    "graph_vs_eager_mismatches": ("count", "logits that differ between graph replay and eager"),
}
BREAKDOWN_FIELDS = (
    tuple(f"{k}_{u}" for k in KIND_LABELS for u in ("us", "pct"))
    + tuple(
        f"{g}_{u}"
        for g in dict.fromkeys(g for g, _ in OP_GROUPS.values())
        for u in OP_FIELDS
        if f"{g}_{u}" not in {f"{k}_{v}" for k in KIND_LABELS for v in ("us", "pct")}
    )
    + ("kernels", "kernel_us")
)
FLOOR_FIELDS: dict[str, tuple[str, str]] = {
    "us": ("us", "bytes of a decode step over the same-run copy bandwidth"),
    "mb": ("mb", "weights + KV cache bytes a decode step reads"),
    "copy_gbps": ("gbps", "device-to-device copy bandwidth measured in the same run"),
}


def fields_for(key: str) -> tuple[str, ...]:
    """The fields a figure key takes (empty when the key is unknown)."""
    if key.startswith(("prefill_", "decode_")) and key.split("_", 1)[1] in IMPLS:
        return tuple(TIMING_FIELDS)
    if key.startswith("check_"):
        return tuple(CHECK_FIELDS)
    if key.startswith("breakdown_"):
        return BREAKDOWN_FIELDS
    if key == "floor":
        return tuple(FLOOR_FIELDS)
    if key == "model":
        return ("weight_mb", "params_m", "decode_gflop", "prefill_tflop", "launches")
    return ()


def format_number(kind: str, v: float) -> str:
    if kind == "us":
        return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.3g} µs" if v < 100 else f"{v:,.0f} µs"
    if kind == "ms":
        return f"{v:.2f} ms"
    if kind == "s":
        return f"{v:.0f} s" if v >= 10 else f"{v:.1f} s"
    if kind == "rate":
        return f"{v:,.0f} tokens/s"
    if kind == "x":
        return f"{v:.2f}×"
    if kind == "pct":
        return f"{v:.0f}%"
    if kind == "sci":
        return f"{v:.1e}"
    if kind == "gbps":
        return f"{v:,.0f} GB/s"
    if kind == "tflops":
        return f"{v:,.0f} TFLOP/s"
    if kind == "mb":
        return f"{v:,.0f} MB"
    if kind == "count":
        return f"{v:,.0f}"
    if kind == "num":
        return f"{v:.3g}"
    return f"{v:g}"


def _row(data: dict[str, Any], phase: str, impl: str, batch: str | None) -> dict[str, Any]:
    if phase == "prefill":
        row = data["timing"]["prefill"].get(impl)
    else:
        row = (data["timing"]["decode"].get(batch or "") or {}).get(impl)
    if not isinstance(row, dict) or "median_us" not in row:
        where = "prefill" if phase == "prefill" else f"decode at batch {batch}"
        reason = row.get("error") if isinstance(row, dict) else None
        raise ValueError(f"no {impl} timing of {where}" + (f": {reason}" if reason else ""))
    return row


def timing_value(
    data: dict[str, Any], key: str, field_name: str, batch: str | None
) -> float | None:
    phase, impl = key.split("_", 1)
    if phase == "decode" and batch is None:
        raise ValueError(
            f"a decode figure needs its batch: {{fig:decoder/{key}.{field_name}@batch=1}}"
        )
    row = _row(data, phase, impl, batch)
    us = float(row["median_us"])
    tokens = data["config"]["prompt"] if phase == "prefill" else int(batch or 0)
    if field_name == "us":
        return us
    if field_name == "ms":
        return us / 1000
    if field_name == "tokens_per_s":
        return tokens / (us * 1e-6)
    if field_name == "per_token_us":
        return us / tokens
    if field_name == "speedup":
        return float(_row(data, phase, "ours_eager", batch)["median_us"]) / us
    if field_name == "vs_ours_graph":
        return us / float(_row(data, phase, "ours_graph", batch)["median_us"])
    if field_name == "pct_floor":
        if phase != "decode":
            raise ValueError("pct_floor is a decode figure")
        return 100.0 * floor_us(data, int(batch or 0)) / us
    if field_name == "tflops":
        work = data["work"]
        flops = work["prefill_flops"] if phase == "prefill" else work["decode_flops"][str(batch)]
        return flops / (us * 1e-6) / 1e12
    if field_name == "compile_s":
        value = row.get("compile_s")
        return None if value is None else float(value)
    return None


def floor_us(data: dict[str, Any], batch: int) -> float:
    gbps = float(data["copy_gbps"])
    return float(data["work"]["decode_bytes"][str(batch)]) / (gbps * 1e9) * 1e6


def figure(root: Path, case_id: str, field_name: str, shape: str | None) -> tuple[str, float, str]:
    """(text, value, provenance) of `{fig:decoder/KEY.FIELD}`; ValueError says what is wrong."""
    key = case_id.split("/", 1)[1]
    if field_name not in fields_for(key):
        raise ValueError(
            f"decoder figures have no {key}.{field_name}"
            + (
                f"; {key} takes: {', '.join(fields_for(key))}"
                if fields_for(key)
                else "; keys: prefill_<impl>, decode_<impl>, check_<name>, "
                "breakdown_<phase>, floor, model"
            )
        )
    data = load(root)
    prov = data["provenance"]
    where = (
        f"{prov.get('gpu_name', 'unknown GPU')}, driver {prov.get('driver', '?')}, "
        f"CuPy {prov.get('cupy', '?')}, torch {prov.get('torch', '?')}; measured "
        f"{str(prov.get('date', '?'))[:10]} at {str(prov.get('git_rev', '?'))[:10]} by "
        "`python -m curriculum.decoder`"
    )
    batch = shape.split("=", 1)[1] if shape and shape.startswith("batch=") else None
    if shape and batch is None:
        raise ValueError(f"decoder figures take @batch=N, not @{shape}")
    kind = "count"
    if key.startswith(("prefill_", "decode_")):
        value = timing_value(data, key, field_name, batch)
        kind, what = TIMING_FIELDS[field_name]
        row = _row(data, *key.split("_", 1), batch)
        where = (
            f"{IMPL_LABELS[key.split('_', 1)[1]]}, {key.split('_', 1)[0]}"
            + (f" at batch {batch}" if batch else f" of {data['config']['prompt']} tokens")
            + f": {what} ({row['samples']} samples, p20 {row['p20_us']:.4g} µs, "
            f"p80 {row['p80_us']:.4g} µs); {where}"
        )
    elif key.startswith("check_"):
        name = key[len("check_") :] + (f"_b{batch}" if batch else "")
        check = data["checks"].get(name)
        if not isinstance(check, dict):
            raise ValueError(f"no check {name!r} (checks: {', '.join(sorted(data['checks']))})")
        value = check.get(field_name)
        kind, what = CHECK_FIELDS[field_name]
        where = f"{check.get('what', name)}: {what}; {where}"
    elif key.startswith("breakdown_"):
        name = key[len("breakdown_") :] + (f"_b{batch}" if batch else "")
        bd = data["breakdown"].get(name)
        if not isinstance(bd, dict):
            raise ValueError(
                f"no breakdown {name!r} (have: {', '.join(sorted(data['breakdown']))})"
            )
        if field_name in ("kernels", "kernel_us"):
            value = bd.get(field_name)
            kind = "count" if field_name == "kernels" else "us"
        else:
            k, unit = field_name.rsplit("_", 1)
            if k in KIND_LABELS and unit in ("us", "pct"):
                value = (bd["kinds"].get(k) or {}).get(unit, 0.0)  # a kind absent took no time
            else:
                row = (bd.get("ops") or {}).get(k)
                if row is None:
                    raise ValueError(
                        f"breakdown {name!r} has no op group {k!r} "
                        f"(groups: {', '.join(sorted(bd.get('ops') or {}))})"
                    )
                value = row[unit]
            kind = unit
        where = f"{bd.get('what', name)}, one profiled step; {where}"
    elif key == "floor":
        if batch is None and field_name != "copy_gbps":
            raise ValueError("a floor figure needs its batch: {fig:decoder/floor.us@batch=1}")
        kind, what = FLOOR_FIELDS[field_name]
        if field_name == "copy_gbps":
            value = float(data["copy_gbps"])
        elif field_name == "mb":
            value = data["work"]["decode_bytes"][str(batch)] / 1e6
        else:
            value = floor_us(data, int(batch or 0))
        where = f"{what}; {where}"
    else:  # model
        work = data["work"]
        value = {
            "weight_mb": work["weight_bytes"] / 1e6,
            "params_m": work["params"] / 1e6,
            "decode_gflop": work["decode_flops"].get(str(batch or 1), 0) / 1e9,
            "prefill_tflop": work["prefill_flops"] / 1e12,
            "launches": work["launches"].get("decode" if batch else "prefill", 0),
        }[field_name]
        kind = {"weight_mb": "mb", "launches": "count"}.get(field_name, "num")
        where = f"the decoder's {field_name} (counted from its shapes); {where}"
    if value is None:
        raise ValueError(f"{case_id} has no {field_name}")
    return format_number(kind, float(value)), float(value), where


def work_model(cfg: Config) -> dict[str, Any]:
    """Counts of the config the data file stores beside the measurements."""
    return {
        "params": cfg.layers * cfg.layer_params() + cfg.hidden * cfg.vocab + cfg.hidden,
        "weight_bytes": cfg.weight_bytes(),
        "decode_bytes": {str(b): cfg.decode_bytes(b) for b in cfg.batches},
        "kv_bytes": {str(b): cfg.kv_bytes(b) for b in cfg.batches},
        "decode_flops": {str(b): cfg.decode_flops(b) for b in cfg.batches},
        "prefill_flops": cfg.prefill_flops(),
        "prefill_bytes": cfg.prefill_bytes(),
        "launches": {"prefill": len(prefill_ops(cfg)), "decode": len(decode_ops(cfg, 1))},
    }


def config_dict(cfg: Config) -> dict[str, Any]:
    out = asdict(cfg)
    out["batches"] = list(cfg.batches)
    return out


# --- drawing (chart kinds `breakdown` and `throughput`, see charts) -----------------------------

KIND_COLOURS = {
    "gemm": "#3b6ea8",
    "gemv": "#3b6ea8",
    "flash": "#7d62a8",
    "split_kv": "#7d62a8",
    "rmsnorm": "#4f9a5b",
    "swiglu": "#d9822b",
    "glue": "#9aa5b1",
    "other": "#8c6d4f",
}
IMPL_COLOURS = {
    "ours_eager": "#9fc0e0",
    "ours_graph": "#3b6ea8",
    "torch_eager": "#e3b58a",
    "torch_graph": "#d9822b",
    "torch_compile": "#b8483e",
}


def breakdown_rows(data: dict[str, Any], key: str) -> list[tuple[str, str, float, str]]:
    """(kind, label, µs, note) of one profiled step, largest first: by op group (QKV
    projection, attention, ...) where the data has them, else by kernel family."""
    bd = data.get("breakdown", {}).get(key)
    if not isinstance(bd, dict) or not bd.get("kinds"):
        have = ", ".join(sorted(data.get("breakdown", {}))) or "none"
        raise ValueError(f"the decoder data has no breakdown {key!r} (have: {have})")
    rows = []
    if bd.get("ops"):
        for row in bd["ops"].values():
            rate = (
                format_number("tflops", row["tflops"])
                if row["kind"] in ("gemm", "flash")
                else format_number("gbps", row["gbps"])
            )
            note = f"{row['pct']:.0f}%, {rate}"
            rows.append((row["kind"], row["label"], float(row["us"]), note))
    else:
        for k, v in bd["kinds"].items():
            n = int(v["count"])
            note = f"{float(v['pct']):.0f}%, {n} launch{'es' if n != 1 else ''}"
            rows.append((k, KIND_LABELS.get(k, k), float(v["us"]), note))
    return sorted(rows, key=lambda r: (-r[2], r[1]))


def throughput_rows(data: dict[str, Any]) -> list[tuple[str, dict[str, float]]]:
    """(group label, tokens/s by implementation) for the prefill and each decode batch."""
    out = []
    prompt = data["config"]["prompt"]
    pre = {
        impl: prompt / (row["median_us"] * 1e-6)
        for impl, row in data["timing"].get("prefill", {}).items()
        if isinstance(row, dict) and row.get("median_us")
    }
    out.append((f"prefill, {prompt} tokens", pre))
    for batch in sorted(data["timing"].get("decode", {}), key=int):
        rows = data["timing"]["decode"][batch]
        out.append(
            (
                f"decode, batch {batch}",
                {
                    impl: int(batch) / (row["median_us"] * 1e-6)
                    for impl, row in rows.items()
                    if isinstance(row, dict) and row.get("median_us")
                },
            )
        )
    return out


def _gpu(data: dict[str, Any]) -> str:
    return str(data.get("provenance", {}).get("gpu_name", "unknown GPU"))


def draw_breakdown(ax: Any, data: dict[str, Any], key: str) -> None:
    rows = breakdown_rows(data, key)
    bd = data["breakdown"][key]
    ys = list(range(len(rows)))[::-1]
    top = max(r[2] for r in rows) or 1.0
    colours = [KIND_COLOURS.get(r[0], "#8c6d4f") for r in rows]
    ax.barh(ys, [r[2] for r in rows], color=colours, height=0.62)
    for y, (_, _, us, note) in zip(ys, rows, strict=True):
        ax.text(
            us + top * 0.01,
            y,
            f"{format_number('us', us)}  ({note})",
            va="center",
            ha="left",
            fontsize=7,
        )
    ax.set_yticks(ys, [r[1] for r in rows], fontsize=7.5)
    ax.set_xlim(0, top * 1.5)
    ax.set_xlabel("summed kernel time in one step (µs)")
    ax.grid(axis="y", visible=False)
    ax.set_title(
        f"{bd.get('what', key)}\n{bd['kernels']} kernels, "
        f"{format_number('us', bd['kernel_us'])} of kernel time ({_gpu(data)})",
        loc="left",
        fontsize=8.5,
    )


def draw_throughput(ax: Any, data: dict[str, Any]) -> None:
    groups = throughput_rows(data)
    if not any(v for _, v in groups):
        raise ValueError("the decoder data has no timings")
    width = 0.8 / len(IMPLS)
    seen = set()
    for gi, (_, values) in enumerate(groups):
        for ii, impl in enumerate(IMPLS):
            if impl not in values:
                continue
            x = gi - 0.4 + width * (ii + 0.5)
            v = values[impl]
            ax.bar(
                x,
                v,
                width=width * 0.92,
                color=IMPL_COLOURS[impl],
                label=IMPL_LABELS[impl] if impl not in seen else None,
            )
            seen.add(impl)
            ax.text(
                x,
                v * 1.08,
                f"{v / 1000:.3g}k" if v >= 1000 else f"{v:.0f}",
                ha="center",
                va="bottom",
                fontsize=6,
                rotation=90,
            )
    ax.set_yscale("log")
    ax.set_xticks(range(len(groups)), [g for g, _ in groups], fontsize=8)
    ax.set_ylabel("tokens per second (log scale)")
    ax.grid(axis="x", visible=False)
    lo = min(v for _, vals in groups for v in vals.values())
    hi = max(v for _, vals in groups for v in vals.values())
    ax.set_ylim(lo / 2, hi * 6)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncols=3, frameon=False)
    cfg = data.get("config", {})
    ax.set_title(
        f"{cfg.get('layers', '?')}-layer decoder, hidden {cfg.get('hidden', '?')}, "
        f"context {cfg.get('context', '?')}: ours against PyTorch ({_gpu(data)})",
        loc="left",
        fontsize=9,
    )
