"""Finding suites and turning them into cases.

A topic is a folder `kernels/<topic>/` with a `suite.py` binding `SUITE`. The
suite module is imported by file path, so `kernels/` needs no `__init__.py`
and nothing is installed. Every `.cu` file of the topic must follow the
`NN_name.cu` pattern and be claimed by exactly one benchmark; anything else
is an error naming the file, because a version nobody runs is a figure that
silently never appears. A `.py` file whose name starts with a digit is a
version too (`NN_name.py`), held to the same rules; other `.py` files
(`suite.py`, helpers) are not.

A suite may reuse another topic's inputs, references and library candidates
(a Triton topic measured against the CUDA ones) through `suite_module`; the
fingerprint of its cases then covers that topic's `suite.py` as well.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from curriculum.bench.api import (
    PYTHON_VERSION_FILE,
    VERSION_FILE,
    Benchmark,
    Suite,
    Version,
    discover_versions,
)
from curriculum.bench.errors import SuiteError, UsageError
from curriculum.bench.staleness import fingerprint
from curriculum.results import shape_label, source_hash


@dataclass(frozen=True)
class Case:
    """One version of one benchmark at one shape: the unit that is checked and timed."""

    topic: str
    benchmark: Benchmark
    version: Version
    shape: dict[str, int]
    shape_label: str
    headline: bool
    source_hash: str
    suite_hash: str
    fingerprint: str = ""
    expected_refusal: bool = False

    @property
    def id(self) -> str:
        return self.version.id

    @property
    def key(self) -> tuple[str, str]:
        return (self.id, self.shape_label)

    @property
    def size(self) -> int:
        """Product of the shape's dimensions, to order shapes small to large."""
        total = 1
        for v in self.shape.values():
            total *= v
        return total


@dataclass(frozen=True)
class LoadedSuite:
    suite: Suite
    path: Path
    suite_hash: str
    claims: dict[str, Benchmark]  # version stem -> benchmark
    versions: list[Version]


def kernels_dir(root: Path) -> Path:
    return root / "kernels"


def topic_dirs(root: Path, topic_glob: str | Sequence[str] = "*") -> list[Path]:
    """Every topic folder whose name matches the glob (or any of several globs)."""
    base = kernels_dir(root)
    if not base.is_dir():
        return []
    globs = [topic_glob] if isinstance(topic_glob, str) else list(topic_glob)
    return sorted(
        p
        for p in base.iterdir()
        if p.is_dir()
        and p.name != "results"
        and not p.name.startswith((".", "_"))
        and any(fnmatch.fnmatchcase(p.name, g) for g in globs)
        and _is_topic(p)
    )


def _is_topic(folder: Path) -> bool:
    """A folder with a suite or with kernels; one holding only data (traces, artifacts) is not."""
    return (folder / "suite.py").is_file() or any(folder.glob("*.cu"))


def only_patterns(pattern: str | None) -> list[str]:
    """The globs of an --only value: several may be given, separated by commas
    ('triton/*,softmax/03_*'), so that one run times them all."""
    if not pattern:
        return []
    return [p.strip() for p in pattern.split(",") if p.strip()]


def topic_globs_of(pattern: str | None) -> list[str]:
    """The topic parts of an --only value, so that only those suites are loaded:
    'memory/*' -> ['memory']; 'triton/*,gemm/12_*' -> ['triton', 'gemm']; '*copy*' -> ['*']."""
    topics: list[str] = []
    for p in only_patterns(pattern):
        topic = p.split("/", 1)[0] if "/" in p else "*"
        if topic not in topics:
            topics.append(topic)
    return ["*"] if not topics or "*" in topics else topics


def _import_file(module_name: str, path: Path) -> ModuleType:
    """Import a Python file by path under `module_name` (kept in sys.modules)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise SuiteError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise SuiteError(f"{path}: import failed: {type(exc).__name__}: {exc}") from exc
    return module


def suite_module(topic: str, near: str | Path) -> ModuleType:
    """The module of `kernels/<topic>/suite.py`, for a suite that reuses its inputs,
    references, work model and library candidates; `near` is the calling suite's
    `__file__`. Imported once (the module the bench loaded, if it did).

    Write the call with the topic as a literal, `suite_module("softmax", __file__)`:
    the fingerprint finds the topics a suite uses by reading its source.
    """
    module_name = f"curriculum_suite_{topic}"
    loaded = sys.modules.get(module_name)
    if loaded is not None:
        return loaded
    path = Path(near).resolve().parent.parent / topic / "suite.py"
    if not path.is_file():
        raise SuiteError(f"{near}: uses topic {topic!r}, which has no {path}")
    return _import_file(module_name, path)


def import_python_version(version: Version) -> ModuleType:
    """Import a `.py` version, fresh, under a name of its own (the harness calls this
    where it would compile a `.cu` version; a Triton kernel compiles at its first launch,
    which is a check, never a timed launch)."""
    return _import_file(f"curriculum_version_{version.topic}_{version.stem}", version.path)


def load_suite(topic_dir: Path) -> LoadedSuite:
    """Import `suite.py` of a topic and check that it claims every version exactly once."""
    path = topic_dir / "suite.py"
    cu_files = sorted(topic_dir.glob("*.cu"))
    if not path.is_file():
        if cu_files:
            raise SuiteError(f"{topic_dir}: has .cu files but no suite.py binding SUITE")
        raise SuiteError(f"{topic_dir}: no suite.py")
    module = _import_file(f"curriculum_suite_{topic_dir.name}", path)
    suite = getattr(module, "SUITE", None)
    if not isinstance(suite, Suite):
        raise SuiteError(f"{path}: no module-level SUITE = Suite(...)")
    if suite.topic != topic_dir.name:
        raise SuiteError(
            f"{path}: SUITE.topic is {suite.topic!r}, the folder is {topic_dir.name!r}"
        )
    problems = []
    for cu in cu_files:
        if not VERSION_FILE.match(cu.name):
            problems.append(f"{cu}: not named NN_name.cu (two digits, lower-case name)")
    for py in sorted(topic_dir.glob("[0-9]*.py")):
        if not PYTHON_VERSION_FILE.match(py.name):
            problems.append(f"{py}: not named NN_name.py (two digits, lower-case name)")
    versions = discover_versions(topic_dir)
    stems = [v.stem for v in versions]
    for dup in sorted({s for s in stems if stems.count(s) > 1}):
        problems.append(f"{topic_dir}: {dup}.cu and {dup}.py are one version twice")
    claims: dict[str, Benchmark] = {}
    names = [b.name for b in suite.benchmarks]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{path}: two benchmarks named {dup!r}")
    for version in versions:
        owners = [b for b in suite.benchmarks if b.claims(version)]
        if not owners:
            globs = ", ".join(f"{b.name}={b.match!r}" for b in suite.benchmarks)
            problems.append(f"{version.path}: claimed by no benchmark (globs: {globs})")
        elif len(owners) > 1:
            who = ", ".join(b.name for b in owners)
            problems.append(f"{version.path}: claimed by several benchmarks ({who})")
        else:
            claims[version.stem] = owners[0]
    for bench in suite.benchmarks:
        if not bench.shapes:
            problems.append(f"{path}: benchmark {bench.name!r} has no shapes")
        if dict(bench.headline) not in [dict(s) for s in bench.shapes]:
            problems.append(f"{path}: benchmark {bench.name!r}: headline shape is not in shapes")
    if problems:
        raise SuiteError("\n".join(problems))
    return LoadedSuite(
        suite=suite,
        path=path,
        suite_hash=source_hash(path),
        claims=claims,
        versions=versions,
    )


def expects_refusal(topic_dir: Path) -> bool:
    """Whether a topic's suite is declared `expected_refusal` (False if it does not load)."""
    try:
        return load_suite(topic_dir).suite.expected_refusal
    except SuiteError:
        return False


def load_suites(root: Path, topic_glob: str | Sequence[str] = "*") -> list[LoadedSuite]:
    """Every suite under kernels/ whose topic matches; all problems reported at once."""
    loaded, errors = [], []
    for topic_dir in topic_dirs(root, topic_glob):
        try:
            loaded.append(load_suite(topic_dir))
        except SuiteError as exc:
            errors.append(str(exc))
    if errors:
        raise SuiteError("\n".join(errors))
    return loaded


def plan_cases(suites: list[LoadedSuite]) -> list[Case]:
    """Every (version, shape) of every suite, ordered by id then size."""
    cases = []
    for loaded in suites:
        for version in loaded.versions:
            bench = loaded.claims[version.stem]
            vhash = source_hash(version.path)
            root = loaded.path.parent.parent.parent
            vprint = fingerprint(root, loaded.suite.topic, version.stem) or ""
            headline = dict(bench.headline)
            for shape in bench.shapes:
                s = dict(shape)
                cases.append(
                    Case(
                        topic=loaded.suite.topic,
                        benchmark=bench,
                        version=version,
                        shape=s,
                        shape_label=shape_label(s),
                        headline=s == headline,
                        source_hash=vhash,
                        suite_hash=loaded.suite_hash,
                        fingerprint=vprint,
                        expected_refusal=loaded.suite.expected_refusal,
                    )
                )
    cases.sort(key=lambda c: (c.id, c.size, c.shape_label))
    return cases


def select_cases(
    cases: list[Case],
    only: str | None = None,
    small: bool = False,
    headline: bool = False,
    shape: str | None = None,
) -> list[Case]:
    """Filter by --only globs on the case id and a --shape glob on the shape label, and
    optionally to one shape per version."""
    patterns = only_patterns(only)
    chosen = [
        c for c in cases if not patterns or any(fnmatch.fnmatchcase(c.id, p) for p in patterns)
    ]
    if shape:
        chosen = [c for c in chosen if fnmatch.fnmatchcase(c.shape_label, shape)]
    if headline:
        chosen = [c for c in chosen if c.headline]
    if small:
        smallest: dict[str, Case] = {}
        for c in chosen:
            if c.id not in smallest or c.size < smallest[c.id].size:
                smallest[c.id] = c
        chosen = [c for c in chosen if smallest[c.id] is c]
    return chosen


def parse_shard(text: str) -> tuple[int, int]:
    """'i/n' with 0 <= i < n."""
    try:
        i_text, n_text = text.split("/")
        i, n = int(i_text), int(n_text)
    except ValueError as exc:
        raise UsageError(f"--shard {text!r}: expected i/n, e.g. 0/2") from exc
    if n < 1 or not 0 <= i < n:
        raise UsageError(f"--shard {text!r}: need 0 <= i < n (shards are numbered from 0)")
    return i, n


def shard_cases(cases: list[Case], index: int, count: int) -> list[Case]:
    """Deterministic partition: case k of the (id, shape) order goes to shard k mod n.

    Shard before dropping up-to-date cases: the results file changes while
    other shards write, and every shard must agree on the partition.
    """
    ordered = sorted(cases, key=lambda c: (c.id, c.size, c.shape_label))
    return [c for k, c in enumerate(ordered) if k % count == index]
