"""`curriculum artifacts`: compiler and profiler output of chosen kernels, kept as text.

A page that reads PTX, SASS or an Nsight Compute report line by line shows
output a command wrote, never text typed by hand. This module is that command
and its data format:

- for each kernel of `DISASSEMBLE`, nvcc compiles `kernels/<topic>/NN_name.cu`
  with the options its suite declares (`compile_options` + `version_options`),
  and the PTX and the SASS (`cuobjdump -sass`) of its `extern "C"` entry are
  written to `kernels/<topic>/artifacts/NN_name.ptx` and `.sass`, trimmed to
  that entry, each under a few `//` lines of provenance;
- for each kernel of `PROFILE`, `ncu --clock-control none` profiles one launch
  of the kernel at its suite's headline shape (compiled, fed and launched
  through the suite, as the bench does, then checked against the reference),
  and the report's figures go to `kernels/<topic>/artifacts/NN_name.ncu.json`:
  every metric of the raw page in base units, and every metric of the
  details page by section, with provenance (GPU, driver, ncu version, date,
  kernel, shape).

Without nvcc, cuobjdump or ncu on the PATH the command says which is missing
and exits 2. `python -m curriculum.artifacts launch ID` is the small driver
that ncu runs: one checked launch of one kernel, nothing else.

Pages show these files through two fenced blocks, checked by `check_blocks`
and rendered by `render_block`:

    ```artifact
    path: kernels/memory/artifacts/02_copy_vec4.sass
    grep: LDG|STG          (optional: keep the lines that match)
    lines: 10-24           (optional: 1-based, inclusive)
    ```

    ```ncu
    files: [kernels/gemm/artifacts/05_blocktiling_2d.ncu.json]
    metrics:
    - GPU Speed Of Light Throughput / Memory Throughput
    - dram__bytes_read.sum
    ```
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import io
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DISASSEMBLE = ("memory/02_copy_vec4", "gemm/12_wgmma_tma")
PROFILE = ("gemm/05_blocktiling_2d", "attention/04_split_kv")
SECTIONS = ("SpeedOfLight", "Occupancy", "WarpStateStats", "MemoryWorkloadAnalysis")
EXTRA_SECTIONS = ("MemoryWorkloadAnalysis_Chart", "LaunchStats")
EXTRA_METRICS = (
    "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum", "l1tex__t_bytes.sum",
    "gpu__time_duration.sum", "smsp__inst_executed.sum",
)
TOOLS = ("nvcc", "cuobjdump", "ncu")
ENTRY = re.compile(
    r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?P<name>\w+)\s*\(')
SEED = 20261203


class ToolsMissing(RuntimeError):
    pass


# --- where things are ----------------------------------------------------------------------


def artifact_path(root: Path, kernel_id: str, suffix: str) -> Path:
    topic, stem = kernel_id.split("/", 1)
    return root / "kernels" / topic / "artifacts" / f"{stem}{suffix}"


def command_for(kernel_id: str) -> str:
    """The command that writes a kernel's artifacts, as a page's caption names it."""
    return f"curriculum artifacts --only {kernel_id}"


def kernel_id_of(path: str) -> str | None:
    """`kernels/<topic>/artifacts/<stem>.<ext>` -> `<topic>/<stem>`."""
    m = re.fullmatch(r"kernels/([a-z0-9_-]+)/artifacts/(\d{2}_[a-z0-9_]+)\.[a-z.]+", path)
    return f"{m.group(1)}/{m.group(2)}" if m else None


def entry_of(source: str) -> str:
    """The first `extern "C" __global__` function of a kernel file."""
    m = ENTRY.search(source)
    if m is None:
        raise ValueError('no extern "C" __global__ entry point')
    return m.group("name")


def nvcc_options(options: tuple[str, ...]) -> list[str]:
    """The suite's NVRTC options as nvcc takes them; the last -arch wins, as in NVRTC."""
    out: list[str] = []
    arch = None
    for opt in options:
        if opt.startswith(("-arch=", "--gpu-architecture=")):
            arch = opt.split("=", 1)[1]
        elif opt.startswith("--std="):
            out.append("-std=" + opt.split("=", 1)[1])
        else:
            out.append(opt)
    return out + ([f"-arch={arch}"] if arch else [])


# --- trimming the tools' output ------------------------------------------------------------


def trim_ptx(ptx: str, entry: str) -> str:
    """The module directives and the one `.entry` of the PTX, up to its closing brace."""
    lines = ptx.splitlines()
    head = [ln for ln in lines if ln.startswith((".version", ".target", ".address_size"))]
    start = next((i for i, ln in enumerate(lines)
                  if re.search(rf"\.entry\s+{re.escape(entry)}\s*\(", ln)), None)
    if start is None:
        raise ValueError(f"no .entry {entry} in the PTX")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].rstrip() == "}"), len(lines) - 1)
    return "\n".join(head + [""] + lines[start:end + 1]) + "\n"


_ENCODING = re.compile(r"\s*/\*\s*0x[0-9a-f]{16}\s*\*/\s*$")


def trim_sass(sass: str, entry: str) -> str:
    """The instructions of one function of `cuobjdump -sass`, without the hex encodings."""
    lines = sass.splitlines()
    start = next((i for i, ln in enumerate(lines)
                  if re.search(rf"Function\s*:\s*{re.escape(entry)}\s*$", ln)), None)
    if start is None:
        raise ValueError(f"no function {entry} in the SASS")
    out: list[str] = []
    for ln in lines[start + 1:]:
        if "Function :" in ln or ln.strip().startswith("....."):
            break
        if re.fullmatch(r"\s*/\*\s*0x[0-9a-f]{16}\s*\*/\s*", ln) or ".headerflags" in ln:
            continue  # the second encoding word on a line of its own; the ELF flags
        text = _ENCODING.sub("", ln).strip()
        if text:
            out.append(text)
    # The function ends with EXIT; a branch to itself and NOPs pad it to an aligned size.
    while out and (out[-1].endswith("NOP ;") or out[-1].endswith("NOP;")):
        out.pop()
    if out and re.fullmatch(r"/\*0*([0-9a-f]+)\*/\s+BRA 0x0*\1\s*;", out[-1]):
        out.pop()
    return "\n".join(out) + "\n"


# --- parsing ncu's CSV ---------------------------------------------------------------------


def _number(text: str) -> float | str:
    t = text.strip().replace(",", "")
    try:
        value = float(t)
    except ValueError:
        return text.strip()
    return value if math.isfinite(value) else text.strip()


def _csv_rows(text: str) -> list[list[str]]:
    body = "\n".join(ln for ln in text.splitlines() if ln.startswith('"'))
    return list(csv.reader(io.StringIO(body)))


def parse_raw(text: str) -> list[dict[str, dict[str, Any]]]:
    """`ncu --page raw --csv`: a header of metric names, a row of units, a row per kernel."""
    rows = _csv_rows(text)
    if len(rows) < 3:
        return []
    names, units = rows[0], rows[1]
    return [{n: {"value": _number(v), "unit": u} for n, u, v in zip(names, units, row, strict=False)}
            for row in rows[2:]]


def parse_details(text: str) -> list[dict[str, dict[str, dict[str, Any]]]]:
    """`ncu --page details --csv`: one row per (kernel, section, metric)."""
    rows = _csv_rows(text)
    if len(rows) < 2:
        return []
    header = rows[0]
    col = {name: i for i, name in enumerate(header)}
    need = ("ID", "Section Name", "Metric Name", "Metric Unit", "Metric Value")
    if any(n not in col for n in need):
        raise ValueError(f"ncu details CSV without columns {need}: {header}")
    kernels: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    last = max(col[n] for n in need)
    for row in rows[1:]:
        if len(row) <= last or not row[col["Metric Name"]]:
            continue  # a rule's advice row, or a short row
        sections = kernels.setdefault(row[col["ID"]], {})
        sections.setdefault(row[col["Section Name"]], {})[row[col["Metric Name"]]] = {
            "value": _number(row[col["Metric Value"]]), "unit": row[col["Metric Unit"]]}
    return list(kernels.values())


# --- the command ---------------------------------------------------------------------------


def _say(text: str, err: bool = False) -> None:
    (sys.stderr if err else sys.stdout).write(text + "\n")


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


def _run(cmd: list[str], log: io.TextIOBase, **kw: Any) -> subprocess.CompletedProcess[str]:
    log.write("$ " + " ".join(cmd) + "\n")
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        log.write(done.stdout[-4000:] + done.stderr[-4000:] + "\n")
    return done


def _tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return lines[-1] if lines else "unknown"


def _gpu() -> dict[str, str]:
    out = _tool_version(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    name, _, driver = out.partition(",")
    return {"gpu": name.strip(), "driver": driver.strip()}


@dataclass
class Target:
    kernel_id: str
    source: Path
    options: tuple[str, ...]
    shape: dict[str, int]
    entry: str


def find_target(root: Path, kernel_id: str) -> Target:
    from curriculum.bench.suites import load_suite

    topic, stem = kernel_id.split("/", 1)
    loaded = load_suite(root / "kernels" / topic)
    version = next((v for v in loaded.versions if v.stem == stem), None)
    if version is None:
        raise ValueError(f"{kernel_id}: no such kernel file")
    bench = loaded.claims[stem]
    options = tuple(bench.compile_options) + tuple(bench.version_options.get(stem, ()))
    return Target(kernel_id, version.path, options, dict(bench.headline), entry_of(version.source))


def _header(lines: list[str]) -> str:
    return "".join(f"// {ln}\n" for ln in lines)


def out_dir(root: Path, out: Path | None, kernel_id: str) -> Path:
    """`out/<topic>/` when given, else `kernels/<topic>/artifacts/`; made if missing."""
    topic = kernel_id.split("/")[0]
    folder = out / topic if out is not None else root / "kernels" / topic / "artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def disassemble(root: Path, target: Target, out: Path | None, log: io.TextIOBase,
                stamp: dict[str, str]) -> list[Path]:
    opts = nvcc_options(target.options)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        cubin, ptx = Path(tmp) / "k.cubin", Path(tmp) / "k.ptx"
        for kind, dest in (("-cubin", cubin), ("-ptx", ptx)):
            done = _run(["nvcc", kind, *opts, "-o", str(dest), str(target.source)], log)
            if done.returncode != 0:
                raise RuntimeError(f"{target.kernel_id}: nvcc {kind} failed")
        sass = _run(["cuobjdump", "-sass", "-fun", target.entry, str(cubin)], log)
        if sass.returncode != 0 or "Function" not in sass.stdout:
            sass = _run(["cuobjdump", "-sass", str(cubin)], log)
        head = [f"{target.kernel_id}: entry {target.entry}, written by `{command_for(target.kernel_id)}`",
                f"nvcc {' '.join(opts)} ({stamp['nvcc']}); {stamp['date']}"]
        topic_dir = out_dir(root, out, target.kernel_id)
        stem = target.kernel_id.split("/")[1]
        ptx_text = trim_ptx(ptx.read_text(), target.entry)
        sass_text = trim_sass(sass.stdout, target.entry)
        for suffix, body, extra in ((".ptx", ptx_text, "PTX of the entry, as nvcc -ptx wrote it"),
                                    (".sass", sass_text,
                                     "SASS of the entry, cuobjdump -sass, encodings dropped")):
            path = topic_dir / f"{stem}{suffix}"
            path.write_text(_header([*head, extra]) + body, encoding="utf-8")
            written.append(path)
    return written


def profile(root: Path, target: Target, out: Path | None, log: io.TextIOBase,
            stamp: dict[str, str]) -> Path:
    driver = [sys.executable, "-m", "curriculum.artifacts", "--root", str(root), "launch",
              target.kernel_id]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report"
        attempts = [
            [*(a for s in (*SECTIONS, *EXTRA_SECTIONS) for a in ("--section", s)),
             "--metrics", ",".join(EXTRA_METRICS)],
            [*(a for s in SECTIONS for a in ("--section", s))],
        ]
        for sections in attempts:
            cmd = ["ncu", "--clock-control", "none", "--kernel-name", target.entry,
                   "--launch-count", "1", *sections, "--export", str(report), "--force-overwrite",
                   *driver]
            done = _run(cmd, log)
            log.write(done.stdout[-3000:] + "\n")
            if done.returncode == 0 and Path(f"{report}.ncu-rep").is_file():
                break
        else:
            raise RuntimeError(f"{target.kernel_id}: ncu failed (see the log)")
        rep = f"{report}.ncu-rep"
        raw = _run(["ncu", "--import", rep, "--page", "raw", "--csv", "--print-units", "base"], log)
        details = _run(["ncu", "--import", rep, "--page", "details", "--csv"], log)
        checked = [ln for ln in done.stdout.splitlines() if ln.startswith("checked:")]
    try:
        raws, dets = parse_raw(raw.stdout), parse_details(details.stdout)
    except ValueError:
        raws, dets = [], []
    if not raws or not dets:
        log.write(raw.stdout[:30000] + "\n" + details.stdout[:30000] + "\n")
        raise RuntimeError(f"{target.kernel_id}: ncu printed no metrics")
    data = {
        "kernel": target.kernel_id,
        "entry": target.entry,
        "shape": target.shape,
        "command": command_for(target.kernel_id),
        "ncu_command": " ".join(cmd[:-len(driver)]) + " python3 -m curriculum.artifacts launch "
                       + target.kernel_id,
        "provenance": {**stamp, "check": checked[-1][len("checked:"):].strip() if checked else ""},
        "sections": dets[0],
        "raw": raws[0],
    }
    path = out_dir(root, out, target.kernel_id) / f"{target.kernel_id.split('/')[1]}.ncu.json"
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return path


def launch(root: Path, kernel_id: str) -> int:
    """One checked launch of one kernel at its headline shape (what ncu profiles)."""
    from curriculum.bench.cupy_backend import open_cupy_backend
    from curriculum.bench.suites import load_suite

    topic, stem = kernel_id.split("/", 1)
    loaded = load_suite(root / "kernels" / topic)
    version = next(v for v in loaded.versions if v.stem == stem)
    bench = loaded.claims[stem]
    shape = dict(bench.headline)
    backend = open_cupy_backend()
    options = tuple(bench.compile_options) + tuple(bench.version_options.get(stem, ()))
    module = backend.compile(version.source, options)
    inputs = bench.inputs(shape, backend.rng(SEED))
    outputs = {n: backend.alloc_output(spec, shape) for n, spec in bench.outputs.items()}
    bench.launch(module, version, shape, {**inputs, **outputs})
    backend.synchronize()
    reference = bench.reference(backend.upcast(inputs), shape)
    got = bench.compare(outputs) if bench.compare is not None else outputs
    worst = 0.0
    for name in bench.outputs:
        cmp = backend.compare(got[name], reference[name], bench.tolerance)
        worst = max(worst, cmp.rel_err)
        if not cmp.passed:
            _say(f"checked: FAILED {name} rel err {cmp.rel_err:.3e}")
            return 1
    _say(f"checked: passed, rel err {worst:.2e} (tolerance {bench.tolerance:.0e})")
    return 0


def run(root: Path, only: str | None, out: Path | None) -> int:
    missing = missing_tools()
    if missing:
        _say(f"curriculum artifacts: {', '.join(missing)} not found on the PATH; this command "
              "needs the CUDA toolkit (nvcc, cuobjdump) and Nsight Compute (ncu) on a machine "
              "with an NVIDIA GPU", err=True)
        return 2
    chosen = [(k, "sass") for k in DISASSEMBLE] + [(k, "ncu") for k in PROFILE]
    chosen = [(k, what) for k, what in chosen if only is None or fnmatch.fnmatchcase(k, only)]
    if not chosen:
        _say(f"curriculum artifacts: nothing matches --only {only!r}", err=True)
        return 2
    stamp = {**_gpu(), "nvcc": _tool_version(["nvcc", "--version"]),
             "ncu": _tool_version(["ncu", "--version"]),
             "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    log = sys.stderr
    status = 0
    for kernel_id, what in chosen:
        try:
            target = find_target(root, kernel_id)
            if what == "sass":
                paths = disassemble(root, target, out, log, stamp)
            else:
                paths = [profile(root, target, out, log, stamp)]
        except (RuntimeError, ValueError) as exc:
            _say(f"curriculum artifacts: {exc}", err=True)
            status = 1
            continue
        for p in paths:
            _say(f"wrote {p}")
    return status


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", help="glob on kernel ids, e.g. 'memory/*' (default: every one)")
    p.add_argument("--out", type=Path, default=None,
                   help="write <topic>/<file> under this folder (default: kernels/<topic>/artifacts/)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m curriculum.artifacts", description=__doc__)
    p.add_argument("--root", type=Path, default=Path.cwd())
    sub = p.add_subparsers(dest="what")
    la = sub.add_parser("launch", help="one checked launch of one kernel (what ncu profiles)")
    la.add_argument("kernel_id")
    configure(p)
    args = p.parse_args(argv)
    if args.what == "launch":
        return launch(args.root.resolve(), args.kernel_id)
    return run(args.root.resolve(), args.only, args.out)


if __name__ == "__main__":
    sys.exit(main())
