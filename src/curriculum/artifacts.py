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

from curriculum.sanitize import command_for as bug_command
from curriculum.sanitize import run_sanitize

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
    if kernel_id.startswith("bugs/"):
        return bug_command(kernel_id)
    if kernel_id.startswith("microscaling/"):
        return "curriculum artifacts --quant-error"
    return f"curriculum artifacts --only {kernel_id}"


def kernel_id_of(path: str) -> str | None:
    """`kernels/<topic>/artifacts/<stem>.<ext>` -> `<topic>/<stem>`."""
    if path == "kernels/bugs/artifacts/all_tools.txt":  # every program under every tool
        return "bugs/all_tools"
    m = re.fullmatch(r"kernels/([a-z0-9_-]+)/artifacts/(\d{2}_[a-z0-9_]+)\.[a-z.-]+", path)
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
    depth, opened, end = 0, False, len(lines) - 1
    for i in range(start, len(lines)):  # inline asm opens its own { } blocks, also at column 0
        depth += lines[i].count("{") - lines[i].count("}")
        opened = opened or "{" in lines[i]
        if opened and depth == 0:
            end = i
            break
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


def run(root: Path, only: str | None, out: Path | None, sanitize: bool = False,
        quant_error: bool = False) -> int:
    if quant_error:
        from curriculum.microscaling import write_quant_error

        _say(f"wrote {write_quant_error(root, out)}")
        return 0
    if sanitize:
        return run_sanitize(root, only, out)
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
    p.add_argument("--sanitize", action="store_true",
                   help="run the broken kernels of kernels/bugs/ through compute-sanitizer (and one "
                        "through cuda-gdb) and keep the tools' output")
    p.add_argument("--quant-error", action="store_true",
                   help="compute the FP4/FP8 quantisation errors of kernels/microscaling/ (CPU, numpy)")


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
    return run(args.root.resolve(), args.only, args.out, args.sanitize, args.quant_error)


if __name__ == "__main__":
    sys.exit(main())


# --- the `artifact` and `ncu` blocks of a page ---------------------------------------------

BLOCKS = ("artifact", "ncu")


@dataclass(frozen=True)
class BlockProblem:
    """Why a block cannot be shown: a stable code, a message, the 0-based line in the block."""

    code: str
    message: str
    line: int = 0
    hint: str | None = None


class BlockError(Exception):
    def __init__(self, problems: list[BlockProblem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


def _key_line(text: str, needle: str) -> int:
    for i, ln in enumerate(text.splitlines()):
        if needle in ln:
            return i
    return 0


def _spec(text: str, kind: str) -> dict[str, Any]:
    import yaml

    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise BlockError([BlockProblem(f"{kind}.syntax", f"{kind} block is not valid YAML: {exc}",
                                       mark.line if mark else 0)]) from exc
    if not isinstance(spec, dict):
        raise BlockError([BlockProblem(f"{kind}.syntax", f"{kind} block must be a YAML mapping",
                                       0, _HINTS[kind])])
    allowed = {"artifact": {"path", "lines", "grep", "caption"},
               "ncu": {"file", "files", "metrics", "caption"}}[kind]
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise BlockError([BlockProblem(f"{kind}.syntax", f"{kind} block: unknown key '{unknown[0]}'",
                                       _key_line(text, unknown[0]),
                                       f"keys: {', '.join(sorted(allowed))}")])
    return spec


_HINTS = {
    "artifact": "path: kernels/<topic>/artifacts/<file>, then optional lines: A-B, grep: REGEX",
    "ncu": "files: [kernels/<topic>/artifacts/<name>.ncu.json], metrics: [Section / Metric, ...]",
}


def _read_confined(ref: Any, root: Path, kind: str, line: int) -> tuple[str, str]:
    """The text of a file under `kernels/`, confined as every file a page pulls in."""
    from curriculum.assets import Refused, confine, read_asset

    if not isinstance(ref, str) or not ref.strip():
        raise BlockError([BlockProblem(f"{kind}.syntax", f"{kind} block needs a file path", line,
                                       _HINTS[kind])])
    found = confine(ref.strip(), root, root / "kernels", what=f"{kind} file")
    if isinstance(found, Refused):
        code = f"{kind}.missing" if found.code == "image.missing" else found.code
        message = found.message.replace("content folder", "kernels folder")
        raise BlockError([BlockProblem(code, message, line,
                                       f"write it with `{command_for(kernel_id_of(ref.strip()) or 'ID')}`"
                                       if code.endswith(".missing") else found.hint)])
    try:
        return ref.strip(), read_asset(found).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BlockError([BlockProblem(f"{kind}.missing", f"{kind} file '{ref}': {exc}",
                                       line)]) from exc


def _provenance_lines(text: str) -> tuple[list[str], int]:
    """The leading `// ` lines of an artifact, and how many there are."""
    head = []
    for ln in text.splitlines():
        if not ln.startswith("// "):
            break
        head.append(ln[3:])
    return head, len(head)


@dataclass(frozen=True)
class ArtifactExcerpt:
    path: str
    code: str
    lang: str
    first: int
    last: int
    grep: str | None
    command: str
    provenance: str
    caption: str


def artifact_excerpt(text: str, root: Path) -> ArtifactExcerpt:
    """What an `artifact` block shows; BlockError when it cannot be shown."""
    spec = _spec(text, "artifact")
    path, body = _read_confined(spec.get("path"), root, "artifact", _key_line(text, "path"))
    lines = body.splitlines()
    head, skip = _provenance_lines(body)
    first, last = skip + 1, len(lines)
    if "lines" in spec:
        at = _key_line(text, "lines")
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+))?\s*", str(spec["lines"]))
        if m is None:
            raise BlockError([BlockProblem("artifact.lines", f"lines '{spec['lines']}' is not "
                                           "A-B (1-based, inclusive)", at)])
        first, last = int(m.group(1)), int(m.group(2) or m.group(1))
        if not 1 <= first <= last <= len(lines):
            raise BlockError([BlockProblem("artifact.lines", f"lines {first}-{last} are outside "
                                           f"'{path}' ({len(lines)} lines)", at)])
    chosen = [(i + 1, ln) for i, ln in enumerate(lines) if first <= i + 1 <= last and i >= skip]
    grep = spec.get("grep")
    if grep is not None:
        at = _key_line(text, "grep")
        try:
            pattern = re.compile(str(grep))
        except re.error as exc:
            raise BlockError([BlockProblem("artifact.grep", f"grep '{grep}': {exc}", at)]) from exc
        chosen = [(n, ln) for n, ln in chosen if pattern.search(ln)]
        if not chosen:
            raise BlockError([BlockProblem("artifact.grep", f"grep '{grep}' matches no line of "
                                           f"'{path}'", at)])
    if not chosen:
        raise BlockError([BlockProblem("artifact.lines", f"nothing to show of '{path}'", 0)])
    kid = kernel_id_of(path)
    suffix = Path(path).suffix.lstrip(".")
    return ArtifactExcerpt(
        path=path, code="\n".join(ln for _, ln in chosen) + "\n",
        lang=suffix if suffix in ("ptx", "sass") else "text",
        first=chosen[0][0], last=chosen[-1][0], grep=str(grep) if grep is not None else None,
        command=command_for(kid) if kid else "",
        provenance=head[1] if len(head) > 1 else "", caption=str(spec.get("caption", "")).strip())


@dataclass(frozen=True)
class NcuTable:
    columns: list[str]  # one per file: kernel id and shape
    rows: list[tuple[str, list[str]]]  # label, one cell per file
    caption: str
    provenance: list[str]  # one line per distinct tool/GPU/date
    commands: list[str]


def _metric(data: dict[str, Any], name: str) -> dict[str, Any] | None:
    if " / " in name:
        section, _, metric = name.partition(" / ")
        return data.get("sections", {}).get(section.strip(), {}).get(metric.strip())
    return data.get("raw", {}).get(name.strip())


def _all_metrics(data: dict[str, Any]) -> list[str]:
    names = [f"{s} / {m}" for s, ms in data.get("sections", {}).items() for m in ms]
    return names + list(data.get("raw", {}))


def format_value(value: Any, unit: str) -> str:
    if isinstance(value, float):
        text = f"{value:,.0f}" if value.is_integer() else f"{value:,.2f}".rstrip("0").rstrip(".")
    else:
        text = str(value)
    unit = unit.strip()
    if unit in ("", "inst") and not isinstance(value, float):
        return text
    return f"{text} {unit}".strip() if unit != "%" else f"{text}%"


def ncu_table(text: str, root: Path) -> NcuTable:
    """What an `ncu` block shows; BlockError listing every missing file or metric."""
    spec = _spec(text, "ncu")
    files = spec.get("files", spec.get("file"))
    if isinstance(files, str):
        files = [files]
    if not isinstance(files, list) or not files:
        raise BlockError([BlockProblem("ncu.syntax", "ncu block needs file: or files:", 0,
                                       _HINTS["ncu"])])
    metrics = spec.get("metrics")
    if not isinstance(metrics, list) or not metrics:
        raise BlockError([BlockProblem("ncu.syntax", "ncu block needs a metrics: list",
                                       _key_line(text, "metrics"), _HINTS["ncu"])])
    problems: list[BlockProblem] = []
    datas = []
    for ref in files:
        line = _key_line(text, str(ref))
        try:
            path, body = _read_confined(ref, root, "ncu", line)
            data = json.loads(body)
            if not isinstance(data, dict) or "raw" not in data:
                raise ValueError("not an ncu data file of `curriculum artifacts`")
            datas.append((path, data))
        except BlockError as exc:
            problems.extend(exc.problems)
        except ValueError as exc:
            problems.append(BlockProblem("ncu.syntax", f"ncu file '{ref}': {exc}", line))
    if problems:
        raise BlockError(problems)
    rows = []
    for entry in metrics:
        label = unit_override = None
        if isinstance(entry, dict):
            name, label, unit_override = entry.get("metric"), entry.get("label"), entry.get("unit")
        else:
            name = entry
        line = _key_line(text, str(name))
        if not isinstance(name, str) or not name.strip():
            problems.append(BlockProblem("ncu.syntax", f"metric entry {entry!r} names no metric",
                                         line, "write a name, or {metric: NAME, label: TEXT}"))
            continue
        cells = []
        for path, data in datas:
            found = _metric(data, name)
            if found is None:
                from curriculum.errors import did_you_mean

                problems.append(BlockProblem("ncu.unknown-metric",
                                             f"no metric '{name}' in '{path}'", line,
                                             did_you_mean(name, _all_metrics(data))))
                continue
            unit = found.get("unit", "") if unit_override is None else str(unit_override)
            cells.append(format_value(found.get("value"), unit))
        rows.append((str(label or name.split(" / ")[-1]), cells))
    if problems:
        raise BlockError(problems)
    columns = [f"{d.get('kernel', p)} ({', '.join(f'{k}={v}' for k, v in d.get('shape', {}).items())})"
               for p, d in datas]
    prov = []
    for _, d in datas:
        pv = d.get("provenance", {})
        line = (f"Nsight Compute {pv.get('ncu', '').replace('Version ', '').split(' ')[0]}, "
                f"{pv.get('gpu', '')} (driver {pv.get('driver', '')}), clocks not locked, "
                f"{pv.get('date', '')[:10]}")
        if line not in prov:
            prov.append(line)
    return NcuTable(columns, rows, str(spec.get("caption", "")).strip(), prov,
                    [d.get("command", "") for _, d in datas])


def check_block(kind: str, text: str, root: Path) -> list[BlockProblem]:
    try:
        if kind == "artifact":
            artifact_excerpt(text, root)
        else:
            ncu_table(text, root)
    except BlockError as exc:
        return exc.problems
    return []


def check_blocks(body: Any, root: Path, diags: Any) -> None:
    """Report every problem of a body's `artifact` and `ncu` blocks at its file:line."""
    from curriculum.errors import Loc

    for kind, text, line in getattr(body.refs, "artifacts", ()):
        for p in check_block(kind, text, root):
            diags.error(Loc(body.file, body.line + line + 1 + p.line, 1), p.code, p.message, p.hint)


def render_block(kind: str, text: str, root: Path) -> str:
    """HTML of a block; raises BlockError (the build reports it)."""
    from html import escape

    from curriculum.markdown import highlight

    if kind == "artifact":
        ex = artifact_excerpt(text, root)
        where = f"lines {ex.first}–{ex.last}" if ex.first != ex.last else f"line {ex.first}"
        if ex.grep:
            where = f"lines matching <code>{escape(ex.grep)}</code>"
        made = f"; written by <code>{escape(ex.command)}</code>" if ex.command else ""
        prov = f" ({escape(ex.provenance)})" if ex.provenance else ""
        lead = f"{escape(ex.caption)} " if ex.caption else ""
        return (f'<figure class="artifact">{highlight(ex.code, ex.lang)}<figcaption>{lead}'
                f"<code>{escape(ex.path)}</code>, {where}{made}{prov}.</figcaption></figure>\n")
    table = ncu_table(text, root)
    head = "".join(f"<th>{escape(c)}</th>" for c in table.columns)
    body = "".join(
        f"<tr><th>{escape(label)}</th>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>"
        for label, cells in table.rows)
    cmds = ", ".join(f"<code>{escape(c)}</code>" for c in dict.fromkeys(table.commands) if c)
    lead = f"{escape(table.caption)} " if table.caption else ""
    return (f'<figure class="ncu"><table><thead><tr><th>metric</th>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table><figcaption>{lead}{escape('; '.join(table.provenance))}"
            f"; figures stored by {cmds}.</figcaption></figure>\n")
