"""What torch.compile (Inductor) makes of a handful of operations, kept as text.

For each operation of `OPS` this script, on a GPU machine:

1. compiles it with `torch.compile(fn, dynamic=False)` (static shapes, as the
   suites' `torch.compile(...)` baselines do) and keeps Inductor's output code:
   the whole Python module it wrote (`<op>/output_code.txt`), each generated
   Triton kernel on its own (`<op>/<kernel>.triton`) and, where the loaded
   kernel or Triton's cache has it, its PTX in the config it ran with
   (`<op>/<kernel>.ptx`, with a count of the memory, math and sync opcodes;
   with torch 2.11 on the H200 neither place held it, and no PTX was kept);
   text suffixes, so no linter reads them as the project's Python;
2. reads that code: which Triton kernels it defines (the name's prefix gives the
   kind: `triton_poi_` pointwise, `triton_per_` persistent reduction, whole row
   in registers, `triton_red_` looped reduction, `triton_tem_` a GEMM template),
   and what `call()` launches, in order, including calls out to cuBLAS
   (`extern_kernels.mm`, `addmm`, `bmm`) and ATen fallbacks;
3. times eager PyTorch and the compiled function with the project's one timing
   function (`curriculum.bench.timing.time_call`: L2 flushed, CUDA events,
   median of repetitions after warm-up), on the stream the bench times;
4. records every GPU kernel one call launches, eager and compiled, with the
   torch profiler (`<op>/gpu_kernels.txt`), so a cuBLAS or cuDNN kernel shows by
   name;
5. writes `summary.json` (all of it, with provenance: GPU, driver, torch, Triton,
   CUDA, date, git revision) and `summary.txt` (one table a page can quote).

Every text file opens with `// ` provenance lines, as `curriculum artifacts`
writes them, so an ```artifact block can show it.

Run from the repository root (with `src` on PYTHONPATH):

    python3 kernels/inductor/capture.py --out kernels/inductor/artifacts

`--budget-s` stops before an operation that would not fit (recorded as
skipped); the files are rewritten after every operation, so a run cut short
keeps what it finished. The parsing and formatting below need no GPU and are
tested in tests/test_inductor_capture.py.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import math
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

COMMAND = "python3 kernels/inductor/capture.py --out kernels/inductor/artifacts"
SEED = 20261203
EPS = 1e-5

# --- reading Inductor's output code (no GPU needed) -----------------------------------------

KINDS = {
    "triton_poi_": "pointwise",
    "triton_per_": "persistent reduction",
    "triton_red_": "looped reduction",
    "triton_tem_": "GEMM template",
    "triton_for_": "foreach",
    "triton_spl_": "split scan",
    "triton_": "triton",
}
_DEFINE = re.compile(r"^(\w+) = async_compile\.triton\(\s*'(\w+)'", re.M)
_SOURCE = re.compile(r"^(\w+) = async_compile\.triton\(\s*'\w+',\s*'''(.*?)'''", re.M | re.S)
_EXTERN = re.compile(r"\b(extern_kernels\.\w+)\(")
_ATEN = re.compile(r"\b((?:torch\.ops\.)?aten\.\w+(?:\.\w+)?)\(")
_LAUNCH = re.compile(r"\b(triton_\w+)\.run\(")
_HEURISTIC = re.compile(r"@triton_heuristics\.(\w+)\(")
_SIZE_HINTS = re.compile(r"size_hints=(\{[^}]*\}|\[[^\]]*\])")
# ATen entry points Inductor calls for a matrix product; all go to cuBLAS or cuBLASLt on CUDA
# (`bias_addmm` is addmm with the bias added by cuBLASLt's epilogue).
CUBLAS_CALLS = ("mm", "addmm", "bias_addmm", "bmm", "baddbmm", "_int_mm", "_scaled_mm")


def kernel_kind(name: str) -> str:
    """The kind of a generated Triton kernel, read from its name's prefix."""
    for prefix, kind in KINDS.items():
        if name.startswith(prefix):
            return kind
    return "other"


def kernel_sources(code: str) -> dict[str, str]:
    """Each `async_compile.triton(...)` kernel's source, by name, in definition order."""
    return {m.group(1): m.group(2).strip("\n") + "\n" for m in _SOURCE.finditer(code)}


def wrapper_code(code: str) -> str:
    """The Python that launches the kernels: the module without the kernels' sources, its
    comments, and the helpers after `call` (`get_args`, `benchmark_compiled_module`)."""
    text = re.sub(r"'''.*?'''", "''", code, flags=re.S)
    out = []
    for line in text.splitlines():
        if re.match(r"def (get_args|benchmark_compiled_module)\(", line):
            break
        if not line.lstrip().startswith("#"):
            out.append(line)
    return "\n".join(out)


class Skipped(Exception):
    """An op this torch cannot compile as asked (an Inductor option it does not have)."""


@dataclass
class Launch:
    """One thing `call()` runs: a generated Triton kernel, a cuBLAS call, an ATen op."""

    kind: str  # "triton", "extern" or "aten"
    name: str


def launches(code: str) -> list[Launch]:
    """What the wrapper launches, in order (in `call`, or in graph partitions it calls)."""
    found: list[tuple[int, Launch]] = []
    body = wrapper_code(code)
    for m in _LAUNCH.finditer(body):
        found.append((m.start(), Launch("triton", m.group(1))))
    for m in _EXTERN.finditer(body):
        found.append((m.start(), Launch("extern", m.group(1))))
    for m in _ATEN.finditer(body):
        if not body[: m.start()].endswith("."):  # not the tail of a longer dotted name
            found.append((m.start(), Launch("aten", m.group(1))))
    return [launch for _, launch in sorted(found, key=lambda t: t[0])]


def calls_cublas(found: Sequence[Launch]) -> bool:
    """Whether `call()` hands a matrix product to ATen's cuBLAS path."""
    return any(
        launch.kind == "extern" and launch.name.rsplit(".", 1)[-1] in CUBLAS_CALLS
        for launch in found
    )


@dataclass
class KernelInfo:
    name: str
    kind: str
    heuristic: str  # pointwise, reduction, persistent_reduction, template, ...
    size_hints: str


def kernel_infos(code: str) -> list[KernelInfo]:
    """Each generated Triton kernel: name, kind, the heuristic family and its size hints."""
    infos = []
    for name, src in kernel_sources(code).items():
        h = _HEURISTIC.search(src)
        s = _SIZE_HINTS.search(src)
        infos.append(
            KernelInfo(name, kernel_kind(name), h.group(1) if h else "", s.group(1) if s else "")
        )
    for m in _DEFINE.finditer(code):  # a kernel whose source the regex above missed
        if m.group(1) not in {i.name for i in infos}:
            infos.append(KernelInfo(m.group(1), kernel_kind(m.group(1)), "", ""))
    return infos


def gpu_kernel_family(name: str) -> str:
    """Who wrote a GPU kernel, read from its name as the profiler reports it (first match)."""
    low = name.lower()
    for needles, family in GPU_FAMILIES:
        if any(n in low for n in needles):
            return family
    return "ATen"


GPU_FAMILIES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("triton",), "Triton"),
    (("cudnn",), "cuDNN"),
    (("flash",), "FlashAttention"),
    (("fmha",), "mem-efficient SDPA"),
    (("nvjet", "cublas", "gemm", "xmma", "cutlass"), "cuBLAS"),
    (("memset", "memcpy"), "copy/memset"),
)


_OPCODE = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)")
# The instruction families a page reads in a bandwidth-bound kernel: memory, math, sync.
PTX_SHOWN = (
    "ld.global",
    "st.global",
    "ld.shared",
    "st.shared",
    "ex2",
    "lg2",
    "div",
    "rcp",
    "rsqrt",
    "sqrt",
    "shfl",
    "bar",
    "red",
    "atom",
    "cp.async",
    "mma",
    "wgmma",
)


def ptx_counts(ptx: str) -> dict[str, int]:
    """Static count of each PTX opcode of the families in PTX_SHOWN, most frequent first."""
    counts: dict[str, int] = {}
    for line in ptx.splitlines():
        m = _OPCODE.match(line)
        if m and m.group(1).startswith(PTX_SHOWN):
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


# --- the files it writes --------------------------------------------------------------------


def header(lines: Sequence[str]) -> str:
    """`// ` provenance lines, the form an ```artifact block reads."""
    return "".join(f"// {ln}\n" for ln in lines)


def stamp_line(prov: dict[str, Any]) -> str:
    return (
        f"{prov.get('gpu', '?')}, torch {prov.get('torch', '?')}, Triton "
        f"{prov.get('triton', '?')}, CUDA {prov.get('cuda', '?')}, "
        f"{str(prov.get('date', '?'))[:10]}, git {prov.get('git_rev', '?')}"
    )


def fmt_us(ms: float | None) -> str:
    return "-" if ms is None or not math.isfinite(ms) else f"{ms * 1e3:.1f}"


def short_call(name: str) -> str:
    """`extern_kernels.bias_addmm` -> `bias_addmm`; `torch.ops.aten.x.default` -> `aten.x`."""
    for prefix in ("extern_kernels.", "torch.ops."):
        name = name.removeprefix(prefix)
    return name.removesuffix(".default")


def summary_table(records: Sequence[dict[str, Any]]) -> str:
    """One line an operation: kernels generated and launched, cuBLAS, eager and compiled time."""
    cols = (
        "op",
        "eager us",
        "compiled us",
        "eager/compiled",
        "GPU kernels eager",
        "GPU kernels compiled",
        "cuBLAS",
        "library calls",
        "generated Triton kernels",
    )
    rows = []
    for r in records:
        if r.get("status") != "ok":
            rows.append((r["op"], "-", "-", "-", "-", "-", "-", "-", r.get("status", "")))
            continue
        e, c = r["eager"]["median_ms"], r["compiled"]["median_ms"]
        kinds = ", ".join(f"{k['name']} ({k['kind']})" for k in r["kernels"]) or "none"
        rows.append(
            (
                r["op"],
                fmt_us(e),
                fmt_us(c),
                f"{e / c:.2f}x" if c else "-",
                str(len(r["gpu_kernels"]["eager"])),
                str(len(r["gpu_kernels"]["compiled"])),
                "yes" if r["cublas"] else "no",
                ", ".join(
                    short_call(x["name"]) for x in r.get("launches", []) if x["kind"] != "triton"
                )
                or "-",
                kinds,
            )
        )
    widths = [
        max(len(c), *(len(row[i]) for row in rows)) if rows else len(c)
        for i, c in enumerate(cols[:-1])
    ]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(cols[:-1], widths, strict=True)) + "  " + cols[-1]
    ]
    for row in rows:
        lines.append(
            "  ".join(v.ljust(w) for v, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        )
    return "\n".join(line.rstrip() for line in lines) + "\n"


def gpu_kernel_lines(kernels: Sequence[dict[str, Any]]) -> list[str]:
    """`family  duration  name`, one kernel a line, in launch order."""
    return [f"{k['family']:<22} {k['us']:>9.1f} us  {k['name']}" for k in kernels]


def config_lines(configs: dict[str, list[dict[str, Any]]]) -> list[str]:
    """`name: XBLOCK=1 R0_BLOCK=4096, 16 warps, 1 stage, 40 registers, 0 spills`, a line each."""
    lines = []
    for name, rows in configs.items():
        for row in rows:
            block = " ".join(f"{k}={v}" for k, v in row.get("block", {}).items())
            parts = [block] if block else []
            for key, unit in (
                ("num_warps", "warps"),
                ("num_stages", "stages"),
                ("registers", "registers"),
                ("spills", "spills"),
                ("shared_bytes", "B shared"),
            ):
                if row.get(key) is not None:
                    parts.append(f"{row[key]} {unit}")
            lines.append(f"config {name}: {', '.join(parts)}")
    return lines


# --- the operations -------------------------------------------------------------------------


@dataclass
class Op:
    """One operation: its function, inputs, the mode it is compiled in, and why it is here."""

    name: str
    title: str
    shape: dict[str, int]
    dtype: str
    make: Callable[[Any], tuple[Any, ...]]  # torch -> inputs
    fn: Callable[..., Any]
    mode: str | None = None  # torch.compile mode; None is the default
    compare: str = ""  # the suite case a page sets it beside
    budget_s: float = 8.0  # expected compile + time + profile, for --budget-s
    tolerance: float = 2e-2  # max |compiled - eager| / max(1, |eager|)
    config: dict[str, Any] = field(default_factory=dict)  # Inductor options while compiling


def _f(dtype_name: str) -> Any:
    import torch

    return {"f32": torch.float32, "bf16": torch.bfloat16}[dtype_name]


def _randn(
    torch: Any,
    *shape: int,
    dtype: str = "f32",
    scale: float = 1.0,
    shift: float = 0.0,
    gen: Any = None,
) -> Any:
    x = torch.randn(*shape, device="cuda", generator=gen, dtype=torch.float32) * scale + shift
    return x.to(_f(dtype))


def _gen(torch: Any) -> Any:
    return torch.Generator(device="cuda").manual_seed(SEED)


def layer_norm(x: Any, gamma: Any, beta: Any) -> Any:
    import torch.nn.functional as F

    return F.layer_norm(x, (x.shape[-1],), weight=gamma, bias=beta, eps=EPS)


def rms_norm(x: Any, gamma: Any) -> Any:
    import torch.nn.functional as F

    return F.rms_norm(x, (x.shape[-1],), weight=gamma, eps=EPS)


def softmax(x: Any) -> Any:
    import torch

    return torch.softmax(x, dim=-1)


def swiglu(gate: Any, up: Any) -> Any:
    import torch.nn.functional as F

    return F.silu(gate) * up


def linear_gelu(x: Any, w: Any, b: Any) -> Any:
    import torch.nn.functional as F

    return F.gelu(F.linear(x, w, b))


def rmsnorm_linear(x: Any, gamma: Any, w: Any) -> Any:
    import torch.nn.functional as F

    return F.linear(F.rms_norm(x, (x.shape[-1],), weight=gamma, eps=EPS), w)


def attention_naive(q: Any, k: Any, v: Any) -> Any:
    import torch

    scale = 1.0 / math.sqrt(q.shape[-1])
    return torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v


def attention_fp32_softmax(q: Any, k: Any, v: Any) -> Any:
    """The form model code often has: scores and softmax in fp32, cast back for P @ V."""
    import torch

    scale = 1.0 / math.sqrt(q.shape[-1])
    s = (q @ k.transpose(-2, -1)).float() * scale
    return torch.softmax(s, dim=-1).to(v.dtype) @ v


def _norm_inputs(dtype: str, rows: int, cols: int, bias: bool) -> Callable[[Any], tuple[Any, ...]]:
    def make(torch: Any) -> tuple[Any, ...]:
        g = _gen(torch)
        x = _randn(torch, rows, cols, dtype=dtype, gen=g)
        gamma = _randn(torch, cols, dtype=dtype, scale=0.25, shift=1.0, gen=g)
        if not bias:
            return (x, gamma)
        return (x, gamma, _randn(torch, cols, dtype=dtype, scale=0.5, gen=g))

    return make


def _rows_inputs(dtype: str, rows: int, cols: int) -> Callable[[Any], tuple[Any, ...]]:
    def make(torch: Any) -> tuple[Any, ...]:
        return (_randn(torch, rows, cols, dtype=dtype, gen=_gen(torch)),)

    return make


def _swiglu_inputs(tokens: int, d: int) -> Callable[[Any], tuple[Any, ...]]:
    def make(torch: Any) -> tuple[Any, ...]:
        g = _gen(torch)
        return (
            _randn(torch, tokens, d, dtype="bf16", gen=g),
            _randn(torch, tokens, d, dtype="bf16", gen=g),
        )

    return make


def _linear_inputs(m: int, n: int, k: int, norm: bool) -> Callable[[Any], tuple[Any, ...]]:
    def make(torch: Any) -> tuple[Any, ...]:
        g = _gen(torch)
        x = _randn(torch, m, k, dtype="bf16", gen=g)
        w = _randn(torch, n, k, dtype="bf16", scale=1.0 / math.sqrt(k), gen=g)
        if norm:
            return (x, _randn(torch, k, dtype="bf16", scale=0.25, shift=1.0, gen=g), w)
        return (x, w, _randn(torch, n, dtype="bf16", scale=0.5, gen=g))

    return make


def _attention_inputs(b: int, h: int, s: int, d: int) -> Callable[[Any], tuple[Any, ...]]:
    def make(torch: Any) -> tuple[Any, ...]:
        g = _gen(torch)
        return tuple(_randn(torch, b, h, s, d, dtype="bf16", gen=g) for _ in range(3))

    return make


ROWS, COLS = 32768, 4096  # the norm and softmax suites' headline shape
ATT = {"b": 1, "h": 16, "s": 2048, "d": 128}  # attention/01_naive's headline shape
GEMM = {"m": 4096, "n": 4096, "k": 4096}

# In the order a short run should keep them: --budget-s skips from the end.
OPS: tuple[Op, ...] = (
    Op(
        "layernorm_f32",
        "F.layer_norm, fp32, gamma and beta",
        {"rows": ROWS, "cols": COLS},
        "f32",
        _norm_inputs("f32", ROWS, COLS, True),
        layer_norm,
        compare="layernorm/07_persistent",
        tolerance=1e-4,
    ),
    Op(
        "softmax_bf16",
        "torch.softmax over rows, bf16 in and out",
        {"rows": ROWS, "cols": COLS},
        "bf16",
        _rows_inputs("bf16", ROWS, COLS),
        softmax,
        compare="softmax/04_block_row_bf16",
    ),
    Op(
        "softmax_bf16_fast_math",
        "torch.softmax over rows, bf16, Inductor's use_fast_math (exp2 with flush to zero)",
        {"rows": ROWS, "cols": COLS},
        "bf16",
        _rows_inputs("bf16", ROWS, COLS),
        softmax,
        compare="softmax/04_block_row_bf16",
        config={"use_fast_math": True},
    ),
    Op(
        "softmax_bf16_narrow",
        "torch.softmax over rows of 1024, bf16 in and out",
        {"rows": 131072, "cols": 1024},
        "bf16",
        _rows_inputs("bf16", 131072, 1024),
        softmax,
        compare="softmax/04_block_row_bf16",
    ),
    Op(
        "softmax_f32_wide",
        "torch.softmax, fp32, rows of 32768",
        {"rows": 4096, "cols": 32768},
        "f32",
        _rows_inputs("f32", 4096, 32768),
        softmax,
        compare="softmax/03_block_row",
        tolerance=1e-5,
    ),
    Op(
        "swiglu_bf16",
        "F.silu(gate) * up, bf16",
        {"tokens": 8192, "d": 28672},
        "bf16",
        _swiglu_inputs(8192, 28672),
        swiglu,
        compare="swiglu/02_fused",
    ),
    Op(
        "linear_gelu_bf16",
        "F.gelu(F.linear(x, w, b)), bf16, default mode",
        GEMM,
        "bf16",
        _linear_inputs(4096, 4096, 4096, False),
        linear_gelu,
        compare="gemm/12_wgmma_tma",
    ),
    Op(
        "attention_naive_bf16",
        "softmax(Q K^T * scale) V written out, bf16",
        ATT,
        "bf16",
        _attention_inputs(1, 16, 2048, 128),
        attention_naive,
        compare="attention/02_flash_fwd",
    ),
    Op(
        "linear_gelu_bf16_autotune",
        "F.gelu(F.linear(x, w, b)), bf16, max-autotune",
        GEMM,
        "bf16",
        _linear_inputs(4096, 4096, 4096, False),
        linear_gelu,
        mode="max-autotune-no-cudagraphs",
        compare="gemm/12_wgmma_tma",
        budget_s=45.0,
    ),
    Op(
        "attention_fp32_softmax_bf16",
        "Q K^T in bf16, softmax in fp32, cast back for P V",
        ATT,
        "bf16",
        _attention_inputs(1, 16, 2048, 128),
        attention_fp32_softmax,
        compare="attention/02_flash_fwd",
    ),
    Op(
        "layernorm_bf16",
        "F.layer_norm, bf16 in and out",
        {"rows": ROWS, "cols": COLS},
        "bf16",
        _norm_inputs("bf16", ROWS, COLS, True),
        layer_norm,
        compare="layernorm/08_persistent_bf16",
    ),
    Op(
        "rmsnorm_bf16",
        "F.rms_norm, bf16 in and out",
        {"rows": ROWS, "cols": COLS},
        "bf16",
        _norm_inputs("bf16", ROWS, COLS, False),
        rms_norm,
        compare="rmsnorm/02_persistent_bf16",
    ),
    Op(
        "softmax_f32",
        "torch.softmax over rows, fp32",
        {"rows": ROWS, "cols": COLS},
        "f32",
        _rows_inputs("f32", ROWS, COLS),
        softmax,
        compare="softmax/03_block_row",
        tolerance=1e-5,
    ),
    Op(
        "rmsnorm_linear_bf16",
        "F.linear(F.rms_norm(x), w), bf16",
        GEMM,
        "bf16",
        _linear_inputs(4096, 4096, 4096, True),
        rmsnorm_linear,
        compare="gemm/12_wgmma_tma",
    ),
)


# --- on the GPU -----------------------------------------------------------------------------


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def provenance(root: Path) -> dict[str, Any]:
    import torch
    import triton

    try:
        smi = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            .stdout.strip()
            .splitlines()
        )
        driver = smi[0].strip() if smi else "unknown"
    except (OSError, subprocess.SubprocessError):
        driver = "unknown"
    try:
        from curriculum.bench.runner import git_state

        rev, dirty = git_state(root)
    except Exception:  # provenance must not stop the capture
        rev, dirty = "unknown", False
    props = torch.cuda.get_device_properties(0)
    return {
        "gpu": torch.cuda.get_device_name(0),
        "sm_count": props.multi_processor_count,
        "driver": driver,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "date": datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "git_rev": rev + ("-dirty" if dirty else ""),
        "timing": "curriculum.bench.timing.time_call: L2 flushed before each repetition, CUDA "
        "events on the timed stream, median with 20th/80th percentiles",
        "compile": "torch.compile(fn, dynamic=False[, mode]) under torch.no_grad(); "
        "torch._inductor.config.fx_graph_cache = False",
    }


def _stat(stat: Any) -> dict[str, float]:
    return {
        "median_ms": stat.median_ms,
        "p20_ms": stat.p20_ms,
        "p80_ms": stat.p80_ms,
        "samples": stat.samples,
    }


def _profile(run: Callable[[], Any]) -> list[dict[str, Any]]:
    """Every GPU kernel (and copy/memset) one call launches, in order, with its duration."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    out = []
    for e in prof.events():
        if not str(getattr(e, "device_type", "")).endswith("CUDA"):  # a kernel, not a CPU op
            continue
        start = e.time_range.start
        us = float(e.time_range.elapsed_us())
        out.append({"name": e.name, "family": gpu_kernel_family(e.name), "us": us, "start": start})
    out.sort(key=lambda k: k["start"])
    for k in out:
        del k["start"]
    return out


def _output_module(names: Sequence[str]) -> Any:
    """The loaded output module that defines every one of `names` (the newest such)."""
    from torch._inductor.codecache import PyCodeCache

    loaded = list(getattr(PyCodeCache, "modules", []) or [])
    loaded += list(getattr(PyCodeCache, "cache", {}).values())
    return next((m for m in reversed(loaded) if all(hasattr(m, n) for n in names)), None)


def _launch_configs(names: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """The config each generated kernel runs with after its first calls autotuned it (block
    sizes, warps, stages, registers, spills), read from the loaded output module; {} if this
    torch keeps it elsewhere."""
    try:
        module = _output_module(names)
        if module is None or not names:
            return {}
        out: dict[str, list[dict[str, Any]]] = {}
        for name in names:
            rows = []
            for launcher in getattr(getattr(module, name), "launchers", []) or []:
                cfg = getattr(launcher, "config", None)
                rows.append(
                    {
                        "block": {
                            k: v
                            for k, v in (getattr(cfg, "kwargs", {}) or {}).items()
                            if isinstance(v, int)
                        },
                        "num_warps": getattr(cfg, "num_warps", None),
                        "num_stages": getattr(cfg, "num_stages", None),
                        "registers": getattr(launcher, "n_regs", None),
                        "spills": getattr(launcher, "n_spills", None),
                        "shared_bytes": getattr(launcher, "shared", None),
                    }
                )
            out[name] = rows
        return out
    except Exception:  # a private API: its absence must not stop the capture
        return {}


def _cached_ptx(name: str, threads: int | None) -> str | None:
    """A kernel's PTX from Triton's cache: the newest `<name>.ptx` whose `.maxntid` is the
    chosen config's thread count (other autotuning candidates share the name)."""
    import glob
    import os

    roots = [os.environ.get("TRITON_CACHE_DIR", ""), os.path.expanduser("~/.triton/cache")]
    try:
        from torch._inductor.runtime.runtime_utils import cache_dir

        roots.append(cache_dir())
    except Exception:
        roots.append("/tmp/torchinductor_root")
    found = []
    for root in filter(None, roots):
        found += glob.glob(os.path.join(root, "**", f"{name}.ptx"), recursive=True)
    found.sort(key=os.path.getmtime, reverse=True)
    for path in found:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        m = re.search(r"\.maxntid\s+(\d+)", text)
        if threads is None or (m and int(m.group(1)) == threads):
            return text
    return None


def kernel_ptx(names: Sequence[str], configs: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """The PTX of each generated kernel in the config it runs with: from the launcher's
    compiled binary, else from Triton's cache; kernels with neither are left out."""
    out: dict[str, str] = {}
    try:
        module = _output_module(names)
    except Exception:
        module = None
    for name in names:
        ptx = None
        for launcher in getattr(getattr(module, name, None), "launchers", None) or []:
            asm = getattr(getattr(launcher, "bin", None), "asm", None)
            if isinstance(asm, dict) and isinstance(asm.get("ptx"), str):
                ptx = asm["ptx"]
                break
        if ptx is None:
            warps = (configs.get(name) or [{}])[0].get("num_warps")
            try:
                ptx = _cached_ptx(name, 32 * warps if warps else None)
            except OSError:
                ptx = None
        if ptx:
            out[name] = ptx
    return out


@contextlib.contextmanager
def _captured_logs() -> Any:
    """Inductor's autotuning report (stderr and the select_algorithm logger) into a buffer."""
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setLevel(logging.INFO)
    loggers = [
        logging.getLogger(n)
        for n in ("torch._inductor.select_algorithm", "torch._inductor.autotune_process")
    ]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    try:
        with contextlib.redirect_stderr(buf):
            yield buf
    finally:
        for lg, lv in zip(loggers, levels, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(lv)


def run_op(op: Op, folder: Path, prov: dict[str, Any], timer: Any, policy: Any) -> dict[str, Any]:
    import torch
    from torch._inductor.utils import run_and_get_code

    from curriculum.bench import kit
    from curriculum.bench.timing import time_call

    record: dict[str, Any] = {
        "op": op.name,
        "title": op.title,
        "shape": op.shape,
        "dtype": op.dtype,
        "mode": op.mode or "default",
        "compare": op.compare,
    }
    import torch._inductor.config as inductor_config

    missing = [k for k in op.config if not hasattr(inductor_config, k)]
    if missing:
        raise Skipped(f"this torch has no Inductor option {', '.join(missing)}")
    record["config"] = op.config
    args = op.make(torch)
    compiled = torch.compile(op.fn, dynamic=False, mode=op.mode)
    with torch.no_grad():
        expected = op.fn(*args)
        t0 = time.perf_counter()
        with _captured_logs() as logs, inductor_config.patch(dict(op.config)):
            got, codes = run_and_get_code(compiled, *args)
        torch.cuda.synchronize()
        record["compile_s"] = round(time.perf_counter() - t0, 2)
        err = (got.float() - expected.float()).abs().max().item()
        scale = max(1.0, expected.float().abs().max().item())
        record["max_abs_diff"] = err
        record["checked"] = bool(err <= op.tolerance * scale)
        code = "\n\n".join(codes)
        record["graphs"] = len(codes)
        found = launches(code)
        record["launches"] = [asdict(x) for x in found]
        record["kernels"] = [asdict(k) for k in kernel_infos(code)]
        record["cublas"] = calls_cublas(found)
        title = f"inductor/{op.name}: {op.title}, shape {op.shape}, mode {record['mode']}" + (
            f", Inductor options {op.config}" if op.config else ""
        )
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "output_code.txt").write_text(
            header([title, stamp_line(prov), f"Inductor's output code, written by `{COMMAND}`"])
            + code,
            encoding="utf-8",
        )
        for name, src in kernel_sources(code).items():
            (folder / f"{name}.triton").write_text(
                header(
                    [
                        f"inductor/{op.name}: generated Triton kernel {name} ({kernel_kind(name)})",
                        stamp_line(prov),
                        f"from output_code.txt, written by `{COMMAND}`",
                    ]
                )
                + src,
                encoding="utf-8",
            )
        report = logs.getvalue()
        if report.strip():
            (folder / "autotune.txt").write_text(
                header(
                    [f"inductor/{op.name}: what Inductor printed while compiling", stamp_line(prov)]
                )
                + report,
                encoding="utf-8",
            )

        eager_run = kit.warmed(kit.on_cupy_stream(lambda: op.fn(*args)))
        compiled_run = kit.warmed(kit.on_cupy_stream(lambda: compiled(*args)))
        record["eager"] = _stat(time_call(eager_run, timer, policy))
        record["compiled"] = _stat(time_call(compiled_run, timer, policy))
        names = [k["name"] for k in record["kernels"]]
        record["launch_configs"] = _launch_configs(names)
        ptxs = kernel_ptx(names, record["launch_configs"])
        record["ptx_counts"] = {name: ptx_counts(text) for name, text in ptxs.items()}
        for name, text in ptxs.items():
            (folder / f"{name}.ptx").write_text(
                header(
                    [
                        f"inductor/{op.name}: PTX of {name} in the config it ran with",
                        stamp_line(prov),
                        f"written by `{COMMAND}`",
                    ]
                )
                + text,
                encoding="utf-8",
            )
        gpu = {
            "eager": _profile(lambda: op.fn(*args)),
            "compiled": _profile(lambda: compiled(*args)),
        }
    record["gpu_kernels"] = gpu
    lines = [
        f"inductor/{op.name}: GPU kernels of one call, by the torch profiler "
        "(family read from the name; durations from one profiled call)",
        stamp_line(prov),
    ]
    body = []
    for which in ("eager", "compiled"):
        body.append(
            f"{which}: {len(gpu[which])} kernels, median call "
            f"{fmt_us(record[which]['median_ms'])} us (timed separately)"
        )
        body += ["  " + ln for ln in gpu_kernel_lines(gpu[which])]
    body += config_lines(record.get("launch_configs", {}))
    for name, counts in record.get("ptx_counts", {}).items():
        body.append(f"ptx {name}: " + ", ".join(f"{k} x{v}" for k, v in counts.items()))
    (folder / "gpu_kernels.txt").write_text(
        header(lines) + "\n".join(body) + "\n", encoding="utf-8"
    )
    record["status"] = "ok"
    return record


def strip_header(text: str) -> str:
    """A written artifact without its leading `// ` provenance lines."""
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines) and lines[i].startswith("// "):
        i += 1
    return "".join(lines[i:])


def reparse(out: Path) -> int:
    """Re-read every op's saved output code and rewrite what is derived from it (kernels,
    launches, cuBLAS) in summary.json and summary.txt; timings and provenance are kept."""
    data = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    for rec in data["ops"]:
        path = out / rec["op"] / "output_code.txt"
        if rec.get("status") != "ok" or not path.is_file():
            continue
        code = strip_header(path.read_text(encoding="utf-8"))
        found = launches(code)
        rec["launches"] = [asdict(x) for x in found]
        rec["kernels"] = [asdict(k) for k in kernel_infos(code)]
        rec["cublas"] = calls_cublas(found)
    write_summary(out, data["provenance"], data["ops"])
    _say(f"re-read {len(data['ops'])} ops' output code; rewrote {out}/summary.json and summary.txt")
    return 0


def write_summary(out: Path, prov: dict[str, Any], records: list[dict[str, Any]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    data = {"command": COMMAND, "provenance": prov, "ops": records}
    (out / "summary.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    (out / "summary.txt").write_text(
        header(
            [
                "inductor: eager PyTorch against torch.compile, per operation",
                stamp_line(prov),
                "median of timed calls (L2 flushed), GPU kernels counted by the torch profiler; "
                f"written by `{COMMAND}`",
            ]
        )
        + summary_table(records),
        encoding="utf-8",
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("kernels/inductor/artifacts"))
    p.add_argument("--root", type=Path, default=Path.cwd())
    p.add_argument("--only", default="", help="comma-separated op names (default: all)")
    p.add_argument(
        "--budget-s",
        type=float,
        default=0.0,
        help="skip an op whose expected cost would pass this many seconds (0: none)",
    )
    p.add_argument("--time-cap", type=float, default=1.5, help="seconds of timing per callable")
    p.add_argument(
        "--reparse",
        action="store_true",
        help="no GPU: re-read the output code saved under --out and rewrite the summary",
    )
    args = p.parse_args(argv)
    if args.reparse:
        return reparse(args.out)
    chosen = [o for o in OPS if not args.only or o.name in args.only.split(",")]
    if not chosen:
        _say(f"no op named {args.only!r}; ops: {', '.join(o.name for o in OPS)}")
        return 2
    start = time.perf_counter()
    try:
        import cupy
        import torch
        import torch._inductor.config as inductor_config
    except ImportError as exc:
        _say(f"capture needs torch, triton and cupy on a CUDA machine: {exc}")
        return 2
    if not torch.cuda.is_available():
        _say("capture needs a CUDA GPU")
        return 2
    from curriculum.bench.timing import CudaEventTimer, TimingPolicy

    inductor_config.fx_graph_cache = False
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    timer = CudaEventTimer(int(props["l2CacheSize"]), int(props["multiProcessorCount"]))
    policy = TimingPolicy(time_cap_s=args.time_cap)
    prov = provenance(args.root.resolve())
    records: list[dict[str, Any]] = []
    status = 0
    for op in chosen:
        spent = time.perf_counter() - start
        if args.budget_s and spent + op.budget_s > args.budget_s:
            records.append({"op": op.name, "title": op.title, "status": "skipped (time budget)"})
            _say(f"{op.name}: skipped, {spent:.0f} s spent of {args.budget_s:.0f}")
            write_summary(args.out, prov, records)
            continue
        try:
            rec = run_op(op, args.out / op.name, prov, timer, policy)
        except Skipped as exc:
            rec = {"op": op.name, "title": op.title, "status": f"skipped ({exc})"}
        except Exception as exc:  # one failing op must not lose the others' files
            rec = {
                "op": op.name,
                "title": op.title,
                "status": f"failed: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:300] if str(exc) else ''}",
            }
            status = 1
            _say(traceback.format_exc()[-4000:])
        records.append(rec)
        torch.cuda.empty_cache()  # the op's tensors died with run_op's frame
        write_summary(args.out, prov, records)
        if rec["status"] == "ok":
            _say(
                f"{op.name}: {len(rec['kernels'])} Triton kernels, cuBLAS {rec['cublas']}, "
                f"eager {fmt_us(rec['eager']['median_ms'])} us, compiled "
                f"{fmt_us(rec['compiled']['median_ms'])} us, checked {rec['checked']}, "
                f"compile {rec['compile_s']} s [{time.perf_counter() - start:.0f} s]"
            )
        else:
            _say(f"{op.name}: {rec['status']}")
    _say(f"wrote {args.out}/summary.json and summary.txt in {time.perf_counter() - start:.0f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
