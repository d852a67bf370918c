"""`curriculum artifacts --sanitize`: what the CUDA debugging tools say about broken kernels.

Each file of `kernels/bugs/programs/` is a small CUDA C++ program, a kernel with one deliberate
bug and a `main` that launches it. They sit one folder down so that `kernels/bugs/` holds no
`.cu` file and the bench does not take it for a topic: these programs are run, never timed. For each, on a machine with an NVIDIA GPU, this command

- compiles it with `nvcc -lineinfo -arch=sm_90` (line information, so the tools name source lines);
- runs it once plainly, to record what a user sees without the tool;
- runs it under `compute-sanitizer --tool <TOOL>`, the tool that finds its class of bug (`BUGS`);
- writes both outputs to `kernels/bugs/artifacts/NN_name.<tool>.txt`, under a few `//` lines of
  provenance, with machine paths replaced by repository-relative ones and long outputs trimmed.

One program, `GDB_TARGET`, is also compiled with `-g -G` and run under `cuda-gdb -batch` twice:
with the commands of `GDB_COMMANDS` (run to the fault, then read the state there) into
`NN_name.cuda-gdb.txt`, and with a breakpoint on the faulting line (`GDB_BREAK_COMMANDS`: stop
before the load, read the variables, step into the fault) into `NN_name.cuda-gdb-break.txt`.
Then every program runs under every tool, four at a time, and the first report and the summary
of each run go to `all_tools.txt`: which tool sees which bug, and which stay silent.

Each run is separate: a tool that fails, hangs (killed after its timeout, with its process group)
or prints undecodable bytes leaves its own artifact saying so, and the others are still written.
What ran and how long it took is logged to `sanitize.log` beside the artifacts. Tools are looked
up on the PATH, then in `$CUDA_HOME/bin` and `/usr/local/cuda/bin`.

Without nvcc or compute-sanitizer the command says so and exits 2.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
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
# What each tool's report (the part of the artifact after the tool's command line, so that file
# names and the plain run's message do not count) must contain to show the bug its header promises.
EXPECTED = {
    "bugs/01_out_of_bounds": r"Invalid __global__ write of size 4 bytes",
    "bugs/02_shared_race": r"(?i)race reported|hazard",
    "bugs/03_missing_syncthreads": r"(?i)race reported|hazard",
    "bugs/04_uninitialized_read": r"Uninitialized __global__ memory read",
    "bugs/05_misaligned_vector_load": r"(?i)is misaligned|misaligned address",
    "bugs/06_divergent_barrier": r"(?i)barrier error|divergent thread",
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
BREAK_LINE = "the bug: x is only 4-byte aligned"  # the line of GDB_TARGET to stop at
GDB_BREAK_COMMANDS = (
    "set breakpoint pending on",
    "break {file}:{line}",
    "run",
    "info cuda kernels",
    "cuda kernel block thread",
    "print i",
    "print x",
    "print ((unsigned long long)x + 16 * i) % 16",
    "next",
    "bt",
    "info line *$pc",
)
TOOLS = ("nvcc", "compute-sanitizer")
SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
NVCC = ("-lineinfo", "-arch=sm_90", "-std=c++17")
KEEP_HEAD, KEEP_TAIL = 70, 12
TIMEOUT = 40  # seconds, a tool's run
PLAIN_TIMEOUT = 20  # seconds, a plain run (a broken barrier can hang)
MATRIX_WORKERS = 4


def _say(text: str, err: bool = False) -> None:
    (sys.stderr if err else sys.stdout).write(text + "\n")


def tool_path(name: str) -> str | None:
    """`name` on the PATH, else in $CUDA_HOME/bin or /usr/local/cuda/bin; None if nowhere."""
    found = shutil.which(name)
    if found:
        return found
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if base and os.access(Path(base) / "bin" / name, os.X_OK):
            return str(Path(base) / "bin" / name)
    return None


def missing_tools() -> list[str]:
    return [t for t in TOOLS if tool_path(t) is None]


def source_of(root: Path, kernel_id: str) -> Path:
    topic, stem = kernel_id.split("/", 1)
    return root / "kernels" / topic / "programs" / f"{stem}.cu"


def tool_section(text: str) -> str:
    """An artifact's text from the compute-sanitizer command line on (the tool's own output)."""
    at = text.find("\n$ compute-sanitizer ")
    return text[at + 1 :] if at >= 0 else ""


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
    _, out = _exec(cmd, Path.cwd(), 60)
    found = [ln.strip() for ln in out.splitlines() if re.search(r"\d+\.\d+", ln)]
    return found[-1] if found else "unknown"


def _nvcc_version() -> str:
    return _exec([_tool("nvcc"), "--version"], Path.cwd(), 60)[1]


def _gdb_version() -> str:
    """cuda-gdb's own banner (its first lines name the debugger and its CUDA release)."""
    out = _exec([_tool("cuda-gdb"), "--version"], Path.cwd(), 60)[1]
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return " ".join(lines[:2]) if lines else "cuda-gdb (version unknown)"


def _tool(name: str) -> str:
    return tool_path(name) or name


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
    """Run a command, stdout and stderr merged as a terminal shows them, bytes that are not UTF-8
    replaced. A run past `timeout` is killed with its whole process group (a tool's children
    too) and gives 124; a command that cannot start gives 127. Never raises."""
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        return 127, f"{cmd[0]}: {exc}\n"
    try:
        raw, _ = proc.communicate(timeout=timeout)
        status = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        raw, _ = proc.communicate()
        raw += f"\n(stopped after {timeout} s)\n".encode()
        status = 124
    return status, raw.decode("utf-8", errors="replace")


def _shown(cmd: list[str], root: Path, build: Path) -> str:
    return clean(" ".join(cmd), root, build).strip()


def command_for(kernel_id: str) -> str:
    """The command that writes a broken kernel's artifacts (`bugs/all_tools`: all of them);
    `artifacts.command_for` answers for every kernel, these through this function."""
    if kernel_id == "bugs/all_tools":
        return "curriculum artifacts --sanitize"
    return f"curriculum artifacts --sanitize --only {kernel_id}"


def header(kernel_id: str, tool: str, stamp: dict[str, str]) -> str:
    what = {"cuda-gdb": "a cuda-gdb batch session, run to the fault",
            "cuda-gdb-break": "a cuda-gdb batch session, stopped at a breakpoint first"}.get(
        tool, f"the program run plainly, then under compute-sanitizer --tool {tool}")
    lines = [f"{kernel_id}: {what}; written by `{command_for(kernel_id)}`",
             f"{stamp['sanitizer']}, nvcc {stamp['nvcc']}, {stamp['gpu']}, {stamp['date']}",
             "paths made repository-relative; long outputs cut in the middle"]
    return "".join(f"// {ln}\n" for ln in lines)


def sanitize_one(root: Path, kernel_id: str, tool: str, build: Path,
                 stamp: dict[str, str]) -> str:
    """The artifact text for one broken program: build, plain run, tool run."""
    exe, compile_cmd = _build(root, kernel_id, build)
    parts = [f"$ {_shown(compile_cmd, root, build)}\n"]
    rc, out = _exec([str(exe)], root, PLAIN_TIMEOUT)
    parts.append(f"$ {_shown([str(exe)], root, build)}\n{clean(out, root, build)}(exit status {rc})\n")
    tool_cmd = _tool_cmd(tool, exe)
    rc, out = _exec(tool_cmd, root)
    parts.append(f"\n$ {_shown(['compute-sanitizer', *tool_cmd[1:]], root, build)}\n"
                 f"{trim(clean(out, root, build))}(exit status {rc})\n")
    return header(kernel_id, tool, stamp) + "\n".join(parts)


def _tool_cmd(tool: str, exe: Path) -> list[str]:
    return [_tool("compute-sanitizer"), "--tool", tool, "--show-backtrace", "device", str(exe)]


def _compile(root: Path, kernel_id: str, build: Path, debug: bool = False) -> tuple[Path, list[str], int, str]:
    """Compile one program into `build`: (executable, command, status, output)."""
    src = source_of(root, kernel_id).relative_to(root).as_posix()
    stem = kernel_id.split("/", 1)[1]
    if debug:
        exe = build / f"{stem}_debug"
        cmd = [_tool("nvcc"), "-g", "-G", "-arch=sm_90", "-std=c++17", "-o", str(exe), src]
    else:
        exe = build / stem
        cmd = [_tool("nvcc"), *NVCC, "-o", str(exe), src]
    rc, out = _exec(cmd, root, 300)
    return exe, ["nvcc", *cmd[1:]], rc, out


_built: dict[tuple[str, bool], tuple[Path, list[str], int, str]] = {}


def _build(root: Path, kernel_id: str, build: Path, debug: bool = False) -> tuple[Path, list[str]]:
    """The executable of a program (compiled now unless `compile_all` did it); RuntimeError with
    nvcc's output when it does not compile."""
    key = (kernel_id, debug)
    if key not in _built or _built[key][0].parent != build:
        _built[key] = _compile(root, kernel_id, build, debug)
    exe, cmd, rc, out = _built[key]
    if rc != 0:
        raise RuntimeError(f"{kernel_id}: nvcc{' -g -G' if debug else ''} failed:\n{out[-3000:]}")
    return exe, cmd


def compile_all(root: Path, jobs: list[tuple[str, bool]], build: Path) -> None:
    """Compile every (program, debug) of `jobs` at once, nvcc being the slow part of a capture."""
    with ThreadPoolExecutor(max_workers=min(8, max(1, len(jobs)))) as pool:
        results = list(pool.map(lambda j: _compile(root, j[0], build, j[1]), jobs))
    for job, result in zip(jobs, results, strict=True):
        _built[job] = result


def gdb_commands(root: Path, kernel_id: str, breakpoint: bool) -> tuple[str, ...]:
    """The -ex commands of a session: run to the fault, or stop first at the faulting line."""
    if not breakpoint:
        return GDB_COMMANDS
    src = source_of(root, kernel_id)
    lines = src.read_text().splitlines()
    line = next(i + 1 for i, ln in enumerate(lines) if BREAK_LINE in ln)
    return tuple(c.format(file=src.name, line=line) for c in GDB_BREAK_COMMANDS)


def gdb_session(root: Path, kernel_id: str, build: Path, stamp: dict[str, str],
                breakpoint: bool = False) -> str:
    exe, compile_cmd = _build(root, kernel_id, build, debug=True)
    commands = gdb_commands(root, kernel_id, breakpoint)
    gdb = tool_path("cuda-gdb")
    if gdb is None:
        raise RuntimeError(f"{kernel_id}: cuda-gdb not found on the PATH or in the toolkit")
    cmd = [gdb, "-q", "-batch", *(a for c in commands for a in ("-ex", c)), str(exe)]
    rc, out = _exec(cmd, root, 90)
    shown = "cuda-gdb -q -batch " + " ".join(f"-ex '{c}'" for c in commands) + " " + \
        _shown([str(exe)], root, build)
    kind = "cuda-gdb-break" if breakpoint else "cuda-gdb"
    return (header(kernel_id, kind, {**stamp, "sanitizer": stamp.get("gdb", "cuda-gdb")})
            + f"$ {_shown(compile_cmd, root, build)}\n$ {shown}\n"
            + trim(clean(out, root, build)) + f"(exit status {rc})\n")


_REPORT = re.compile(r"^========= (?!COMPUTE-SANITIZER)(?!\s)(?!.*SUMMARY)\S")


def summarise(out: str) -> tuple[str, list[str]]:
    """A tool's first report line and its summary lines (`... SUMMARY ...`)."""
    lines = [ln.rstrip() for ln in out.splitlines()]
    first = next((ln for ln in lines if _REPORT.match(ln)), "(no report)")
    return first, [ln for ln in lines if "SUMMARY" in ln]


def tool_matrix(root: Path, chosen: list[str], build: Path, stamp: dict[str, str]) -> str:
    """Every chosen program under every tool, MATRIX_WORKERS runs at a time: the text of
    `all_tools.txt`."""
    jobs = [(k, tool) for k in chosen for tool in SANITIZER_TOOLS]

    def one(job: tuple[str, str]) -> tuple[int, str, float]:
        kernel_id, tool = job
        try:
            exe, _ = _build(root, kernel_id, build)
        except RuntimeError as exc:
            return 127, str(exc), 0.0
        start = time.monotonic()
        rc, out = _exec(_tool_cmd(tool, exe), root)
        return rc, clean(out, root, build), time.monotonic() - start

    with ThreadPoolExecutor(max_workers=MATRIX_WORKERS) as pool:
        results = list(pool.map(one, jobs))
    lines = [f"{'program':<30} {'tool':<10} exit  first report / summary"]
    for (kernel_id, tool), (rc, out, _) in zip(jobs, results, strict=True):
        first, summary = summarise(out)
        lines.append(f"{kernel_id.split('/')[1]:<30} {tool:<10} {rc:>4}  {first}")
        lines.extend(f"{'':<30} {'':<10} {'':>4}  {s}" for s in summary)
    head = [f"bugs/all_tools: every program under every compute-sanitizer tool; written by "
            f"`{MATRIX_COMMAND}`",
            f"{stamp['sanitizer']}, nvcc {stamp['nvcc']}, {stamp['gpu']}, {stamp['date']}",
            "each row: the tool's exit status, its first report line, then its summary lines"]
    return "".join(f"// {ln}\n" for ln in head) + "\n".join(lines) + "\n"


MATRIX_FILE = "all_tools.txt"
MATRIX_COMMAND = "curriculum artifacts --sanitize"


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
             "sanitizer": _version([_tool("compute-sanitizer"), "--version"]),
             "gdb": _gdb_version(),
             "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    folder = (out / "bugs") if out is not None else root / "kernels" / "bugs" / "artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / "sanitize.log"
    log = [f"{stamp}", f"cuda-gdb: {tool_path('cuda-gdb') or 'not found'}"]
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        build = Path(tmp)
        jobs = [(k, t) for k, t in chosen]
        if any(k == GDB_TARGET for k, _ in chosen):
            jobs += [(GDB_TARGET, "cuda-gdb"), (GDB_TARGET, "cuda-gdb-break")]
        start = time.monotonic()
        compile_all(root, [*dict.fromkeys((k, t.startswith("cuda-gdb")) for k, t in jobs)], build)
        log.append(f"compiled in {time.monotonic() - start:.1f} s")
        for kernel_id, tool in jobs:
            start = time.monotonic()
            try:
                if tool.startswith("cuda-gdb"):
                    text = gdb_session(root, kernel_id, build, stamp, tool == "cuda-gdb-break")
                else:
                    text = sanitize_one(root, kernel_id, tool, build, stamp)
            except Exception as exc:  # one program's failure must not lose the others' output
                _say(f"curriculum artifacts --sanitize: {kernel_id} {tool}: {exc}", err=True)
                log.append(f"{kernel_id} {tool}: FAILED {type(exc).__name__}: {exc}")
                status = 1
                continue
            path = folder / artifact_name(kernel_id, tool)
            path.write_text(text, encoding="utf-8")
            log.append(f"{kernel_id} {tool}: {time.monotonic() - start:.1f} s, {path.name}")
            want = EXPECTED.get(kernel_id) if not tool.startswith("cuda-gdb") else None
            if want and not re.search(want, tool_section(text)):
                _say(f"curriculum artifacts --sanitize: {path.name} lacks /{want}/", err=True)
                log.append(f"  {path.name} lacks /{want}/")
                status = 1
            _say(f"wrote {path}")
            log_path.write_text("\n".join(log) + "\n", encoding="utf-8")
        start = time.monotonic()
        try:
            matrix = tool_matrix(root, [k for k, _ in chosen], build, stamp)
            (folder / MATRIX_FILE).write_text(matrix, encoding="utf-8")
            log.append(f"all tools: {time.monotonic() - start:.1f} s, {MATRIX_FILE}")
            _say(f"wrote {folder / MATRIX_FILE}")
        except Exception as exc:
            _say(f"curriculum artifacts --sanitize: all tools: {exc}", err=True)
            log.append(f"all tools: FAILED {type(exc).__name__}: {exc}")
            status = 1
    log_path.write_text("\n".join(log) + "\n", encoding="utf-8")
    return status
