"""A NumPy backend and a fake topic, so the whole harness runs without a GPU.

A fake kernel is a `.cu` file whose header says how it behaves, e.g.
`// fake: behaviour=wrong speed=0.8`: the fake module reads that line and,
when launched, writes the output (correctly or not) and "spends" device time
equal to the roofline floor divided by `speed`. The fake timer reports what
was spent, on a virtual clock, so timing is deterministic.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy
import pytest

from curriculum.bench.api import Arrays, OutputSpec, Shape
from curriculum.bench.backend import Comparison, DeviceInfo, compare_arrays, poison_array
from curriculum.bench.runner import BenchOptions
from curriculum.bench.timing import TimingPolicy, summarize, time_call
from curriculum.results import Ceiling, Clocks, Stat

COPY_GBPS = 1000.0
READ_GBPS = 1200.0
BASELINE_SPEED = 0.9

FAST_POLICY = TimingPolicy(warmup_ms=1.0, min_samples=5, batch=5, time_cap_s=5.0)

_spent = [0.0]


def options(root: Path, **kw: Any) -> BenchOptions:
    """Bench options for a fake project root, with a quick timing policy."""
    kw.setdefault("cool_down_s", 0.0)
    return BenchOptions(root=root, policy=FAST_POLICY, **kw)


def spend(ms: float) -> None:
    _spent[0] += ms


def copy_floor_ms(nbytes: float) -> float:
    return nbytes / (COPY_GBPS * 1e9) * 1e3


class FakeModule:
    def __init__(self, source: str) -> None:
        m = re.search(r"// fake: (.*)", source)
        fields = dict(kv.split("=") for kv in m.group(1).split()) if m else {}
        self.behaviour = fields.get("behaviour", "good")
        self.speed = float(fields.get("speed", "0.8"))
        self.launches = 0
        self.sizes: list[int] = []  # shape["n"] of every launch, in order

    def run(self, shape: Shape, arrays: Arrays) -> None:
        x, out = arrays["x"], arrays["out"]
        self.launches += 1
        self.sizes.append(shape["n"])
        b = self.behaviour
        if b == "skip":
            pass
        elif b == "stateful" and self.launches > 1:
            out[:] = x * 2
        else:
            out[:] = x
        if b == "wrong":
            out[3] += 1.0
        elif b == "nan":
            out[5] = numpy.nan
        elif b == "raise":
            raise RuntimeError("illegal memory access (fake)")
        spend(copy_floor_ms(8.0 * shape["n"]) / self.speed)


class FakeTimer:
    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend
        self.flushes = 0

    def flush_l2(self) -> None:
        self.flushes += 1

    def elapsed_ms(self, fn: Callable[[], None], flush: bool = True) -> float:
        if flush:
            self.flush_l2()
        _spent[0] = 0.0
        fn()
        ms = _spent[0]
        self.backend.now += ms * 1e-3 + 20e-6  # plus launch and sync overhead
        return ms


class FakeBackend:
    def __init__(
        self,
        name: str = "Fake GPU 9000",
        throttle: list[str] | None = None,
        nvml: bool = True,
    ) -> None:
        self.name = name
        self.throttle = throttle or []
        self.nvml = nvml
        self.now = 0.0
        self.compiled: list[tuple[str, ...]] = []
        self.modules: list[FakeModule] = []
        self.ceiling_calls = 0
        self.timers: list[FakeTimer] = []

    def clock(self) -> float:
        return self.now

    def device(self) -> DeviceInfo:
        return DeviceInfo(
            name=self.name,
            slug=self.name.lower().replace(" ", "-"),
            sm_count=132,
            l2_bytes=50 << 20,
            memory_bytes=141 << 30,
            sm_clock_max_mhz=1980 if self.nvml else None,
            mem_clock_max_mhz=3201 if self.nvml else None,
            driver="580.00",
            cuda_runtime="13.0",
            cupy="0.0-fake",
            torch=None,
        )

    def compile(self, source: str, options: tuple[str, ...]) -> Any:
        self.compiled.append(options)
        if "#error" in source:
            raise RuntimeError("kern.cu(3): error: fake compile error")
        self.modules.append(FakeModule(source))
        return self.modules[-1]

    def rng(self, seed: int) -> Any:
        return numpy.random.default_rng(seed)

    def alloc_output(self, spec: OutputSpec, shape: Shape) -> Any:
        out = numpy.empty(spec.shape(shape), dtype=spec.dtype)
        self.poison(out)
        return out

    def poison(self, array: Any) -> None:
        poison_array(array, numpy)

    def upcast(self, arrays: Arrays) -> Arrays:
        return {k: v.astype(numpy.float64) for k, v in arrays.items()}

    def compare(self, out: Any, ref: Any, tolerance: float) -> Comparison:
        return compare_arrays(out, ref, tolerance, numpy)

    def synchronize(self) -> None:
        pass

    def time(self, fn: Callable[[], None], policy: TimingPolicy, flush_l2: bool = True) -> Stat:
        timer = FakeTimer(self)
        self.timers.append(timer)
        return time_call(fn, timer, policy, clock=self.clock, flush_l2=flush_l2)

    def clocks(self) -> Clocks:
        if not self.nvml:
            return Clocks(sm_mhz=None, mem_mhz=None, throttle_reasons=[])
        return Clocks(sm_mhz=1980, mem_mhz=3201, throttle_reasons=list(self.throttle))

    def ceilings(self, policy: TimingPolicy) -> dict[str, Ceiling]:
        self.ceiling_calls += 1
        gib = float(1 << 30)
        return {
            "copy": Ceiling(
                name="copy",
                description="fake copy",
                stat=summarize([2 * gib / (COPY_GBPS * 1e9) * 1e3]),
                gbps=COPY_GBPS,
            ),
            "read": Ceiling(
                name="read",
                description="fake read",
                stat=summarize([gib / (READ_GBPS * 1e9) * 1e3]),
                gbps=READ_GBPS,
            ),
        }

    def release(self) -> None:
        pass


SUITE_SOURCE = """
import numpy
from curriculum.bench.api import Benchmark, LibraryBaseline, OutputSpec, Roofline, Suite
import fakebench


def inputs(shape, rng):
    return {"x": rng.random(shape["n"], dtype=numpy.float32) + 0.5}


def launch(module, version, shape, arrays):
    module.run(shape, arrays)


def baseline(arrays, shape):
    return lambda: fakebench.spend(fakebench.copy_floor_ms(8.0 * shape["n"]) / fakebench.BASELINE_SPEED)


COPY = Benchmark(
    name="copy",
    match="*_copy_*",
    inputs=inputs,
    outputs={"out": OutputSpec(shape=lambda s: (s["n"],), dtype="float32")},
    reference=lambda x64, s: {"out": x64["x"]},
    launch=launch,
    flops=lambda s: 0.0,
    bytes=lambda s: 8.0 * s["n"],
    work_convention="8n bytes",
    tolerance=0.0,
    tolerance_reason="exact",
    shapes=[{"n": 1024}, {"n": 4096}],
    headline={"n": 4096},
    roofline=Roofline(bandwidth="copy"),
    baseline=LibraryBaseline(name="fake copy", make=baseline),
)

SUITE = Suite(topic="fake", benchmarks=[COPY])
"""


def kernel_source(title: str, behaviour: str = "good", speed: float = 0.8) -> str:
    return textwrap.dedent(
        f"""\
        // {title}
        // fake: behaviour={behaviour} speed={speed}
        extern "C" __global__ void k() {{}}
        """
    )


def make_topic(root: Path, kernels: dict[str, tuple[str, float]], topic: str = "fake") -> Path:
    """kernels/<topic>/ with a suite and one .cu per {stem: (behaviour, speed)}."""
    topic_dir = root / "kernels" / topic
    topic_dir.mkdir(parents=True, exist_ok=True)
    (topic_dir / "suite.py").write_text(SUITE_SOURCE.replace('topic="fake"', f'topic="{topic}"'))
    for stem, (behaviour, speed) in kernels.items():
        (topic_dir / f"{stem}.cu").write_text(kernel_source(stem, behaviour, speed))
    return topic_dir


# Fixtures, imported by the test modules that use them (a conftest.py here would
# shadow the top-level one for tests that import from `conftest`).


@pytest.fixture(name="backend")
def fake_backend_fixture() -> FakeBackend:
    return FakeBackend()


@pytest.fixture(name="root")
def fake_root_fixture(tmp_path: Path) -> Path:
    make_topic(
        tmp_path,
        {
            "01_copy_good": ("good", 0.8),
            "02_copy_wrong": ("wrong", 0.8),
            "03_copy_fast": ("good", 1.2),
        },
    )
    return tmp_path
