"""The launch suite without a GPU: cases, work model, the back-to-back launch plan
and the reference; on a GPU, the check and that one graph is captured per shape."""

from __future__ import annotations

import sys
from types import ModuleType

import numpy as np
import pytest
from conftest import version_named
from microbench_checks import (
    KERNELS,
    RecordingModule,
    assert_header,
    assert_resources_recorded,
    check_on_device,
    gpu_or_skip,
)

from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

STEMS = ["01_empty", "02_graph_replay"]


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(KERNELS / "launch")


@pytest.fixture(scope="module")
def module(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_launch"]


def test_cases_and_names(loaded: LoadedSuite) -> None:
    assert [v.stem for v in loaded.versions] == STEMS
    assert {s: loaded.claims[s].name for s in STEMS} == {
        "01_empty": "empty_launch",
        "02_graph_replay": "graph_replay",
    }
    cases = plan_cases([loaded])
    assert [(c.id, c.shape_label) for c in cases] == [
        (f"launch/{s}", f"launches={n}") for s in STEMS for n in (1, 16, 256)
    ]
    assert {c.shape_label for c in cases if c.headline} == {"launches=256"}
    for stem in STEMS:
        bench = loaded.claims[stem]
        assert not bench.bounded and not bench.flush_l2 and bench.tolerance == 0.0
        assert bench.items is not None and bench.items({"launches": 16}) == 16
        assert bench.items_label == "kernel launches"


def test_back_to_back_launches_every_slot_once(module: ModuleType, loaded: LoadedSuite) -> None:
    version = version_named(loaded, "01_empty")
    rec = RecordingModule()
    module._launch_back_to_back(rec, version, {"launches": 16}, {"seed": "S", "out": "O"})
    assert len(rec.launches) == 16
    for k, (name, grid, block, args) in enumerate(rec.launches):
        assert (name, grid, block) == ("empty", (1,), (32,))
        assert args[:2] == ("S", "O") and int(args[2]) == k and int(args[3]) == 16


def test_reference(module: ModuleType) -> None:
    ref = module._reference({"seed": np.array([41.0])}, {"launches": 4})["out"]
    np.testing.assert_array_equal(ref, [41.0, 42.0, 43.0, 44.0])


def test_kernels_match(loaded: LoadedSuite) -> None:
    # The two files differ only in their comments and entry name: the same kernel.
    bodies = []
    for stem in STEMS:
        v = version_named(loaded, stem)
        code = "\n".join(line for line in v.source.splitlines() if not line.startswith("//"))
        bodies.append(code.replace(v.name + "(", "ENTRY("))
    assert bodies[0] == bodies[1]


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
        assert check_on_device(loaded, version, dict(shape), launches=3) == 0.0


@pytest.mark.gpu
def test_graph_is_captured_once_per_shape(loaded: LoadedSuite, module: ModuleType) -> None:
    cupy = gpu_or_skip()
    version = version_named(loaded, "02_graph_replay")
    bench = loaded.claims["02_graph_replay"]
    compiled = cupy.RawModule(code=version.source, options=tuple(bench.compile_options))
    shape = {"launches": 16}
    arrays = {
        "seed": cupy.array([7], dtype=cupy.int32),
        "out": cupy.full(16, -1, dtype=cupy.int32),
    }
    before = len(module._graphs)
    for _ in range(5):
        module._launch_graph(compiled, version, shape, arrays)
    cupy.cuda.runtime.deviceSynchronize()
    assert len(module._graphs) == before + 1
    assert arrays["out"].tolist() == list(range(7, 23))
