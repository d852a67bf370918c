"""The divergence suite without a GPU: cases, that the four files hold one kernel and
differ only in the path line, that the suite's `path_of` is that line, and that the
closed-form reference matches an fp32 replay within the tolerance."""

from __future__ import annotations

import re
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
)

from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

STEMS = ["01_uniform", "02_two_paths", "03_eight_paths", "04_thirty_two_paths"]
PATH_LINE = re.compile(r"const int path = (.+);")


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(KERNELS / "divergence")


@pytest.fixture(scope="module")
def module(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_divergence"]


def test_cases_and_names(loaded: LoadedSuite) -> None:
    assert [v.stem for v in loaded.versions] == STEMS
    cases = plan_cases([loaded])
    assert [(c.id, c.shape_label, c.headline) for c in cases] == [
        (f"divergence/{s}", "n=1048576", True) for s in STEMS
    ]
    for stem in STEMS:
        bench = loaded.claims[stem]
        assert bench.name == stem[3:]
        assert bench.flops({"n": 1 << 20}) == 2 * 4 * 1024 * (1 << 20)
        assert not bench.bounded and not bench.flush_l2


def _body(loaded: LoadedSuite, stem: str) -> str:
    v = version_named(loaded, stem)
    code = "\n".join(line for line in v.source.splitlines() if not line.startswith("//"))
    code = code.replace(f"\n{v.name}(", "\nENTRY(")
    return PATH_LINE.sub("const int path = PATH;", code)


def test_one_kernel_four_path_choices(loaded: LoadedSuite) -> None:
    bodies = {stem: _body(loaded, stem) for stem in STEMS}
    assert len(set(bodies.values())) == 1


def test_path_of_is_the_kernels_path_line(loaded: LoadedSuite, module: ModuleType) -> None:
    i = np.arange(4096)
    threadIdx_x = i % 256  # noqa: N806 - the kernel's name
    for stem in STEMS:
        expr = PATH_LINE.search(version_named(loaded, stem).source)[1]
        python = expr.replace("PATHS", "32").replace(" / ", " // ")  # C int division
        got = eval(python, {"i": i, "threadIdx": type("T", (), {"x": threadIdx_x})})
        np.testing.assert_array_equal(got, module.path_of(stem[3:], i))
    lanes = np.arange(32)
    counts = {stem: len(set(module.path_of(stem[3:], lanes).tolist())) for stem in STEMS}
    assert counts == {STEMS[0]: 1, STEMS[1]: 2, STEMS[2]: 8, STEMS[3]: 32}


def test_reference_matches_an_fp32_replay(module: ModuleType, loaded: LoadedSuite) -> None:
    rng = np.random.default_rng(11)
    x = rng.random(2048, dtype=np.float32)
    for stem in ("01_uniform", "04_thirty_two_paths"):
        i = np.arange(x.size)
        path = module.path_of(stem[3:], i)
        a = np.float32(1) - (np.float32(64) + path.astype(np.float32)) / np.float32(65536)
        np.testing.assert_array_equal(a.astype(np.float64), module.coefficient(path))
        total = np.zeros_like(x)
        for c in range(module.CHAINS):
            y = x * np.float32(1 << c)
            for _ in range(module.ITERS):  # fma: exact product and sum, one rounding
                y = (y.astype(np.float64) * a + module.B).astype(np.float32)
            total += y
        ref = module._reference_for(stem[3:])({"x": x.astype(np.float64)}, {"n": x.size})["out"]
        rel = np.linalg.norm(total - ref) / np.linalg.norm(ref)
        assert rel < loaded.claims[stem].tolerance / 10
        # a lane on its neighbour's path is far outside the tolerance
        wrong = module.expected(x.astype(np.float64), (path + 1) % 32)
        assert (
            np.linalg.norm(wrong - ref) / np.linalg.norm(ref) > 100 * loaded.claims[stem].tolerance
        )


def test_launch_plan(module: ModuleType, loaded: LoadedSuite) -> None:
    rec = RecordingModule()
    module._launch(
        rec, version_named(loaded, "03_eight_paths"), {"n": 1 << 20}, {"x": "X", "out": "O"}
    )
    name, grid, block, args = rec.launches[0]
    assert (name, grid, block) == ("eight_paths", (4096,), (256,))
    assert int(args[2]) == 1 << 20 and int(args[3]) == 1024 and int(args[3]) % module.UNROLL == 0


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
