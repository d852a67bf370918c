"""The suite API: what `kernels/<topic>/suite.py` declares.

A topic folder holds numbered `.cu` files (`01_naive.cu`, `02_coalesced.cu`, ...)
and one `suite.py` that binds a module-level name `SUITE` to a `Suite`. The list
of versions is discovered from the files; a suite only says how to feed, launch,
check and count them. Each `Benchmark` claims versions by a glob on the file
stem, so one topic can hold several operations (copy, reduce, transpose).

A version can also be a numbered `.py` file (`01_softmax.py`): a Python module
that defines its kernel (in Triton, say) and the functions its suite's launcher
calls. The harness imports it where it would compile a `.cu` file; everything
after that (the checks, the timing, the library candidates, the fingerprint of
its source) is the same for both kinds.

Nothing here imports CuPy: a suite module is imported on machines without a
GPU (for `--list` and for the build's staleness checks), so suites import
`cupy` inside their functions only.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Shape = Mapping[str, int]
Arrays = dict[str, Any]  # name -> cupy.ndarray
CeilingName = Literal["copy", "read", "sgemm_fp32", "gemm_bf16"]

VERSION_FILE = re.compile(r"^(?P<number>\d{2})_(?P<name>[a-z0-9_]+)\.cu$")
# A version written in Python; other .py files of a topic (suite.py, helpers) are not versions.
PYTHON_VERSION_FILE = re.compile(r"^(?P<number>\d{2})_(?P<name>[a-z0-9_]+)\.py$")


@dataclass(frozen=True)
class Version:
    """One `.cu` or `.py` file: a kernel version of a topic."""

    topic: str
    path: Path
    number: int
    name: str
    source: str

    @property
    def stem(self) -> str:
        return self.path.stem

    @property
    def id(self) -> str:
        return f"{self.topic}/{self.stem}"

    @property
    def language(self) -> Literal["cuda", "python"]:
        """The kind of file: "python" for a `.py` version (imported), "cuda" for a `.cu` one."""
        return "python" if self.path.suffix == ".py" else "cuda"

    @property
    def header(self) -> list[str]:
        """The leading comment block (`//` in a .cu file, `#` in a .py file), markers stripped."""
        marker = "#" if self.language == "python" else "//"
        lines = []
        for line in self.source.splitlines():
            if not line.startswith(marker):
                break
            lines.append(line[len(marker) :].strip())
        return lines

    @property
    def title(self) -> str:
        head = self.header
        return head[0] if head else self.stem


@dataclass(frozen=True)
class OutputSpec:
    """An output buffer the harness allocates and poisons before each check."""

    shape: Callable[[Shape], tuple[int, ...]]
    dtype: str  # numpy dtype name, e.g. "float32", "bfloat16" is not numpy: use "uint16" + view


@dataclass(frozen=True)
class Roofline:
    """Which same-run ceilings bound this benchmark.

    The floor time is max(bytes / bandwidth, flops / compute); a ceiling left as
    None does not bound it.
    """

    bandwidth: CeilingName | None = "copy"
    compute: CeilingName | None = None


@dataclass(frozen=True)
class LibraryBaseline:
    """A library operation timed in the same run at the same shape.

    `make` receives the case's inputs and shape and returns a zero-argument
    callable that enqueues the library operation on the current stream. It
    may raise (a backend that does not take the shape or dtype, a library that
    is not installed): the candidate is then recorded as unavailable, with the
    exception as the reason, and the run goes on.

    `name` is short and human, what a page prints after "vs": "cuDNN SDPA",
    "torch.compile(F.layer_norm)", "cuBLAS (cupy.matmul)".
    """

    name: str
    make: Callable[[Arrays, Shape], Callable[[], None]]


@dataclass(frozen=True)
class Benchmark:
    """One operation of a topic, and every version that implements it.

    - `match`: glob on version stems (e.g. "*_copy_*"); each .cu file must be
      claimed by exactly one benchmark of its suite.
    - `inputs(shape, rng)`: fresh random device arrays (never zeros).
    - `outputs`: output buffers by name; poisoned (NaN, or all bits set) before
      every checked launch.
    - `reference(inputs64, shape)`: the float64 answer from the inputs upcast to
      float64 (device arrays), by output name.
    - `launch(module, version, shape, arrays)`: enqueue the version's kernel(s)
      on the current stream; `module` is the compiled `cupy.RawModule` (for a
      `.py` version, the imported module), `arrays` holds inputs and outputs
      by name.
    - `flops(shape)`, `bytes(shape)`: the work model; `work_convention` states
      what is counted (e.g. "2MNK FLOPs; A, B read once and C written once").
    - `tolerance`: largest ||out-ref||/||ref||, with `tolerance_reason`.
    - `shapes`: every shape to sweep; `headline` is the one pages cite by default.
    - `compile_options`: NVRTC options for every version of this benchmark;
      `version_options` adds options for individual stems (a `.py` version
      is imported, and takes none).
    - `baselines`: every library candidate, timed at each shape once per run;
      the fastest that ran is the case's library figure (`pct_library`), and
      every candidate is recorded with its time or the reason it could not
      run. `baseline` (one candidate) is the older spelling of the same.
    - `items(shape)`, `items_label`: for microbenchmarks, how many items one
      launch processes and what an item is ("dependent loads", "launches");
      the case then records `items`, and pages can cite ns and cycles per item.
    - `flush_l2`: flush the L2 before every timed repetition (the default);
      False keeps the data warm, for cache-level microbenchmarks.
    - `roofline`: `Roofline(bandwidth=None, compute=None)` states that no
      ceiling bounds the benchmark; its cases then have no `pct_roofline`.
    - `check_shapes`: shapes every version is checked at but never timed
      (ragged sizes, say), once per version per run, with the smallest of
      `shapes`; a version wrong there is refused at every shape.
    """

    name: str
    match: str
    inputs: Callable[[Shape, Any], Arrays]
    outputs: Mapping[str, OutputSpec]
    reference: Callable[[Arrays, Shape], Arrays]
    launch: Callable[[Any, Version, Shape, Arrays], None]
    flops: Callable[[Shape], float]
    bytes: Callable[[Shape], float]
    work_convention: str
    tolerance: float
    tolerance_reason: str
    shapes: Sequence[Shape]
    headline: Shape
    roofline: Roofline = field(default_factory=Roofline)
    baselines: Sequence[LibraryBaseline] = ()
    baseline: LibraryBaseline | None = None
    compile_options: tuple[str, ...] = ("--std=c++17", "-arch=sm_90")
    version_options: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    compare: Callable[[Arrays], Arrays] | None = None  # e.g. view uint16 as bf16 -> float64
    items: Callable[[Shape], float] | None = None
    items_label: str = ""
    flush_l2: bool = True
    check_shapes: Sequence[Shape] = ()

    def claims(self, version: Version) -> bool:
        return fnmatch.fnmatchcase(version.stem, self.match)

    @property
    def candidates(self) -> tuple[LibraryBaseline, ...]:
        """Every library candidate: `baselines`, then `baseline` if also given."""
        out = tuple(self.baselines)
        if self.baseline is not None and self.baseline not in out:
            out += (self.baseline,)
        return out

    @property
    def bounded(self) -> bool:
        """Whether any ceiling bounds this benchmark (else no roofline figure)."""
        return self.roofline.bandwidth is not None or self.roofline.compute is not None


@dataclass(frozen=True)
class Suite:
    """What `kernels/<topic>/suite.py` binds to the name `SUITE`."""

    topic: str
    benchmarks: Sequence[Benchmark]
    description: str = ""
    # Every case is expected to be refused (kernels that cheat the checks): `bench`
    # runs the suite only when --only names its topic, records none of its cases,
    # and fails the run if one is let through.
    expected_refusal: bool = False


def version_match(name: str) -> re.Match[str] | None:
    """The number and name of a version file (`NN_name.cu` or `NN_name.py`), else None."""
    return VERSION_FILE.match(name) or PYTHON_VERSION_FILE.match(name)


def discover_versions(topic_dir: Path) -> list[Version]:
    """Every `NN_name.cu` and `NN_name.py` file in a topic folder, in number order."""
    versions = []
    paths = [*topic_dir.glob("*.cu"), *topic_dir.glob("*.py")]
    for path in sorted(paths, key=lambda p: p.name):
        m = version_match(path.name)
        if not m:
            continue
        versions.append(
            Version(
                topic=topic_dir.name,
                path=path,
                number=int(m["number"]),
                name=m["name"],
                source=path.read_text(encoding="utf-8"),
            )
        )
    return versions
