"""The softmax suite without a GPU: it loads, claims every file, plans every launch,
counts its work, and its headers say what they must; plus the log-sum-exp merge
math in NumPy, and a small on-device check marked `gpu`."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from conftest import KERNEL_ENTRY, version_named

from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

SOFTMAX = Path(__file__).resolve().parents[2] / "kernels" / "softmax"
EXPECTED = {
    "01_three_pass": "softmax",
    "02_online": "softmax",
    "03_block_row": "softmax",
    "04_block_row_bf16": "softmax_bf16",
    "05_lse_merge": "softmax_lse_merge",
}
HEADLINE = {"rows": 32768, "cols": 4096}


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(SOFTMAX)


@pytest.fixture(scope="module")
def module(loaded: LoadedSuite) -> ModuleType:
    """The imported suite.py, for its launch plans."""
    return sys.modules["curriculum_suite_softmax"]


def test_every_version_claimed_once(loaded: LoadedSuite) -> None:
    assert {v.stem: loaded.claims[v.stem].name for v in loaded.versions} == EXPECTED
    assert all(re.fullmatch(r"\d{2}_[a-z0-9_]+\.cu", p.name) for p in SOFTMAX.glob("*.cu"))


def test_shapes_stay_large_and_include_the_headline(loaded: LoadedSuite) -> None:
    for bench in loaded.suite.benchmarks:
        assert dict(bench.headline) == HEADLINE
        for shape in bench.shapes:
            assert shape["rows"] * shape["cols"] == 1 << 27
            assert shape["rows"] * shape["cols"] * 2 >= 256 << 20  # >= 256 MiB even in bf16
    cases = plan_cases([loaded])
    assert len(cases) == 5 * 6


def test_work_model_at_headline(loaded: LoadedSuite) -> None:
    by_name = {b.name: b for b in loaded.suite.benchmarks}
    elements = 32768 * 4096
    assert by_name["softmax"].bytes(HEADLINE) == 2 * elements * 4 == 1 << 30
    assert by_name["softmax_lse_merge"].bytes(HEADLINE) == 1 << 30
    assert by_name["softmax_bf16"].bytes(HEADLINE) == 2 * elements * 2
    for bench in by_name.values():
        assert bench.flops(HEADLINE) == 5 * elements
        assert bench.roofline.bandwidth == "copy" and bench.roofline.compute is None
        names = [c.name for c in bench.candidates]
        assert names == ["torch.softmax", "torch.compile(torch.softmax)"]
        assert bench.tolerance_reason and 0 < bench.tolerance <= 1e-2
    assert by_name["softmax"].tolerance == 1e-5
    assert by_name["softmax_bf16"].compare is not None


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_every_shape_has_a_valid_launch(loaded: LoadedSuite, module: ModuleType, stem: str) -> None:
    version = version_named(loaded, stem)
    bench = loaded.claims[stem]
    entries = set(KERNEL_ENTRY.findall(version.source))
    for shape in bench.shapes:
        entry, block = module.plan(version, shape)
        assert entry in entries, f"{stem}: no entry point {entry}"
        assert entry.startswith(version.name)
        assert block % 32 == 0 and 32 <= block <= 1024
        if "_vpt" in entry:
            vpt = int(entry.rsplit("_vpt", 1)[1])
            per_vector = 8 if stem.endswith("_bf16") else 4
            assert block * vpt * per_vector == shape["cols"]
            if stem.endswith("_lse_merge"):
                assert block % 64 == 0  # each half of the block is whole warps


def test_launch_refuses_a_shape_that_does_not_fit(loaded: LoadedSuite, module: ModuleType) -> None:
    with pytest.raises(ValueError, match="03_block_row"):
        module.plan(version_named(loaded, "03_block_row"), {"rows": 8, "cols": 4096 + 4})
    with pytest.raises(ValueError, match="cols=65536"):
        module.plan(version_named(loaded, "03_block_row"), {"rows": 8, "cols": 65536})


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_header_states_idea_bound_and_constraints(loaded: LoadedSuite, stem: str) -> None:
    version = version_named(loaded, stem)
    assert re.match(rf"^{stem[:2]} \S.*: \S", version.title), version.title
    text = " ".join(version.header)
    previous = "Idea:" if stem.startswith("01") else "Idea against 0"
    for label in (previous, "Expected bound:", "Size constraints:"):
        assert label in text, f"{stem}: header lacks {label!r}"
    assert "32768 x 4096" in text and "4.26 TB/s" in text and " ms" in text
    assert "static_assert" in version.source
    assert 'extern "C" __global__' in version.source


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_compiles_for_sm90_without_spills(stem: str) -> None:
    proc = subprocess.run(
        ["nvcc", "-arch=sm_90", "-std=c++17", "-Xptxas", "-v", "-c", "-o", "/dev/null"]
        + [str(SOFTMAX / f"{stem}.cu")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
    spills = re.findall(r"(\d+) bytes (?:stack frame|spill stores|spill loads)", proc.stderr)
    assert spills and all(n == "0" for n in spills), proc.stderr


# --- the log-sum-exp merge, in NumPy ----------------------------------------------------


def _state(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(m, l, accumulator) of one part of each row: the kernel's partial state."""
    m = x.max(axis=1, keepdims=True)
    acc = np.exp(x - m)
    return m, acc.sum(axis=1, keepdims=True), acc


def _merge(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    m = np.maximum(a[0], b[0])
    return m, a[1] * np.exp(a[0] - m) + b[1] * np.exp(b[0] - m)


def _dense(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_lse_merge_of_two_halves_is_the_dense_softmax() -> None:
    rng = np.random.default_rng(7)
    x = 2.0 * rng.standard_normal((64, 4096))
    x[:, 3000] += 30.0  # the max in the second half for every row: the first half rescales
    half = x.shape[1] // 2
    ma, la, acc_a = _state(x[:, :half])
    mb, lb, acc_b = _state(x[:, half:])
    m, total = _merge((ma, la), (mb, lb))
    y = np.concatenate([acc_a * np.exp(ma - m) / total, acc_b * np.exp(mb - m) / total], axis=1)
    np.testing.assert_allclose(y, _dense(x), rtol=1e-12, atol=0)
    # m + log l is the row's log-sum-exp
    lse = np.log(np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1)) + x.max(axis=1)
    np.testing.assert_allclose((m + np.log(total))[:, 0], lse, rtol=1e-13)


def test_lse_merge_is_order_free_and_stable_in_float32() -> None:
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((16, 1024)) + 200.0).astype(np.float32)  # exp(200) overflows fp32
    parts = np.split(x, 4, axis=1)
    states = [_state(p)[:2] for p in parts]
    left = _merge(_merge(states[0], states[1]), _merge(states[2], states[3]))
    right = _merge(states[3], _merge(states[2], _merge(states[1], states[0])))
    assert np.all(np.isfinite(left[1]))
    np.testing.assert_allclose(left[0], right[0], rtol=0)
    np.testing.assert_allclose(left[1], right[1], rtol=1e-5)
    whole = _state(x.astype(np.float64))
    np.testing.assert_allclose(left[1], whole[1], rtol=1e-5)


def test_online_update_matches_max_then_sum() -> None:
    # 02's per-thread update: one exp a value, exp(-|v - m|), and the rescale when v > m.
    rng = np.random.default_rng(9)
    row = 3.0 * rng.standard_normal(500)
    m, total = -np.inf, 0.0
    for v in row:
        e = np.exp(-abs(v - m))
        m, total = (v, total * e + 1.0) if v > m else (m, total + e)
    assert m == row.max()
    np.testing.assert_allclose(total, np.exp(row - row.max()).sum(), rtol=1e-12)


def test_bf16_output_rounding_sits_inside_the_tolerance(loaded: LoadedSuite) -> None:
    # Round a softmax output to bf16 (nearest even) and measure what the check will see.
    rng = np.random.default_rng(10)
    y = _dense(2.0 * rng.standard_normal((256, 4096))).astype(np.float32)
    u = y.view(np.uint32).astype(np.uint64)
    rounded = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    err = np.linalg.norm(rounded - y) / np.linalg.norm(y)
    tolerance = next(b for b in loaded.suite.benchmarks if b.name == "softmax_bf16").tolerance
    assert 1e-3 < err < tolerance / 5


# --- on the device ----------------------------------------------------------------------


@pytest.mark.gpu
def test_every_version_matches_the_reference_on_a_small_shape(loaded: LoadedSuite) -> None:
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA device")
    for version in loaded.versions:
        bench = loaded.claims[version.stem]
        options = tuple(o for o in bench.compile_options if not o.startswith("-arch"))
        module = cupy.RawModule(code=version.source, options=options)
        for cols in (1024, 4096, 32768):
            shape = {"rows": 96, "cols": cols}
            inputs = bench.inputs(shape, cupy.random.default_rng(cols))
            outputs = {}
            for name, spec in bench.outputs.items():
                out = cupy.empty(spec.shape(shape), dtype=spec.dtype)
                out.view(cupy.uint8).fill(0xFF)
                outputs[name] = out
            bench.launch(module, version, shape, {**inputs, **outputs})
            cupy.cuda.get_current_stream().synchronize()
            ref = bench.reference({k: a.astype(cupy.float64) for k, a in inputs.items()}, shape)
            got = bench.compare(outputs) if bench.compare else outputs
            for name in bench.outputs:
                g = got[name].astype(cupy.float64)
                rel = float(cupy.linalg.norm(g - ref[name]) / cupy.linalg.norm(ref[name]))
                assert rel <= bench.tolerance, f"{version.id} cols={cols}: rel_err {rel:.2e}"
