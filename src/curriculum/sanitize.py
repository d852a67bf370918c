"""`curriculum artifacts --sanitize`: what the CUDA debugging tools say about broken kernels.

Each file of `kernels/bugs/programs/` is a small CUDA C++ program, a kernel with one deliberate
bug and a `main` that launches it. They sit one folder down so that `kernels/bugs/` holds no
`.cu` file and the bench does not take it for a topic: these programs are run, never timed. For each, on a machine with an NVIDIA GPU, this command

- compiles it with `nvcc -lineinfo -arch=sm_90` (line information, so the tools name source lines);
- runs it once plainly, to record what a user sees without the tool;
- runs it under `compute-sanitizer --tool <TOOL>`, the tool that finds its class of bug (`BUGS`);
- writes both outputs to `kernels/bugs/artifacts/NN_name.<tool>.txt`, under a few `//` lines of
  provenance, with machine paths replaced by repository-relative ones and long outputs trimmed.

One program, `GDB_TARGET`, is also compiled with `-g -G` and run under `cuda-gdb -batch` with the
commands of `GDB_COMMANDS`; that session goes to `NN_name.cuda-gdb.txt`.

Without nvcc or compute-sanitizer on the PATH the command says so and exits 2.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

BUGS = (
    ("bugs/01_out_of_bounds", "memcheck"),
    ("bugs/02_shared_race", "racecheck"),
    ("bugs/03_missing_syncthreads", "racecheck"),
    ("bugs/04_uninitialized_read", "initcheck"),
    ("bugs/05_misaligned_vector_load", "memcheck"),
    ("bugs/06_divergent_barrier", "synccheck"),
    ("bugs/07_syncwarp_mask", "synccheck"),
)
# What each tool's report must contain for the artifact to show the bug its header promises.
EXPECTED = {
    "bugs/01_out_of_bounds": r"Invalid __global__ write of size 4 bytes",
    "bugs/02_shared_race": r"(?i)race reported|hazard",
    "bugs/03_missing_syncthreads": r"(?i)race reported|hazard",
    "bugs/04_uninitialized_read": r"Uninitialized __global__ memory read",
    "bugs/05_misaligned_vector_load": r"(?i)misaligned",
    "bugs/06_divergent_barrier": r"(?i)barrier error|divergent",
    "bugs/07_syncwarp_mask": r"(?i)barrier error|invalid arguments",
}
GDB_TARGET = "bugs/05_misaligned_vector_load"
GDB_COMMANDS = (
    "run",
    "info cuda kernels",
    "cuda kernel block thread",
    "bt",
    "info locals",
    "print x",
    "print n4",
    "print (unsigned long long)x % 16",
    "info line *$pc",
)
TOOLS = ("nvcc", "compute-sanitizer")
NVCC = ("-lineinfo", "-arch=sm_90", "-std=c++17")
KEEP_HEAD, KEEP_TAIL = 70, 12
TIMEOUT = 40


def _say(text: str, err: bool = False) -> None:
    (sys.stderr if err else sys.stdout).write(text + "\n")


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


def source_of(root: Path, kernel_id: str) -> Path:
    topic, stem = kernel_id.split("/", 1)
    return root / "kernels" / topic / "programs" / f"{stem}.cu"


def artifact_name(kernel_id: str, tool: str) -> str:
    return f"{kernel_id.split('/', 1)[1]}.{tool}.txt"


def clean(text: str, root: Path, build: Path) -> str:
    """Tool output with this machine's paths made repository-relative, addresses kept."""
    text = text.replace(str(build) + "/", "build/").replace(str(build), "build")
    text = text.replace(str(root) + "/", "").replace(str(root), ".")
    text = re.sub(r"/tmp/[A-Za-z0-9_.-]+/", "build/", text)
    lines = [ln.rstrip() for ln in text.splitlines()]
    # cuda-gdb's host-thread chatter carries process ids and says nothing about the bug
    lines = [ln for ln in lines if not re.match(r"\[(New Thread|Thread debugging|Detaching|"
                                                r"Inferior \d+ \(process)", ln)]
    return "\n".join(lines).strip("\n") + "\n"


def trim(text: str, head: int = KEEP_HEAD, tail: int = KEEP_TAIL) -> str:
    """The first `head` and last `tail` lines of a long output, the cut said in one line."""
    lines = text.splitlines()
    if len(lines) <= head + tail + 1:
        return text
    cut = len(lines) - head - tail
    return "\n".join([*lines[:head], f"... ({cut} lines of the same kind left out) ...",
                      *lines[-tail:]]) + "\n"


def _version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    found = [ln.strip() for ln in out.splitlines() if re.search(r"\d+\.\d+", ln)]
    return found[-1] if found else "unknown"


def _nvcc_version() -> str:
    try:
        return subprocess.run(["nvcc", "--version"], capture_output=True, text=True,
                              timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _gpu() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown GPU"
    name, _, driver = out.partition(",")
    return f"{name.strip()} (driver {driver.strip()})" if name else "unknown GPU"


def _exec(cmd: list[str], cwd: Path, timeout: int = TIMEOUT) -> tuple[int, str]:
    """Run a command, stdout and stderr merged as a terminal shows them; 124 on a timeout."""
    try:
        done = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return 124, out + f"\n(stopped after {timeout} s)\n"
    return done.returncode, done.stdout


def _shown(cmd: list[str], root: Path, build: Path) -> str:
    return clean(" ".join(cmd), root, build).strip()


def header(kernel_id: str, tool: str, stamp: dict[str, str]) -> str:
    from curriculum.artifacts import command_for

    what = ("a cuda-gdb batch session" if tool == "cuda-gdb"
            else f"the program run plainly, then under compute-sanitizer --tool {tool}")
    lines = [f"{kernel_id}: {what}; written by `{command_for(kernel_id)}`",
             f"{stamp['sanitizer']}, nvcc {stamp['nvcc']}, {stamp['gpu']}, {stamp['date']}",
             "paths made repository-relative; long outputs cut in the middle"]
    return "".join(f"// {ln}\n" for ln in lines)


def sanitize_one(root: Path, kernel_id: str, tool: str, build: Path,
                 stamp: dict[str, str]) -> str:
    """The artifact text for one broken program: build, plain run, tool run."""
    src = source_of(root, kernel_id).relative_to(root).as_posix()
    exe = build / kernel_id.split("/", 1)[1]
    compile_cmd = ["nvcc", *NVCC, "-o", str(exe), src]
    rc, out = _exec(compile_cmd, root)
    if rc != 0:
        raise RuntimeError(f"{kernel_id}: nvcc failed:\n{out[-3000:]}")
    parts = [f"$ {_shown(compile_cmd, root, build)}\n"]
    rc, out = _exec([str(exe)], root)
    parts.append(f"$ {_shown([str(exe)], root, build)}\n{clean(out, root, build)}(exit status {rc})\n")
    tool_cmd = ["compute-sanitizer", "--tool", tool, "--show-backtrace", "device", str(exe)]
    rc, out = _exec(tool_cmd, root)
    parts.append(f"\n$ {_shown(tool_cmd, root, build)}\n{trim(clean(out, root, build))}"
                 f"(exit status {rc})\n")
    return header(kernel_id, tool, stamp) + "\n".join(parts)


def gdb_session(root: Path, kernel_id: str, build: Path, stamp: dict[str, str]) -> str:
    src = source_of(root, kernel_id).relative_to(root).as_posix()
    exe = build / (kernel_id.split("/", 1)[1] + "_debug")
    compile_cmd = ["nvcc", "-g", "-G", "-arch=sm_90", "-std=c++17", "-o", str(exe), src]
    rc, out = _exec(compile_cmd, root)
    if rc != 0:
        raise RuntimeError(f"{kernel_id}: nvcc -g -G failed:\n{out[-3000:]}")
    cmd = ["cuda-gdb", "-q", "-batch", *(a for c in GDB_COMMANDS for a in ("-ex", c)), str(exe)]
    rc, out = _exec(cmd, root)
    shown = "cuda-gdb -q -batch " + " ".join(f"-ex '{c}'" for c in GDB_COMMANDS) + " " + \
        _shown([str(exe)], root, build)
    return (header(kernel_id, "cuda-gdb", stamp)
            + f"$ {_shown(compile_cmd, root, build)}\n$ {shown}\n"
            + trim(clean(out, root, build)) + f"(exit status {rc})\n")


def run_sanitize(root: Path, only: str | None, out: Path | None) -> int:
    missing = missing_tools()
    if missing:
        _say(f"curriculum artifacts --sanitize: {', '.join(missing)} not found on the PATH; this "
             "command needs the CUDA toolkit (nvcc, compute-sanitizer, optionally cuda-gdb) on a "
             "machine with an NVIDIA GPU", err=True)
        return 2
    chosen = [(k, t) for k, t in BUGS if only is None or fnmatch.fnmatchcase(k, only)]
    if not chosen:
        _say(f"curriculum artifacts --sanitize: nothing matches --only {only!r}", err=True)
        return 2
    release = re.search(r"release ([\d.]+)", _nvcc_version())
    stamp = {"gpu": _gpu(), "nvcc": release.group(1) if release else "unknown",
             "sanitizer": _version(["compute-sanitizer", "--version"]),
             "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    folder = (out / "bugs") if out is not None else root / "kernels" / "bugs" / "artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        build = Path(tmp)
        jobs = [(k, t) for k, t in chosen]
        if any(k == GDB_TARGET for k, _ in chosen) and shutil.which("cuda-gdb"):
            jobs.append((GDB_TARGET, "cuda-gdb"))
        for kernel_id, tool in jobs:
            try:
                text = (gdb_session(root, kernel_id, build, stamp) if tool == "cuda-gdb"
                        else sanitize_one(root, kernel_id, tool, build, stamp))
            except RuntimeError as exc:
                _say(f"curriculum artifacts --sanitize: {exc}", err=True)
                status = 1
                continue
            path = folder / artifact_name(kernel_id, tool)
            path.write_text(text, encoding="utf-8")
            want = EXPECTED.get(kernel_id) if tool != "cuda-gdb" else None
            if want and not re.search(want, text):
                _say(f"curriculum artifacts --sanitize: {path.name} lacks /{want}/", err=True)
                status = 1
            _say(f"wrote {path}")
    return status
