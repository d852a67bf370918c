"""Speculative decoding's verify step: k new tokens of a sequence against its KV cache.

A draft model proposes tokens; the target model checks them in one forward step over k new
positions (in the usual scheme, the last accepted token and k - 1 drafts), in which token i
attends over the T cached positions and the new positions 0..i (causal within the step). Every
case here is batch 1, 32 query heads over 8 KV heads (4 query heads a KV head), head dim 128,
bf16 in and out. "Draft token i" below means new position i.

Two benchmarks:

- `k_decodes` (00): the baseline, attention/04's single-token split-KV decode launched k times,
  draft token i's queries against a T-token cache: the cost of checking k tokens one at a time;
- `verify` (01-05): the k x 4 query rows of each KV head against the cache of T + k positions
  (the drafts' K and V already appended), draft i masked past position T + i.

Layouts: verify q and out are [B, Hq, k, D] (SDPA's [B, H, Sq, D], so the k x 4 rows of one KV
head are contiguous), the cache K and V [B, Hkv, T + k, D]; the baseline's q and out are
[k, B, Hq, D] (one decode's [B, Hq, D] a draft token) over a cache [B, Hkv, T, D].

Shapes are `k` (new tokens) and `t` (cached tokens). The k sweep at T = 32768 is declared as
{k, t}; the T sweep at smaller contexts as {t, k}, so a `sweep` chart with `x: k` draws the k
sweep alone (it keeps the most common key order). Cite them as `@k=4,t=32768` and `@t=4096,k=4`.

Every verify case is compared with PyTorch's SDPA on the same arrays, each backend with an
explicit boolean mask [k, T + k] and with `causal_lower_right` (the causal mask aligned to the
last key, which is what a verify step needs; `is_causal=True` aligns to the first and would be
wrong), grouped heads through `enable_gqa`. A backend that refuses is recorded with its reason.

The decode kernel, its split plan, the bf16 helpers and the float64 decode reference come from
kernels/attention/suite.py, imported, not copied. The baseline's .cu includes attention/04, so an
edit of 04 marks 00 stale; an edit of attention/suite.py does not (the fingerprint covers this
topic's suite.py only).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from curriculum.bench import kit
from curriculum.bench.api import (
    Arrays,
    Benchmark,
    LibraryBaseline,
    OutputSpec,
    Roofline,
    Shape,
    Suite,
    Version,
)

HERE = Path(__file__).resolve().parent


def _attention_suite() -> ModuleType:
    """kernels/attention/suite.py, as the bench loads it (the loaded module if there is one)."""
    name = "curriculum_suite_attention"
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    path = HERE.parent / "attention" / "suite.py"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


attention = _attention_suite()

B = 1
HQ = 32
HKV = 8
D = attention.HEAD_DIM
GROUP = attention.GROUP  # query heads a KV head
LOG2E = attention.LOG2E
MAX_DRAFT = 8  # 01: shared memory sized for 8 new tokens; 02-04: one 8-token masked step
T_MULTIPLE = attention.DECODE_T_MULTIPLE
THREADS = 256
MERGE_THREADS = D // 2
MMA_ROWS = 16  # 02-04: query rows a CTA, one m16 tile of the tensor-core product
MERGE_MAX_SPLITS = 64  # 04-05: ranges the last CTA's merge weighs in shared memory

# --- shapes -----------------------------------------------------------------------------

HEADLINE_T = 32768
K_VALUES = (1, 2, 3, 4, 6, 8)
K_SWEEP: tuple[dict[str, int], ...] = tuple({"k": k, "t": HEADLINE_T} for k in K_VALUES)
T_SWEEP: tuple[dict[str, int], ...] = tuple({"t": t, "k": k} for t in (1024, 4096) for k in (1, 4))
SHAPES = K_SWEEP + T_SWEEP
HEADLINE: dict[str, int] = {"k": 4, "t": HEADLINE_T}
# Checked, never timed: several splits, an odd k, a last split holding cached and draft tokens.
CHECK_SHAPES: tuple[dict[str, int], ...] = ({"k": 5, "t": 192},)


def problems(stem: str, shape: Shape) -> list[str]:
    """Why a version would refuse `shape`; empty when it fits."""
    out = []
    k, t = shape["k"], shape["t"]
    if t % T_MULTIPLE or t <= 0:
        out.append(f"T={t} is not a positive multiple of {T_MULTIPLE}")
    if not 1 <= k <= MAX_DRAFT:
        out.append(f"k={k} is outside 1..{MAX_DRAFT}")
    return out


def _require_fit(version: Version, shape: Shape) -> None:
    found = problems(version.stem, shape)
    if found:
        raise ValueError(f"{version.id}: " + "; ".join(found))


@dataclass(frozen=True)
class VerifyPlan:
    """How 01 and 02 cut the work: `splits` ranges of `tokens_per_split` cached tokens (the
    last range also takes the k draft positions) and, for 02, `row_blocks` CTAs of up to 16
    query rows a (KV head, range)."""

    splits: int
    tokens_per_split: int
    rows: int  # query rows a KV head: 4 heads x k drafts
    row_blocks: int

    @property
    def ctas(self) -> int:
        return self.splits * self.row_blocks * B * HKV

    @property
    def states(self) -> int:
        """Partial states written: one a (query row, range)."""
        return B * HKV * self.rows * self.splits


def plan_verify(
    k: int, t: int, sm_count: int, rows_per_cta: int | None = None, ctas_per_sm: int = 2
) -> VerifyPlan:
    """As many ranges as fit one wave of `ctas_per_sm` resident CTAs an SM (at least one):
    a second, partial wave would leave most SMs idle while it runs. A range is a multiple of
    the 64-token CTA step; the last may be shorter but is never empty."""
    if not 1 <= k <= MAX_DRAFT:
        raise ValueError(f"k={k} is outside 1..{MAX_DRAFT}")
    rows = GROUP * k
    blocks = 1 if rows_per_cta is None else -(-rows // rows_per_cta)
    want = max(1, ctas_per_sm * sm_count // (B * HKV * blocks))
    per = -(-t // want)
    per = max(T_MULTIPLE, -(-per // T_MULTIPLE) * T_MULTIPLE)
    return VerifyPlan(-(-t // per), per, rows, blocks)


# 02-04: (entry for at most 8 rows a KV head, entry for blocks of 16 rows)
TENSOR_CORE_ENTRIES = {
    "02_tensor_core": ("verify_mma8", "verify_mma16"),
    "03_one_launch": ("verify_fused8", "verify_fused16"),
    "04_in_flight": ("verify_staged8", "verify_staged16"),
}
# the last CTA of a row block (05: of a range) merges
ONE_LAUNCH = ("03_one_launch", "04_in_flight", "05_one_range")


def plan_for(stem: str, k: int, t: int, sm_count: int) -> tuple[str, VerifyPlan]:
    """The main kernel's entry and its plan: 01 two CTAs an SM; 02-04 two for blocks of at
    most 8 rows (k <= 2), one for blocks of 16, whose state needs 168 registers a thread (206
    with 04's second stage). A plan has at most 2 x SMs / 8 ranges (33 on 132 SMs)."""
    if stem == "01_one_pass":
        return "verify_partial", plan_verify(k, t, sm_count)
    if stem in TENSOR_CORE_ENTRIES:
        small, large = TENSOR_CORE_ENTRIES[stem]
        if GROUP * k <= 8:
            return small, plan_verify(k, t, sm_count, 8)
        return large, plan_verify(k, t, sm_count, MMA_ROWS, ctas_per_sm=1)
    if stem == "05_one_range":  # as 04 up to 16 rows; both 16-row blocks in one CTA above
        if GROUP * k <= 8:
            return "verify_span8", plan_verify(k, t, sm_count, 8)
        if GROUP * k <= MMA_ROWS:
            return "verify_span16", plan_verify(k, t, sm_count, MMA_ROWS, ctas_per_sm=1)
        return "verify_span32", plan_verify(k, t, sm_count, 2 * MMA_ROWS, ctas_per_sm=1)
    raise KeyError(f"verify: no launch for {stem}")


# --- inputs and references ------------------------------------------------------------------


def _verify_inputs(shape: Shape, rng: Any) -> Arrays:
    k, t = shape["k"], shape["t"]
    normal = attention._normal_bf16
    return {
        "q": normal(rng, (B, HQ, k, D)),
        "k": normal(rng, (B, HKV, t + k, D)),
        "v": normal(rng, (B, HKV, t + k, D)),
    }


def draft_mask(xp: Any, k: int, t: int) -> Any:
    """[k, T + k] booleans: draft i sees positions 0..T+i."""
    return xp.arange(t + k)[None, :] <= t + xp.arange(k)[:, None]


def verify_reference(inputs64: Arrays, shape: Shape) -> Arrays:
    """softmax(q K^T / sqrt(D) masked) V in float64: [B, Hq, k, D]."""
    k, t = shape["k"], shape["t"]
    xp = attention.array_module(inputs64["q"])
    q = attention.bf16_bits_to_float64(inputs64["q"]).reshape(B, HKV, GROUP * k, D)
    kc = attention.bf16_bits_to_float64(inputs64["k"])
    vc = attention.bf16_bits_to_float64(inputs64["v"])
    scores = (q @ xp.swapaxes(kc, -1, -2)) / math.sqrt(D)  # [B, Hkv, 4k, T + k]
    visible = xp.tile(draft_mask(xp, k, t), (GROUP, 1))  # row r = (head r // k, draft r % k)
    scores = xp.where(visible, scores, -xp.inf)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = xp.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return {"out": (weights @ vc).reshape(B, HQ, k, D)}


def _decodes_inputs(shape: Shape, rng: Any) -> Arrays:
    k, t = shape["k"], shape["t"]
    normal = attention._normal_bf16
    return {
        "q": normal(rng, (k, B, HQ, D)),
        "k": normal(rng, (B, HKV, t, D)),
        "v": normal(rng, (B, HKV, t, D)),
    }


def _decode_shape(t: int) -> dict[str, int]:
    return {"b": B, "hq": HQ, "hkv": HKV, "t": t, "d": D}


def decodes_reference(inputs64: Arrays, shape: Shape) -> Arrays:
    """attention's float64 decode reference, once a draft token: [k, B, Hq, D]."""
    xp = attention.array_module(inputs64["q"])
    one = _decode_shape(shape["t"])
    outs = [
        attention.decode_reference({"q": qi, "k": inputs64["k"], "v": inputs64["v"]}, one)["out"]
        for qi in inputs64["q"]
    ]
    return {"out": xp.stack(outs)}


# --- work models ----------------------------------------------------------------------------


def visible_pairs(k: int, t: int) -> int:
    """(draft, position) pairs a query head attends: draft i sees T + i + 1 positions."""
    return k * t + k * (k + 1) // 2


def verify_flops(shape: Shape) -> float:
    """4 D a visible (query row, position) pair: a score and a weighted V row."""
    return 4.0 * B * HQ * D * visible_pairs(shape["k"], shape["t"])


def verify_bytes(shape: Shape) -> float:
    """K and V of T + k positions read once; q read and out written once; bf16."""
    k, t = shape["k"], shape["t"]
    return float(2 * B * HKV * (t + k) * D * 2 + 2 * B * HQ * k * D * 2)


def decodes_flops(shape: Shape) -> float:
    return shape["k"] * attention.decode_flops(_decode_shape(shape["t"]))


def decodes_bytes(shape: Shape) -> float:
    """k decodes, each reading the whole cache: k times attention's decode bytes."""
    return shape["k"] * attention.decode_bytes(_decode_shape(shape["t"]))


# --- launching ------------------------------------------------------------------------------


def _launch_decodes(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    """Draft token i: one launch of attention/04's split_kv on q[i], writing out[i]."""
    import numpy

    _require_fit(version, shape)
    t = shape["t"]
    plan = attention.plan_splits(t, B * HKV, attention._sms())
    states = B * HQ * plan.splits
    parts = (
        attention._buffer("part_m", states),
        attention._buffer("part_l", states),
        attention._buffer("part_acc", states * D),
    )
    sizes = (
        numpy.int32(t),
        numpy.int32(plan.tokens_per_split),
        numpy.float32(LOG2E / math.sqrt(D)),
    )
    fn = kit.kernel(module, "split_kv")
    for i in range(shape["k"]):
        fn(
            (plan.splits, HKV, B), (THREADS,),
            (arrays["q"][i], arrays["k"], arrays["v"], *parts, arrays["out"][i], *sizes),
        )  # fmt: skip


def _launch_verify(module: Any, version: Version, shape: Shape, arrays: Arrays) -> None:
    """01: one CTA a (range, KV head) for all 4k rows; 02-04: one a (row block, range, KV
    head); 05: as 04, but one CTA for both 16-row blocks of a range. 01 and 02 write partial
    states and a second launch merges each row's ranges; in 03-05 the last CTA to finish
    merges them."""
    import numpy

    _require_fit(version, shape)
    k, t = shape["k"], shape["t"]
    entry, plan = plan_for(version.stem, k, t, attention._sms())
    if version.stem in ("04_in_flight", "05_one_range") and plan.splits > MERGE_MAX_SPLITS:
        raise ValueError(f"{version.id}: {plan.splits} ranges; its merge holds {MERGE_MAX_SPLITS}")
    if version.stem == "01_one_pass":
        grid: tuple[int, ...] = (plan.splits, HKV, B)
    else:
        grid = (plan.row_blocks, plan.splits, B * HKV)
    parts = (
        attention._buffer("verify_m", plan.states),
        attention._buffer("verify_l", plan.states),
        attention._buffer("verify_acc", plan.states * D),
    )
    sizes = (numpy.int32(t), numpy.int32(k), numpy.int32(plan.tokens_per_split))
    scale = numpy.float32(LOG2E / math.sqrt(D))
    cache = (arrays["q"], arrays["k"], arrays["v"])
    if version.stem in ONE_LAUNCH:
        kit.kernel(module, entry)(grid, (THREADS,), (*cache, *parts, arrays["out"], *sizes, scale))
        return
    kit.kernel(module, entry)(grid, (THREADS,), (*cache, *parts, *sizes, scale))
    kit.kernel(module, "verify_merge")(
        (B * HQ * k,), (MERGE_THREADS,), (*parts, arrays["out"], numpy.int32(plan.splits))
    )


# --- the library baselines: SDPA with the draft's mask, every backend ------------------------

MASKS: tuple[tuple[str, str], ...] = (
    ("bool mask", "bool"),
    ("lower-right causal", "lower_right"),
)


def _sdpa_verify(backend: str, mask: str) -> Callable[[Arrays, Shape], Callable[[], None]]:
    """q [B, Hq, k, D] over the cache [B, Hkv, T + k, D], enable_gqa, with the draft's mask
    as a boolean tensor or as `causal_lower_right(k, T + k)`."""

    def make(inputs: Arrays, shape: Shape) -> Callable[[], None]:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        k, t = shape["k"], shape["t"]
        q, kc, vc = (kit.torch_view(inputs[n]) for n in ("q", "k", "v"))
        if backend == "MATH":
            scores = B * HQ * k * (t + k)
            if scores > kit.MATH_SDPA_MAX_SCORES:
                raise MemoryError(f"math SDPA would materialise {scores:,} scores")
        attn_mask: Any
        if mask == "bool":
            attn_mask = draft_mask(torch, k, t).to(q.device)
        else:
            from torch.nn.attention.bias import causal_lower_right

            attn_mask = causal_lower_right(k, t + k)
        member = getattr(SDPBackend, backend)

        def op() -> None:
            with sdpa_kernel(member):
                F.scaled_dot_product_attention(q, kc, vc, attn_mask=attn_mask, enable_gqa=True)

        return kit.warmed(kit.on_cupy_stream(op))

    return make


SDPA_VERIFY = tuple(
    LibraryBaseline(name=f"{name}, {mask_name}", make=_sdpa_verify(backend, mask))
    for mask_name, mask in MASKS
    for name, backend in kit.SDPA_BACKENDS
)

# --- the suite ------------------------------------------------------------------------------

VERIFY_WORK = (
    "FLOPs 4*B*Hq*D*(k*T + k(k+1)/2): a score and a weighted V row per visible (query row, "
    "position) pair; bytes 2*B*Hkv*(T+k)*D*2 + 2*B*Hq*k*D*2: bf16 K and V of T + k positions "
    "read once, q read and out written once. Partial states (B*Hq*k*splits*(D+2)*4 bytes, "
    "written and read back) are overheads, not counted"
)
DECODES_WORK = (
    "k single-token decodes over T cached tokens: k times FLOPs 4*B*Hq*T*D and bytes "
    "2*B*Hkv*T*D*2 + 2*B*Hq*D*2 (each decode reads the whole cache)"
)
TOL = 5e-3
TOL_REASON = (
    "fp32 arithmetic on the bf16 inputs the reference also uses: the bf16 rounding of the output "
    "gives about 1.1e-3 and, in 02 and 04, the bf16 rounding of P before the P V product about "
    "1e-3 more; 5e-3 leaves 2x margin and fails a dropped 8-token step or a draft position let "
    "through the mask (about 1e-2 at T = 1024)"
)

SUITE = Suite(
    topic="verify",
    description=(
        "Speculative decoding's verify step: k draft tokens a sequence attend causally over a "
        "grouped-query KV cache, against k single-token decodes and PyTorch SDPA with a mask."
    ),
    benchmarks=[
        Benchmark(
            name="k_decodes",
            match="00_*",
            inputs=_decodes_inputs,
            outputs={"out": OutputSpec(lambda s: (s["k"], B, HQ, D), "uint16")},
            reference=decodes_reference,
            launch=_launch_decodes,
            flops=decodes_flops,
            bytes=decodes_bytes,
            work_convention=DECODES_WORK,
            tolerance=TOL,
            tolerance_reason=TOL_REASON,
            shapes=SHAPES,
            headline=HEADLINE,
            roofline=Roofline(bandwidth="copy"),
            compile_options=("--std=c++17", "-arch=sm_90", f"-I{HERE}"),
            compare=kit.compare_bf16,
            check_shapes=CHECK_SHAPES,
        ),
        Benchmark(
            name="verify",
            match="0[1-9]_*",
            inputs=_verify_inputs,
            outputs={"out": OutputSpec(lambda s: (B, HQ, s["k"], D), "uint16")},
            reference=verify_reference,
            launch=_launch_verify,
            flops=verify_flops,
            bytes=verify_bytes,
            work_convention=VERIFY_WORK,
            tolerance=TOL,
            tolerance_reason=TOL_REASON,
            shapes=SHAPES,
            headline=HEADLINE,
            roofline=Roofline(bandwidth="copy"),
            baselines=SDPA_VERIFY,
            compare=kit.compare_bf16,
            check_shapes=CHECK_SHAPES,
        ),
    ],
)
