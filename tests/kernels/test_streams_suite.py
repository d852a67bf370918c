"""The streams suite without a GPU: cases, chunking, the closed-form reference, and,
against a stand-in for CuPy that logs every call, the order of copies, kernels and
events on each stream (serial on one stream; overlapped forked and joined)."""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import version_named
from mb_suite_shim import numpy_as_cupy
from microbench_checks import (
    KERNELS,
    assert_header,
    assert_resources_recorded,
    check_on_device,
)

from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

STEMS = ["01_serial", "02_overlapped"]
CHUNKS = (1, 2, 4, 8, 16)


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(KERNELS / "streams")


@pytest.fixture(scope="module")
def module(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_streams"]


def test_cases_and_names(loaded: LoadedSuite, module: ModuleType) -> None:
    assert [v.stem for v in loaded.versions] == STEMS
    cases = plan_cases([loaded])
    assert [(c.id, c.shape_label) for c in cases] == [
        (f"streams/{s}", f"chunks={c}") for s in STEMS for c in CHUNKS
    ]
    assert {c.shape_label for c in cases if c.headline} == {"chunks=8"}
    for stem in STEMS:
        bench = loaded.claims[stem]
        assert bench.bytes({"chunks": 1}) == 4 * (1 << 24) == 64 << 20
        assert bench.flops({"chunks": 1}) == 2 * 2048 * (1 << 24)
        assert not bench.bounded
    for c in CHUNKS:
        bounds = module.chunk_bounds(module.N, c)
        assert bounds[0][0] == 0 and bounds[-1][1] == module.N and len(bounds) == c
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))
    with pytest.raises(ValueError):
        module.chunk_bounds(1000, 3)


def test_reference_matches_an_fp32_replay(module: ModuleType, loaded: LoadedSuite) -> None:
    x = np.random.default_rng(3).random(4096, dtype=np.float32)
    y = x.copy()
    for _ in range(module.ITERS):
        y = (y.astype(np.float64) * np.float32(module.A) + np.float32(module.B)).astype(np.float32)
    assert float(np.float32(module.A)) == module.A and float(np.float32(module.B)) == module.B
    with numpy_as_cupy():
        ref = module._reference({"x": x.astype(np.float64)}, {"chunks": 1})["out"]
    rel = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert rel < loaded.claims["01_serial"].tolerance / 10


def test_kernels_match(loaded: LoadedSuite) -> None:
    bodies = []
    for stem in STEMS:
        v = version_named(loaded, stem)
        code = "\n".join(line for line in v.source.splitlines() if not line.startswith("//"))
        bodies.append(code.replace(f"\n{v.name}(", "\nENTRY("))
    assert bodies[0] == bodies[1]


# --- a stand-in for the parts of CuPy the launchers use ---------------------------------


class _Log:
    def __init__(self) -> None:
        self.ops: list[tuple[str, ...]] = []
        self.current = "current"
        self.host = 0  # copies are logged at their offset from this host address


class _FakeCupy:
    def __init__(self, log: _Log) -> None:
        log_ = log
        self.float32 = np.float32

        class Stream:
            count = 0

            def __init__(self, non_blocking: bool = False) -> None:
                assert non_blocking
                Stream.count += 1
                self.name = f"side{Stream.count}"
                self.ptr = Stream.count

            def wait_event(self, event: Any) -> None:
                log_.ops.append((self.name, "wait", event.name))

            def __enter__(self) -> Any:
                self._saved, log_.current = log_.current, self.name
                return self

            def __exit__(self, *exc: object) -> None:
                log_.current = self._saved

        class Current:
            name, ptr = "current", 0

            def wait_event(self, event: Any) -> None:
                log_.ops.append(("current", "wait", event.name))

            def synchronize(self) -> None:
                pass

        class Event:
            count = 0

            def __init__(self, disable_timing: bool = False) -> None:
                Event.count += 1
                self.name = f"event{Event.count}"

            def record(self, stream: Any) -> None:
                log_.ops.append((stream.name, "record", self.name))

        class Pinned(bytearray):
            ptr = 1 << 40

        def memcpy_async(dst: int, src: int, size: int, kind: int, stream: int) -> None:
            name = "current" if stream == 0 else f"side{stream}"
            log_.ops.append((name, "copy", str(src - log_.host), str(size)))

        class Dev:
            def __init__(self, n: int) -> None:
                self.data = SimpleNamespace(ptr=1 << 20)

            def fill(self, value: float) -> None:
                pass

        current = Current()
        self.cuda = SimpleNamespace(
            Stream=Stream,
            Event=Event,
            get_current_stream=lambda: current,
            alloc_pinned_memory=lambda n: Pinned(n),
            runtime=SimpleNamespace(memcpyAsync=memcpy_async, memcpyHostToDevice=1),
        )
        self.empty = lambda n, dtype: Dev(n)


class _Module:
    def __init__(self, log: _Log) -> None:
        self.log = log

    def get_function(self, name: str) -> Any:
        def launch(grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...]) -> None:
            begin, end = int(args[2]), int(args[3])
            assert grid == ((end - begin + 255) // 256,) and block == (256,)
            self.log.ops.append((self.log.current, "kernel", str(begin), str(end - begin)))

        return launch


def _x(log: _Log) -> np.ndarray:
    """x as the input maker gives it, a host array (here not pinned); copies logged from it."""
    x = np.zeros(1 << 24, dtype=np.float32)
    log.host = x.ctypes.data
    return x


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> _Log:
    log = _Log()
    monkeypatch.setitem(sys.modules, "cupy", _FakeCupy(log))
    monkeypatch.setattr(module, "_side", [])
    monkeypatch.setattr(module, "_fork", [])
    monkeypatch.setattr(module, "_scratch", [])
    return log


def test_serial_queues_everything_on_the_current_stream(
    fake: _Log, module: ModuleType, loaded: LoadedSuite
) -> None:
    version = version_named(loaded, "01_serial")
    module._launch_serial(_Module(fake), version, {"chunks": 4}, {"x": _x(fake), "out": "O"})
    size = (1 << 24) // 4
    want = []
    for c in range(4):
        want.append(("current", "copy", str(4 * c * size), str(4 * size)))
        want.append(("current", "kernel", str(c * size), str(size)))
    assert fake.ops == want


@pytest.mark.parametrize("stem", STEMS)
def test_every_launch_copies_from_the_input_it_is_given(
    fake: _Log, module: ModuleType, loaded: LoadedSuite, stem: str
) -> None:
    """No host copy kept across launches: the harness's re-check writes fresh values into the
    input, so each launch must read the input's own buffer, whatever an earlier launch read."""
    version = version_named(loaded, stem)
    launch = module._launch_serial if stem == "01_serial" else module._launch_overlapped
    for _ in range(2):
        fake.ops.clear()
        x = _x(fake)  # a new buffer each launch
        launch(_Module(fake), version, {"chunks": 2}, {"x": x, "out": "O"})
        copies = sorted(int(op[2]) for op in fake.ops if op[1] == "copy")
        assert copies == [0, 4 * (1 << 23)]
    with pytest.raises(ValueError, match="float32"):
        launch(_Module(fake), version, {"chunks": 2}, {"x": x[:-1], "out": "O"})


def test_reference_is_on_the_device_side(
    module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """x64 arrives on the host (x is host memory); the reference goes where the outputs are."""
    moved = []
    monkeypatch.setitem(
        sys.modules, "cupy", SimpleNamespace(asarray=lambda a: moved.append(a) or a)
    )
    x = np.linspace(0, 1, 8)
    out = module._reference({"x": x}, {"chunks": 1})["out"]
    assert len(moved) == 1 and out is moved[0]
    np.testing.assert_allclose(out, module.expected(x))


@pytest.mark.parametrize("chunks", [1, 2, 8])
def test_overlapped_forks_and_joins(
    fake: _Log, module: ModuleType, loaded: LoadedSuite, chunks: int
) -> None:
    version = version_named(loaded, "02_overlapped")
    x = _x(fake)
    for _ in range(2):  # the second launch reuses the streams, events and staging
        fake.ops.clear()
        module._launch_overlapped(_Module(fake), version, {"chunks": chunks}, {"x": x, "out": "O"})
        used = min(4, chunks)
        ops = fake.ops
        fork = ops[0]
        assert fork[:2] == ("current", "record")
        sides = [f"side{k + 1}" for k in range(used)]
        assert ops[1 : 1 + used] == [(s, "wait", fork[2]) for s in sides]
        body = ops[1 + used : len(ops) - 2 * used]
        size = (1 << 24) // chunks
        want = []
        for c in range(chunks):
            s = sides[c % used]
            want.append((s, "copy", str(4 * c * size), str(4 * size)))
            want.append((s, "kernel", str(c * size), str(size)))
        assert body == want
        tail = ops[len(ops) - 2 * used :]
        for k, s in enumerate(sides):
            rec, wait = tail[2 * k], tail[2 * k + 1]
            assert rec[:2] == (s, "record") and wait == ("current", "wait", rec[2])
    assert len(module._side) == 4 and len(module._scratch) == 1


@pytest.mark.parametrize("stem", STEMS)
def test_header(loaded: LoadedSuite, stem: str) -> None:
    assert_header(version_named(loaded, stem))


@pytest.mark.parametrize("stem", STEMS)
def test_compiles_and_header_states_resources(loaded: LoadedSuite, stem: str) -> None:
    assert_resources_recorded(version_named(loaded, stem))


@pytest.mark.gpu
@pytest.mark.parametrize("stem", STEMS)
def test_on_device(loaded: LoadedSuite, stem: str) -> None:
    version = version_named(loaded, stem)
    for shape in loaded.claims[stem].shapes:
        assert check_on_device(loaded, version, dict(shape)) <= 1e-5
