"""07's tile sweep as bench cases, checked without a GPU (one test at the end needs one).

The sweep is declared as shapes of the `sgemm_tiles` benchmark: one per candidate
of `AUTOTUNE_CANDIDATES`, at 4096^3, with the tile in extra keys. What is checked
here: the shapes name every candidate once and nothing else; the work model and
the baseline see only m, n, k; the harness plans one case per candidate and
keeps them out of the headline and --small selections; and a sweep shape is
refused by every version but 07.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import suite_module

from curriculum.bench.api import Version, discover_versions
from curriculum.bench.suites import load_suite, plan_cases, select_cases

TOPIC_DIR = Path(__file__).resolve().parents[2] / "kernels" / "gemm"
gemm = suite_module("gemm")
TILES = next(b for b in gemm.SUITE.benchmarks if b.name == "sgemm_tiles")
VERSIONS: dict[str, Version] = {v.stem: v for v in discover_versions(TOPIC_DIR)}
HEADLINE = {"m": 4096, "n": 4096, "k": 4096}


def _sweep_shapes() -> list[dict[str, int]]:
    return [dict(s) for s in TILES.shapes if gemm.candidate_of(s) is not None]


def test_the_sweep_names_every_candidate_once_at_4096() -> None:
    shapes = _sweep_shapes()
    configs = [gemm.candidate_of(s) for s in shapes]
    assert configs == list(gemm.AUTOTUNE_CANDIDATES)
    assert len(set(configs)) == len(configs) == len(gemm.AUTOTUNE_CANDIDATES)
    for s, c in zip(shapes, configs, strict=True):
        assert {d: s[d] for d in ("m", "n", "k")} == HEADLINE
        assert list(s) == ["m", "n", "k", "bm", "bn", "bk", "tm", "tn"]
        assert gemm.candidate_shape(c) == s
        assert c.geometry().accepts(s)


def test_plain_sizes_are_the_default_tile() -> None:
    assert gemm.candidate_of(HEADLINE) is None
    assert gemm.candidate_of({"m": 256, "n": 256, "k": 256}) is None


def test_a_partial_or_unknown_tile_is_refused() -> None:
    with pytest.raises(ValueError, match="lacks"):
        gemm.candidate_of({**HEADLINE, "bm": 128})
    with pytest.raises(ValueError, match="not one of"):
        gemm.candidate_of({**HEADLINE, "bm": 256, "bn": 256, "bk": 32, "tm": 8, "tn": 8})


def test_the_work_model_ignores_the_tile_keys() -> None:
    for s in _sweep_shapes():
        assert TILES.flops(s) == TILES.flops(HEADLINE)
        assert TILES.bytes(s) == TILES.bytes(HEADLINE)
        assert TILES.outputs["c"].shape(s) == (4096, 4096)


def test_the_harness_plans_one_case_per_candidate_outside_headline_and_small() -> None:
    cases = [c for c in plan_cases([load_suite(TOPIC_DIR)]) if c.id == "gemm/07_autotuned"]
    assert len(cases) == 6 + len(gemm.AUTOTUNE_CANDIDATES)
    assert len({c.shape_label for c in cases}) == len(cases)
    assert {c.benchmark.name for c in cases} == {"sgemm_tiles"}
    headline = select_cases(cases, headline=True)
    assert [c.shape for c in headline] == [HEADLINE]
    small = select_cases(cases, small=True)
    assert [c.shape for c in small] == [{"m": 256, "n": 256, "k": 256}]
    sweep = [c for c in cases if gemm.candidate_of(c.shape) is not None]
    assert sweep[-1].shape_label == cases[-1].shape_label  # timed after the square sizes
    assert all(not c.headline for c in sweep)


def test_a_sweep_shape_is_refused_by_other_versions() -> None:
    shape = _sweep_shapes()[0]
    for stem in ("06_vectorized", "10_wmma"):
        with pytest.raises(ValueError, match="only 07_autotuned"):
            gemm.launch(None, VERSIONS[stem], shape, {"a": None, "b": None, "c": None})


def test_every_label_is_a_valid_figure_shape() -> None:
    from curriculum.markdown import FIG_RE
    from curriculum.results import shape_label

    for s in _sweep_shapes():
        ref = "{fig:gemm/07_autotuned.tflops@" + shape_label(s) + "}"
        match = FIG_RE.fullmatch(ref)
        assert match and match["shape"] == shape_label(s)


@pytest.mark.gpu
def test_sweep_candidates_match_the_reference_on_the_gpu() -> None:
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception as exc:  # CUDA raises its own error types when no driver answers
        pytest.skip(f"no CUDA device: {exc}")
    size = {"m": 512, "n": 512, "k": 512}
    candidates = gemm.AUTOTUNE_CANDIDATES
    for config in (candidates[0], candidates[len(candidates) // 2], candidates[-1]):
        shape = gemm.candidate_shape(config, size)
        inputs = TILES.inputs(shape, cupy.random.default_rng(config.bm + config.bn))
        c = cupy.full((512, 512), cupy.nan, dtype=cupy.float32)
        gemm.launch(None, VERSIONS["07_autotuned"], shape, {**inputs, "c": c})
        cupy.cuda.runtime.deviceSynchronize()
        ref = TILES.reference({k: a.astype(cupy.float64) for k, a in inputs.items()}, shape)["c"]
        rel = float(cupy.linalg.norm(c - ref) / cupy.linalg.norm(ref))
        assert rel <= TILES.tolerance, f"{config.label}: rel err {rel:.2e}"
