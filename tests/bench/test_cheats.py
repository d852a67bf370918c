"""Every way a kernel can fool a harness, driven through the harness on the fake backend.

A fake cheating kernel is a `.cu` file whose header names its behaviour
(`// cheat: behaviour=constant`); `CheatModule` plays it on NumPy arrays for an
add, out = x + y, with x in [100, 101) and y in [0, 1). Each test asserts the
refusal code the harness prints first. The real cheating kernels are in
`kernels/cheats/` and run on a GPU in `test_cheats_gpu.py`.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import numpy
import pytest
from fakebench import FakeBackend, options, spend

from curriculum.bench.refusals import REASONS, code_of, physical_floor_ms
from curriculum.bench.runner import SilentReporter, plan, run_bench
from curriculum.results import read_results

ROOT = Path(__file__).resolve().parents[2]
COPY_GBPS = 1000.0  # fakebench's copy ceiling

SUITE = """
import numpy
from curriculum.bench.api import Benchmark, OutputSpec, Roofline, Suite


def inputs(shape, rng):
    n = shape["n"]
    return {
        "x": rng.random(n, dtype=numpy.float32) + numpy.float32(100.0),
        "y": rng.random(n, dtype=numpy.float32),
    }


def launch(module, version, shape, arrays):
    module.run(shape, arrays)


ADD = Benchmark(
    name="add",
    match="*_add_*",
    inputs=inputs,
    outputs={"out": OutputSpec(shape=lambda s: (s["n"],), dtype="float32")},
    reference=lambda x64, s: {"out": x64["x"] + x64["y"]},
    launch=launch,
    flops=lambda s: float(s["n"]),
    bytes=lambda s: 12.0 * s["n"],
    work_convention="12n bytes",
    tolerance=TOLERANCE,
    tolerance_reason="one fp32 add",
    shapes=[{"n": 4096}, {"n": 8192}],
    headline={"n": 8192},
    roofline=Roofline(bandwidth="copy"),
    check_shapes=[{"n": 1000}],
)

SUITE = Suite(topic="TOPIC", benchmarks=[ADD], expected_refusal=EXPECTED)
"""


class CheatModule:
    """An add that cheats as its header says; time spent is 80% of the copy floor."""

    def __init__(self, source: str, log: list[str]) -> None:
        m = re.search(r"// cheat: behaviour=(\w+)", source)
        self.behaviour = m.group(1) if m else "honest"
        self.last_x: int | None = None
        self.stash: dict[int, Any] = {}
        self.log = log

    def run(self, shape: dict[str, int], arrays: dict[str, Any]) -> None:
        self.log.append("launch")
        x, y, out = arrays["x"], arrays["y"], arrays["out"]
        b = self.behaviour
        ms = 12.0 * shape["n"] / (COPY_GBPS * 1e9) / 0.8 * 1e3
        if b == "constant":
            out[:] = numpy.float32(101.0)
        elif b == "zero":
            out[:] = 0.0
        elif b == "echo":
            out[:] = x
        elif b == "cached":  # skips the work on a buffer it has seen
            if self.last_x != x.ctypes.data:
                out[:] = x + y
            self.last_x = x.ctypes.data
        elif b == "stash":  # keeps its first answer at each size and copies it out
            if out.size not in self.stash:
                self.stash[out.size] = x + y
            out[:] = self.stash[out.size]
        elif b == "launch_only":
            out[:] = x + y
            ms = 1e-7  # the enqueue, not the work (the sizes here are tiny)
        elif b == "bf16":  # the right sum, rounded to bf16
            u = (x + y).view(numpy.uint32).astype(numpy.uint64)
            u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
            out[:] = u.astype(numpy.uint32).view(numpy.float32)
        elif b == "timed_shape_only":  # right at the timed shapes, blocks of 256 only
            whole = out.size // 256 * 256
            out[:whole] = x[:whole] + y[:whole]
        elif b == "rewrite_inputs":
            out[:] = 2 * x
            y[:] = x
        else:
            out[:] = x + y
        spend(ms)


class CheatBackend(FakeBackend):
    """The fake backend, with cheating modules and a log of what happens in order."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []

    def compile(self, source: str, options: tuple[str, ...]) -> Any:
        self.compiled.append(options)
        return CheatModule(source, self.log)

    def upcast(self, arrays: dict[str, Any]) -> dict[str, Any]:
        self.log.append("upcast " + ",".join(sorted(arrays)))
        return super().upcast(arrays)

    def synchronize(self) -> None:
        self.log.append("synchronize")


def make_cheats(root: Path, behaviours: list[str], topic: str = "fake", tolerance: float = 1e-6,
                expected: bool = False) -> None:  # fmt: skip
    topic_dir = root / "kernels" / topic
    topic_dir.mkdir(parents=True, exist_ok=True)
    source = (
        SUITE.replace("TOLERANCE", repr(tolerance))
        .replace("TOPIC", topic)
        .replace("EXPECTED", repr(expected))
    )
    (topic_dir / "suite.py").write_text(source)
    for i, b in enumerate(behaviours, start=1):
        (topic_dir / f"{i:02d}_add_{b}.cu").write_text(
            textwrap.dedent(
                f"""\
                // {i:02d} add, {b}
                // cheat: behaviour={b}
                extern "C" __global__ void add() {{}}
                """
            )
        )


def run(root: Path, backend: FakeBackend, **kw: Any):
    return run_bench(options(root, **kw), backend, SilentReporter())


def first_code(outcome: Any) -> str | None:
    return code_of(outcome.messages[0]) if outcome.messages else None


def test_an_honest_add_is_recorded(tmp_path: Path) -> None:
    make_cheats(tmp_path, ["honest"])
    summary = run(tmp_path, CheatBackend())
    assert summary.exit_code == 0, [o.messages for o in summary.outcomes]
    assert {o.status for o in summary.outcomes} == {"recorded"}


@pytest.mark.parametrize(
    ("behaviour", "status", "code"),
    [
        ("constant", "refused", "constant-output"),
        ("zero", "refused", "constant-output"),
        ("echo", "refused", "input-echo"),
        ("cached", "refused", "stale-output"),
        ("stash", "refused", "stale-output"),
        ("launch_only", "refused", "below-physical-floor"),
        ("bf16", "failed", "above-tolerance"),
        ("timed_shape_only", "refused", "wrong-at-other-shape"),
        ("rewrite_inputs", "refused", "inputs-modified"),
    ],
)
def test_each_cheat_is_refused_with_its_code(
    tmp_path: Path, behaviour: str, status: str, code: str
) -> None:
    make_cheats(tmp_path, [behaviour])
    summary = run(tmp_path, CheatBackend())
    assert summary.exit_code == 1
    for outcome in summary.outcomes:
        assert outcome.status == status, outcome.messages
        assert first_code(outcome) == code, outcome.messages
    assert read_results(summary.results_path).cases == []


@pytest.mark.parametrize("behaviour", ["constant", "echo"])
def test_a_loose_tolerance_does_not_save_a_constant_or_an_echo(
    tmp_path: Path, behaviour: str
) -> None:
    """At 1e-2 both pass the tolerance (x + y is 101 +- 0.4): the refusal is the check's."""
    make_cheats(tmp_path, [behaviour], tolerance=1e-2)
    summary = run(tmp_path, CheatBackend())
    assert {first_code(o) for o in summary.outcomes} == {
        "constant-output" if behaviour == "constant" else "input-echo"
    }
    assert all(o.rel_err is not None and o.rel_err < 1e-2 for o in summary.outcomes)


def test_a_bf16_rounded_output_fails_the_fp32_tolerance_but_passes_a_bf16_one(
    tmp_path: Path,
) -> None:
    make_cheats(tmp_path, ["bf16"])
    strict = run(tmp_path, CheatBackend())
    assert {o.status for o in strict.outcomes} == {"failed"}
    assert all(o.rel_err is not None and o.rel_err > 1e-4 for o in strict.outcomes)
    loose = tmp_path / "loose"
    make_cheats(loose, ["bf16"], tolerance=1e-2)
    assert {o.status for o in run(loose, CheatBackend()).outcomes} == {"recorded"}


def test_checks_run_in_check_only_mode_too(tmp_path: Path) -> None:
    make_cheats(tmp_path, ["honest", "cached", "timed_shape_only", "echo"])
    summary = run(tmp_path, CheatBackend(), check_only=True)
    codes = {o.case.version.stem: first_code(o) for o in summary.outcomes if o.status != "checked"}
    assert codes == {
        "02_add_cached": "stale-output",
        "03_add_timed_shape_only": "wrong-at-other-shape",
        "04_add_echo": "input-echo",
    }
    assert [o.status for o in summary.outcomes if o.case.version.stem == "01_add_honest"] == [
        "checked",
        "checked",
    ]


def test_the_reference_is_computed_after_the_launch_from_copies_taken_before(
    tmp_path: Path,
) -> None:
    """No reference exists on the device while the kernel runs: the only float64
    arrays made before a launch are copies of the inputs, and the reference is
    computed after the synchronise that ends the launch."""
    make_cheats(tmp_path, ["honest"])
    backend = CheatBackend()
    run(tmp_path, backend, check_only=True, only="fake/*")
    log = backend.log
    launches = [i for i, e in enumerate(log) if e == "launch"]
    assert launches
    for i in launches:
        # inputs copied, then in place on the device, just before the launch
        assert log[i - 2 : i] == ["upcast x,y", "synchronize"]
        assert log[i + 1] == "synchronize"  # the launch ends before anything else


def test_the_reference_function_sees_the_copies_not_the_kernel_buffers(tmp_path: Path) -> None:
    # 2x is within 0.5 of x + x (the inputs after the launch), not of x + y (before)
    make_cheats(tmp_path, ["rewrite_inputs"], tolerance=0.5)
    summary = run(tmp_path, CheatBackend())
    assert {first_code(o) for o in summary.outcomes} == {"inputs-modified"}


def test_the_physical_floor_counts_bytes_only_with_a_flushed_l2() -> None:
    from curriculum.bench.refusals import Ceilings

    ceilings = Ceilings(copy_gbps=1000.0, compute_tflops=100.0)
    assert physical_floor_ms(0.0, 1.5e9, True, ceilings) == pytest.approx(1.0)
    assert physical_floor_ms(0.0, 1.5e9, False, ceilings) is None
    assert physical_floor_ms(4e11, 0.0, False, ceilings) == pytest.approx(1.0)
    assert physical_floor_ms(0.0, 0.0, True, ceilings) is None


def test_no_recorded_h200_case_is_under_its_physical_floor() -> None:
    """The floor refuses only the impossible: every case measured so far is above it."""
    from curriculum.bench.runner import run_ceilings
    from curriculum.bench.suites import load_suite, topic_dirs

    path = ROOT / "kernels" / "results" / "nvidia-h200.json"
    if not path.is_file():
        pytest.skip("no H200 results file")
    flush: dict[tuple[str, str], bool] = {}
    for topic_dir in topic_dirs(ROOT):
        try:
            loaded = load_suite(topic_dir)
        except Exception:  # a topic being written: its cases are not judged here
            continue
        for bench in loaded.suite.benchmarks:
            flush[(loaded.suite.topic, bench.name)] = bench.flush_l2
    results = read_results(path)
    under = []
    for case in results.cases:
        key = (case.topic, case.benchmark)
        if key not in flush:
            continue
        ceilings = run_ceilings(dict(results.runs[case.run].ceilings))
        floor = physical_floor_ms(case.flops, case.bytes, flush[key], ceilings)
        if floor is not None and case.stat.median_ms < floor:
            under.append((case.id, case.shape_label))
    assert not under


def test_an_expected_refusal_suite_runs_only_when_named(tmp_path: Path) -> None:
    make_cheats(tmp_path, ["honest"], topic="fake")
    make_cheats(tmp_path, ["constant", "echo"], topic="cheats", expected=True)
    assert {c.topic for c in plan(options(tmp_path))} == {"fake"}
    assert {c.topic for c in plan(options(tmp_path), listing=True)} == {"fake", "cheats"}
    assert {c.topic for c in plan(options(tmp_path, only="cheats/*"))} == {"cheats"}
    summary = run(tmp_path, CheatBackend(), only="cheats/*")
    assert {o.status for o in summary.outcomes} == {"refused"}
    assert summary.exit_code == 0  # every cheat refused: what the suite expects
    assert summary.results_path is None  # nothing written, not even the run
    assert not (tmp_path / "kernels" / "results" / "fake-gpu-9000.json").exists()


def test_a_cheat_let_through_fails_the_run_and_is_not_recorded(tmp_path: Path) -> None:
    make_cheats(tmp_path, ["honest"], topic="cheats", expected=True)
    summary = run(tmp_path, CheatBackend(), only="cheats/*")
    assert {o.status for o in summary.outcomes} == {"not-refused"}
    assert summary.exit_code == 1
    assert summary.results_path is None
    assert not (tmp_path / "kernels" / "results" / "fake-gpu-9000.json").exists()


def test_the_cheats_suite_names_a_known_refusal_for_every_version() -> None:
    from conftest import suite_module

    from curriculum.bench.suites import load_suite

    loaded = load_suite(ROOT / "kernels" / "cheats")
    assert loaded.suite.expected_refusal
    expected = suite_module("cheats").EXPECTED
    assert set(expected) == {v.stem for v in loaded.versions}
    assert set(expected.values()) <= set(REASONS)
    for version in loaded.versions:
        assert f"`{expected[version.stem]}`" in version.source, version.stem


def test_the_capsule_quotes_every_refusal_as_the_code_says_it() -> None:
    capsule = (
        ROOT / "content" / "courses" / "kernel-engineering" / "capsules"
        / "measuring-generated-kernels.md"
    )  # fmt: skip
    if not capsule.is_file():
        pytest.skip("capsule not written yet")
    text = capsule.read_text(encoding="utf-8")
    for code, reason in REASONS.items():
        assert f"| `{code}` | {reason} |" in text, code


def test_the_search_capsule_holds_the_replayed_table() -> None:
    """The table of search-at-test-time is tilesearch's output on the committed results;
    after a re-measure, `python -m curriculum.bench.tilesearch` prints the new one."""
    from curriculum.bench.tilesearch import table

    capsule = (
        ROOT / "content" / "courses" / "kernel-engineering" / "capsules"
        / "search-at-test-time.md"
    )  # fmt: skip
    results = ROOT / "kernels" / "results" / "nvidia-h200.json"
    if not capsule.is_file() or not results.is_file():
        pytest.skip("capsule or results file missing")
    text = capsule.read_text(encoding="utf-8")
    begin = "<!-- tilesearch: generated by python -m curriculum.bench.tilesearch -->\n\n"
    end = "<!-- tilesearch: end -->"
    held = text.split(begin, 1)[1].split(end, 1)[0]
    assert held == table(results), "run: python -m curriculum.bench.tilesearch"


def test_greedy_and_model_orders_are_deterministic() -> None:
    from curriculum.bench.tilesearch import best_so_far, greedy_order, model_order, neighbours

    sweep = {
        (64, 64, 8, 8, 8): (1.0, "a"),
        (128, 64, 8, 8, 8): (2.0, "b"),
        (128, 128, 8, 8, 8): (3.0, "c"),
        (128, 128, 16, 8, 8): (2.5, "d"),
    }
    order = greedy_order(sweep, start=(64, 64, 8, 8, 8))
    assert order[:2] == [(64, 64, 8, 8, 8), (128, 64, 8, 8, 8)]
    assert best_so_far(order, sweep)[-1] == (128, 128, 8, 8, 8)
    assert (128, 64, 8, 8, 8) in neighbours((64, 64, 8, 8, 8))
    assert model_order(sorted(sweep))[0] == (128, 128, 16, 8, 8)


def test_a_folder_of_data_alone_is_not_a_topic(tmp_path: Path) -> None:
    """kernels/traces/ (a JSON) or a folder of artifacts sits beside the topics; it has
    neither a suite nor kernels, and `bench` passes over it instead of failing."""
    from curriculum.bench.suites import topic_dirs

    make_cheats(tmp_path, ["honest"])
    (tmp_path / "kernels" / "traces").mkdir()
    (tmp_path / "kernels" / "traces" / "decode_step.json").write_text("{}")
    (tmp_path / "kernels" / "broken").mkdir()
    (tmp_path / "kernels" / "broken" / "01_x.cu").write_text("// 01 x\n")
    assert [p.name for p in topic_dirs(tmp_path)] == ["broken", "fake"]
