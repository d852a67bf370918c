"""What the Triton compiler decided for each kernel it built: layouts, shared memory, registers,
the instructions it emitted; and, on request, a short sweep of launch configs.

Run on the device after the bench, with the bench's Triton cache:

    export TRITON_CACHE_DIR=/tmp/triton-cache
    python3 -m curriculum.bench --root "$PWD" --only 'triton/*' --time-cap 3
    python3 kernels/triton/compiled_report.py /tmp/triton-cache [--sweep 30]

For every kernel in the cache compiled from this topic's files (with `--all`, also those
torch.compile built in the same run) it prints the metadata Triton recorded (warps, pipeline stages, shared memory bytes), the
registers and spills of the cubin, the layout definitions of the TTGIR (how a tensor is spread
over threads, warps and shared memory), the function signature of the TTIR (which integer
arguments were specialised as multiples of 16) and a histogram of the PTX instructions that
show the decisions: vector widths of global loads, asynchronous copies, wgmma, barriers.

`--sweep S` times, for at most S seconds, a few other configs of the GEMM and the attention
kernel at the headline shapes with `triton.testing.do_bench`, for choosing the fixed configs.
It is not how any recorded figure is measured: those come from `curriculum bench`.

Nothing here is imported by the suite.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OPCODE = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)")
SHOWN = (
    "ld.global", "st.global", "ld.shared", "st.shared", "cp.async", "wgmma", "mma", "ldmatrix",
    "stmatrix", "mbarrier", "bar", "fence", "shfl", "ex2", "rcp", "div", "sqrt", "rsqrt",
)  # fmt: skip


def ptx_histogram(ptx: str) -> dict[str, int]:
    """Counts of the PTX opcodes that start with one of SHOWN (static counts, not executed)."""
    counts: collections.Counter[str] = collections.Counter()
    for line in ptx.splitlines():
        m = OPCODE.match(line)
        if m and m[1].startswith(SHOWN):
            counts[m[1]] += 1
    return dict(sorted(counts.items()))


def ptxas_candidates() -> list[str]:
    """Every ptxas to try, newest toolkits first: the PTX Triton emits carries the .version of
    the ptxas it was built for, which an older one refuses."""
    found = [shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas"]
    try:
        import triton

        found.append(str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"))
    except ImportError:
        pass
    unique: list[str] = []
    for tool in found:
        if tool and Path(tool).is_file() and tool not in unique:
            unique.append(tool)
    return unique


def resource_usage(ptx: Path, arch: int) -> str:
    """Registers, spills and barriers of the PTX compiled again by ptxas -v (same as the cubin)."""
    suffix = "a" if arch >= 90 else ""
    failures = []
    for tool in ptxas_candidates():
        try:
            out = subprocess.run(
                [tool, f"-arch=sm_{arch}{suffix}", "-v", str(ptx), "-o", "/dev/null"],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
        except OSError as exc:
            failures.append(f"{tool}: {exc}")
            continue
        text = out.stderr + out.stdout
        keep = [
            ln.split(":", 1)[-1].strip()
            for ln in text.splitlines()
            if "Used" in ln or "spill" in ln
        ]
        if out.returncode == 0 and keep:
            return "; ".join(keep)
        failures.append(
            f"{tool}: {text.strip().splitlines()[-1][:120] if text.strip() else out.returncode}"
        )
    return "(no ptxas could read it: " + " | ".join(failures) + ")"


# TTGIR names that are attributes, not operations.
NOT_OPS = {
    "ttg.blocked", "ttg.slice", "ttg.memdesc", "ttg.num", "ttg.target", "ttg.threads",
    "ttg.nvidia_mma", "ttg.nvmma_shared", "ttg.shared_memory", "ttg.dot_op", "ttg.async",
    "ttg.shared", "ttg.linear", "ttg.swizzled_shared",
}  # fmt: skip


def header() -> None:
    """Three `// ` lines: what this is, with what and when, how to read it (an artifact's head)."""
    from datetime import UTC, datetime

    try:
        import triton

        version = f"triton {triton.__version__}"
    except ImportError:
        version = "triton not importable"
    try:
        import torch

        device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    except ImportError:
        device = "no torch"
    now = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    print(
        "// triton/compiled: what the Triton compiler chose for each kernel in a cache, written "
        "by `python3 kernels/triton/compiled_report.py CACHE`"
    )
    print(f"// {version}, {device}; {now}")
    print(
        "// metadata from Triton's JSON, registers from ptxas -v on its PTX, layouts from the "
        "TTGIR, static PTX instruction counts"
    )


ARG = re.compile(r"%(\w+): ([^{]+?)(?: \{tt\.divisibility = (\d+) : i32\})? loc\(")


def arguments(signature: str) -> str:
    """The TTIR function's arguments, '/16' marking those the JIT specialised as multiples of 16."""
    found = ARG.findall(signature)
    parts = [f"{n}: {t.strip()}" + (f" /{d}" if d else "") for n, t, d in found]
    return ", ".join(parts) or signature.strip()


def from_topic(folder: Path, stem: str) -> bool:
    """Whether a cached kernel was compiled from a file of kernels/triton (not torch.compile's)."""
    ttir = folder / f"{stem}.ttir"
    return ttir.is_file() and "kernels/triton/" in ttir.read_text()


def report(cache: Path, everything: bool = False) -> None:
    header()
    kernels = []
    for meta_path in cache.rglob("*.json"):
        if meta_path.name.startswith("__grp__"):
            continue
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            continue
        if meta.get("name") and (everything or from_topic(meta_path.parent, meta_path.stem)):
            kernels.append((meta["name"], -int(meta.get("shared") or 0), meta_path, meta))
    for name, _, meta_path, meta in sorted(kernels, key=lambda k: k[:2]):
        folder, stem = meta_path.parent, meta_path.stem
        print(f"=== kernel {name} ({folder.name[:12]})")
        keys = ("num_warps", "num_ctas", "num_stages", "shared", "maxnreg", "target")
        print("metadata: " + ", ".join(f"{k}={meta.get(k)}" for k in keys if k in meta))
        ptx = folder / f"{stem}.ptx"
        arch = (meta.get("target") or {}).get("arch", 90)
        if ptx.is_file() and isinstance(arch, int):
            print("resources: " + resource_usage(ptx, arch))
        ttir = folder / f"{stem}.ttir"
        if ttir.is_file():
            sig = next((ln for ln in ttir.read_text().splitlines() if "tt.func" in ln), "")
            print("arguments: " + arguments(sig))
        ttgir = folder / f"{stem}.ttgir"
        if ttgir.is_file():
            text = ttgir.read_text()
            for line in text.splitlines():
                if line.startswith("#") and not line.startswith("#loc"):
                    print("layout: " + line.strip())
            found = re.findall(r"\b(ttn?g\.[a-z_]+|tt\.dot\w*)\b", text)
            ops = collections.Counter(op for op in found if op not in NOT_OPS)
            print("ttgir ops: " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))
        if ptx.is_file():
            hist = ptx_histogram(ptx.read_text())
            print("ptx: " + ", ".join(f"{k} {v}" for k, v in hist.items()))
        print()


# --- a short config sweep on the device -----------------------------------------------------


def _version(stem: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"sweep_{stem}", HERE / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sweep(seconds: float) -> None:
    import torch
    import triton

    start = time.time()
    gemm, flash = _version("03_gemm_bf16"), _version("05_flash_attention")
    a = torch.randn(4096, 4096, device="cuda").bfloat16()
    b = torch.randn(4096, 4096, device="cuda").bfloat16()
    c = torch.empty(4096, 4096, device="cuda")
    q, k, v = (torch.randn(8, 16, 4096, 128, device="cuda").bfloat16() for _ in range(3))
    o = torch.empty_like(q)
    gemm_flops, attn_flops = 2 * 4096**3, 4 * 8 * 16 * 4096**2 * 128
    runs: list[tuple[str, Any, dict[str, int], float, Any]] = [
        ("gemm", gemm, cfg, gemm_flops, lambda: gemm.launch({}, {"a": a, "b": b, "c": c}))
        for cfg in (
            {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "NUM_STAGES": 3, "NUM_WARPS": 8},
            {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "NUM_STAGES": 4, "NUM_WARPS": 8},
            {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "NUM_STAGES": 4, "NUM_WARPS": 4},
        )
    ]
    runs += [
        (
            "flash",
            flash,
            cfg,
            attn_flops,
            lambda: flash.launch({}, {"q": q, "k": k, "v": v, "o": o}),
        )
        for cfg in (
            {"BLOCK_M": 128, "BLOCK_N": 64, "NUM_STAGES": 3, "NUM_WARPS": 8},
            {"BLOCK_M": 128, "BLOCK_N": 128, "NUM_STAGES": 2, "NUM_WARPS": 8},
            {"BLOCK_M": 128, "BLOCK_N": 64, "NUM_STAGES": 4, "NUM_WARPS": 8},
            {"BLOCK_M": 64, "BLOCK_N": 64, "NUM_STAGES": 3, "NUM_WARPS": 4},
        )
    ]
    for label, module, cfg, flops, fn in runs:
        if time.time() - start > seconds:
            print(f"sweep: stopped after {seconds:g} s")
            break
        saved = {key: getattr(module, key) for key in cfg}
        for key, value in cfg.items():
            setattr(module, key, value)
        try:
            ms = triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
            print(f"sweep {label} {cfg}: {ms:.4f} ms, {flops / ms / 1e9:.0f} TFLOP/s")
        except Exception as exc:  # a config that does not fit (shared memory, registers)
            print(f"sweep {label} {cfg}: failed: {type(exc).__name__}: {str(exc)[:200]}")
        finally:
            for key, value in saved.items():
                setattr(module, key, value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache", type=Path, help="the TRITON_CACHE_DIR the bench ran with")
    parser.add_argument("--sweep", type=float, default=0.0, metavar="S")
    parser.add_argument(
        "--all", action="store_true", help="also the kernels torch.compile built in the same cache"
    )
    args = parser.parse_args(argv)
    report(args.cache, everything=args.all)
    if args.sweep > 0:
        sweep(args.sweep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
