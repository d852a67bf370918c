"""The arithmetic of the collectives runner, free of torch and of any GPU.

`run.py` measures NCCL's all-reduce, all-gather and reduce-scatter and one tensor-parallel
decode layer on every GPU of one host; everything here is what it computes around the
measurement, so it is tested on a machine without a GPU:

- the message sizes (powers of two, 1 KiB to 1 GiB by default) and the buffer each rank holds
  for a message of that size;
- algorithm and bus bandwidth. Algorithm bandwidth is the message size over the time. Bus
  bandwidth rescales it to what each GPU's links carry in a ring, so it can be compared with
  the link's nominal bandwidth whatever the number of GPUs: an all-reduce moves
  2(n-1)/n of the message through every GPU (reduce-scatter, then all-gather), an all-gather or
  a reduce-scatter (n-1)/n of it. The message size of an all-gather is its output, of a
  reduce-scatter its input (the convention of nccl-tests);
- the shards of a Llama-like decode layer split across n GPUs: attention and MLP input
  projections by columns (heads, and MLP width), output projections by rows, so each half of
  the layer ends in one all-reduce of the activations;
- the document the runner writes, and its validation (`Document`, `validate_text`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

FORMAT = 1
OPS = ("all_reduce", "all_gather", "reduce_scatter")
Op = Literal["all_reduce", "all_gather", "reduce_scatter"]
KIB = 1024
GIB = 1024**3

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


# --- message sizes and bandwidth ----------------------------------------------------------


def size_ladder(lo: int = KIB, hi: int = GIB) -> list[int]:
    """Every power of two from `lo` to `hi` bytes, both included (both must be powers of two)."""
    for name, v in (("lo", lo), ("hi", hi)):
        if v < 1 or v & (v - 1):
            raise ValueError(f"{name}={v} is not a power of two")
    if lo > hi:
        raise ValueError(f"lo={lo} is above hi={hi}")
    return [1 << k for k in range(lo.bit_length() - 1, hi.bit_length())]


def bus_factor(op: str, n: int) -> float:
    """Bytes through each GPU's links per byte of message, in a ring of n GPUs."""
    if n < 1:
        raise ValueError(f"world size {n} is below 1")
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    raise ValueError(f"unknown collective {op!r}; one of {', '.join(OPS)}")


def algbw_gbps(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth: message bytes over time, in GB/s (1e9 bytes a second)."""
    if seconds <= 0:
        raise ValueError("time must be positive")
    return nbytes / seconds / 1e9


def busbw_gbps(op: str, n: int, nbytes: int, seconds: float) -> float:
    """Bus bandwidth: algorithm bandwidth times the op's bus factor (0 on one GPU)."""
    return algbw_gbps(nbytes, seconds) * bus_factor(op, n)


def buffer_elems(op: str, nbytes: int, n: int, elem_bytes: int = 2) -> tuple[int, int]:
    """Elements of each rank's (input, output) buffer for a message of about `nbytes`.

    The message is rounded down to a whole number of elements per rank; `message_bytes`
    gives the size actually moved, which is what bandwidths are computed from."""
    per_rank = nbytes // (n * elem_bytes)
    if per_rank < 1:
        raise ValueError(f"{nbytes} bytes over {n} ranks is less than one element each")
    total = per_rank * n
    if op == "all_reduce":
        return total, total
    if op == "all_gather":
        return per_rank, total
    if op == "reduce_scatter":
        return total, per_rank
    raise ValueError(f"unknown collective {op!r}; one of {', '.join(OPS)}")


def message_bytes(op: str, nbytes: int, n: int, elem_bytes: int = 2) -> int:
    """The bytes a message of about `nbytes` really moves (see `buffer_elems`)."""
    inp, out = buffer_elems(op, nbytes, n, elem_bytes)
    return max(inp, out) * elem_bytes


def calls_per_sample(nbytes: int) -> int:
    """Back-to-back calls timed as one sample, so a small message's sample is not all event
    overhead: 64 up to 2 KiB, halving as the size doubles, one from 128 KiB up. The same on every
    rank, since every rank must issue the same collectives."""
    return max(1, min(64, (128 * KIB) // max(nbytes, 1)))


def ring_allreduce_us(nbytes: float, n: int, alpha_us: float, link_gbps: float) -> float:
    """The alpha-beta time of a ring all-reduce: 2(n-1) steps of latency alpha, each moving
    nbytes/n over a link of `link_gbps` (one direction)."""
    if n == 1:
        return 0.0
    return 2 * (n - 1) * alpha_us + bus_factor("all_reduce", n) * nbytes / (link_gbps * 1e3)


# --- the tensor-parallel layer ------------------------------------------------------------


@dataclass(frozen=True)
class LayerConfig:
    """A Llama-like decoder layer (70B-class shapes by default), BF16."""

    hidden: int = 8192
    q_heads: int = 64
    kv_heads: int = 8
    head_dim: int = 128
    ffn: int = 28672
    context: int = 4096  # cached tokens each sequence attends over
    batches: tuple[int, ...] = (1, 16, 64)
    elem_bytes: int = 2

    def weight_shapes(self) -> dict[str, tuple[int, int]]:
        """Full (in, out) shapes of the layer's matrices, y = x @ W."""
        h, d = self.hidden, self.head_dim
        return {
            "wq": (h, self.q_heads * d),
            "wk": (h, self.kv_heads * d),
            "wv": (h, self.kv_heads * d),
            "wo": (self.q_heads * d, h),
            "w_gate": (h, self.ffn),
            "w_up": (h, self.ffn),
            "w_down": (self.ffn, h),
        }

    def weight_bytes(self) -> int:
        return sum(a * b for a, b in self.weight_shapes().values()) * self.elem_bytes


# Column-parallel matrices are split along their output (heads, MLP width); row-parallel ones
# along their input, so their partial products are summed by one all-reduce.
COLUMN = ("wq", "wk", "wv", "w_gate", "w_up")
ROW = ("wo", "w_down")


def tp_check(cfg: LayerConfig, n: int) -> str | None:
    """Why the layer cannot be split n ways, or None."""
    why = []
    for name, count in (("query heads", cfg.q_heads), ("KV heads", cfg.kv_heads), ("ffn", cfg.ffn)):
        if count % n:
            why.append(f"{name} ({count}) do not divide by {n}")
    return "; ".join(why) or None


def tp_shapes(cfg: LayerConfig, n: int) -> dict[str, tuple[int, int]]:
    """Each rank's (in, out) shard of every matrix when the layer is split n ways."""
    if (why := tp_check(cfg, n)) is not None:
        raise ValueError(why)
    out = {}
    for name, (a, b) in cfg.weight_shapes().items():
        out[name] = (a, b // n) if name in COLUMN else (a // n, b)
    return out


def tp_heads(cfg: LayerConfig, n: int) -> tuple[int, int]:
    """(query heads, KV heads) each rank attends with."""
    if (why := tp_check(cfg, n)) is not None:
        raise ValueError(why)
    return cfg.q_heads // n, cfg.kv_heads // n


def tp_allreduce_bytes(cfg: LayerConfig, batch: int) -> int:
    """Bytes of one of the layer's two all-reduces: the batch's activations, hidden wide."""
    return batch * cfg.hidden * cfg.elem_bytes


def tp_weight_bytes_per_rank(cfg: LayerConfig, n: int) -> int:
    return sum(a * b for a, b in tp_shapes(cfg, n).values()) * cfg.elem_bytes


def config_dict(cfg: LayerConfig) -> dict[str, object]:
    d = asdict(cfg)
    d["batches"] = list(cfg.batches)
    d["weight_bytes"] = cfg.weight_bytes()
    return d


# --- the document ---------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Timing(_Strict):
    """Per-sample statistics, microseconds; a sample is the slowest rank's time for one call."""

    median_us: Positive
    p20_us: Positive
    p80_us: Positive
    samples: int = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> Timing:
        if not self.p20_us <= self.median_us <= self.p80_us:
            raise ValueError(
                f"percentiles out of order: p20 {self.p20_us} <= median "
                f"{self.median_us} <= p80 {self.p80_us} fails"
            )
        return self


Mode = Literal["eager", "graph"]


class CollectiveRow(_Strict):
    op: Op
    world: int = Field(ge=1)
    bytes: int = Field(gt=0, description="Message bytes moved (see model.message_bytes).")
    mode: Mode = Field(
        description="eager: issued from Python call by call, the host's cost included; "
        "graph: the same calls replayed from one CUDA graph, the GPU's time."
    )
    calls_per_sample: int = Field(ge=1)
    time: Timing
    algbw_gbps: Positive
    busbw_gbps: NonNegative

    @model_validator(mode="after")
    def _arithmetic(self) -> CollectiveRow:
        seconds = self.time.median_us * 1e-6
        for name, want in (
            ("algbw_gbps", algbw_gbps(self.bytes, seconds)),
            ("busbw_gbps", busbw_gbps(self.op, self.world, self.bytes, seconds)),
        ):
            got = getattr(self, name)
            if not math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9):
                raise ValueError(
                    f"{self.op} at {self.bytes} B: {name} {got} is not {want} from the median time"
                )
        return self


class LayerRow(_Strict):
    batch: int = Field(ge=1)
    world: int = Field(ge=1)
    mode: Literal["eager", "graph"]
    one_gpu: Timing
    split: Timing
    speedup: Positive = Field(description="one-GPU median over split median.")
    rel_err: NonNegative = Field(description="||split - one GPU|| / ||one GPU||, fp32 norms.")
    tolerance: Positive

    @model_validator(mode="after")
    def _consistent(self) -> LayerRow:
        want = self.one_gpu.median_us / self.split.median_us
        if not math.isclose(self.speedup, want, rel_tol=1e-6):
            raise ValueError(f"speedup {self.speedup} is not {want}")
        if self.rel_err > self.tolerance:
            raise ValueError(
                f"rel_err {self.rel_err} above tolerance {self.tolerance}: "
                "a failed check is never recorded"
            )
        return self


class Dropped(_Strict):
    op: Op
    bytes: int = Field(gt=0)
    mode: Mode
    why: str = Field(min_length=1)


class Layer(_Strict):
    config: dict[str, object]
    skipped: str | None = Field(default=None, description="Why the layer was not split, if so.")
    rows: list[LayerRow] = Field(default_factory=list)


class Provenance(_Strict):
    gpu_name: str = Field(min_length=1)
    gpu_count: int = Field(ge=1, description="GPUs visible on the host.")
    world: int = Field(ge=1, description="Ranks in the run, one a GPU.")
    driver: str
    torch: str
    cuda: str
    nccl: str
    date: str
    git_rev: str
    git_dirty: bool
    env: dict[str, str] = Field(description="NCCL_* variables the ranks ran with.")
    topology: str = Field(description="`nvidia-smi topo -m`, as printed.")
    seconds: NonNegative = Field(description="Wall time of the run.")


class Document(_Strict):
    format: Literal[1]
    kind: str = Field(
        pattern=r"^[a-z0-9-]+-x\d+$", description="GPU slug and count, e.g. nvidia-h200-x8."
    )
    provenance: Provenance
    timing: str
    dtype: str
    collectives: list[CollectiveRow]
    dropped: list[Dropped] = Field(
        default_factory=list, description="Sizes not recorded, and why (eager: one GPU only)."
    )
    layer: Layer

    @model_validator(mode="after")
    def _whole(self) -> Document:
        if self.provenance.env.get("NCCL_NVLS_ENABLE") != "0":
            raise ValueError("NVLink multicast (NVLS) was not off: NCCL_NVLS_ENABLE must be 0")
        n = self.provenance.world
        if not self.kind.endswith(f"-x{n}"):
            raise ValueError(f"kind {self.kind} does not end in -x{n}, the world size")
        eager = [d for d in self.dropped if d.mode == "eager"]
        if eager and n > 1:
            d = eager[0]
            raise ValueError(
                f"{len(eager)} eager sizes dropped on {n} GPUs: {d.op} at {d.bytes} B, {d.why}"
            )
        seen = set()
        for row in self.collectives:
            if row.world != n:
                raise ValueError(f"{row.op} at {row.bytes} B ran on {row.world} ranks, not {n}")
            if (row.op, row.bytes, row.mode) in seen:
                raise ValueError(f"{row.op} at {row.bytes} B ({row.mode}) appears twice")
            seen.add((row.op, row.bytes, row.mode))
        if any(r.world != n for r in self.layer.rows):
            raise ValueError(f"a layer row ran on another world size than {n}")
        return self


def kind_slug(gpu_name: str, n: int) -> str:
    """'NVIDIA H200', 8 -> 'nvidia-h200-x8' (the device tool's names for its machines)."""
    slug = "-".join("".join(c if c.isalnum() else " " for c in gpu_name.lower()).split())
    return f"{slug}-x{n}"


def validate_text(text: str) -> Document:
    """Parse and validate a document (raises ValueError, pydantic's ValidationError included)."""
    return Document.model_validate(json.loads(text))


def rows_of(doc: Document, op: str, mode: str | None = None) -> list[CollectiveRow]:
    """`op`'s rows by size, in `mode`; by default graph where the run has it, else eager."""
    rows = [r for r in doc.collectives if r.op == op]
    if mode is None:
        mode = "graph" if any(r.mode == "graph" for r in rows) else "eager"
    return sorted((r for r in rows if r.mode == mode), key=lambda r: r.bytes)


def busbw_at(doc: Document, op: str, nbytes: int, mode: str | None = None) -> float | None:
    """Bus bandwidth of `op` at the measured size nearest below or at `nbytes`."""
    rows = [r for r in rows_of(doc, op, mode) if r.bytes <= nbytes]
    return rows[-1].busbw_gbps if rows else None
