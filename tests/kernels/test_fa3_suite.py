"""The FlashAttention-3-style suite, without a GPU: what it declares, its mirrors of the
kernel's constants, its work model and its causal reference."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from conftest import version_named

from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

FA3 = Path(__file__).resolve().parents[2] / "kernels" / "fa3"


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(FA3)


@pytest.fixture(scope="module")
def suite(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_fa3"]


def test_declares_the_sweep_and_the_ping_pong_comparison(
    loaded: LoadedSuite, suite: ModuleType
) -> None:
    bench, no_pingpong = loaded.suite.benchmarks
    assert {v.stem: loaded.claims[v.stem].name for v in loaded.versions} == {
        "01_wgmma_pingpong": "prefill",
        "02_no_pingpong": "prefill_no_pingpong",
    }
    assert dict(bench.headline) == {"b": 8, "h": 16, "s": 4096, "d": 128, "causal": 0}
    assert len(plan_cases([loaded])) == len(bench.shapes) + 1 == 11
    # 02 is 01 without the turns: the headline only, the same checks and candidates
    assert [dict(s) for s in no_pingpong.shapes] == [dict(bench.headline)]
    assert no_pingpong.reference is bench.reference and no_pingpong.baselines == bench.baselines
    assert no_pingpong.check_shapes and all(s["d"] == 128 for s in no_pingpong.check_shapes)
    source = version_named(loaded, "02_no_pingpong").source
    assert '#include "01_wgmma_pingpong.cu"' in source and "#define FA3_PINGPONG 0" in source
    assert f"-I{FA3}" in no_pingpong.version_options["02_no_pingpong"]
    assert {(s["d"], s["causal"]) for s in bench.shapes} == {(128, 0), (128, 1), (64, 0), (64, 1)}
    sweep = [s for s in bench.shapes if s["d"] == 128 and not s["causal"]]
    assert sorted(s["s"] for s in sweep) == [1024, 2048, 4096, 8192]
    assert {s["b"] * s["s"] for s in sweep} == {suite.TOKENS}
    names = [c.name for c in bench.candidates]
    assert "cuDNN SDPA" in names and "FlashAttention SDPA" in names
    # every shape the kernel takes, and every check shape reaches a third key tile
    assert all(not suite.problems(s) for s in (*bench.shapes, *bench.check_shapes))
    assert all(s["s"] // suite.BM >= 3 for s in bench.check_shapes)
    assert {(s["d"], s["causal"]) for s in bench.check_shapes} == {
        (d, c) for d in suite.HEAD_DIMS for c in (0, 1)
    }


def test_problems_refuse_what_the_kernel_cannot_do(suite: ModuleType) -> None:
    ok = {"b": 1, "h": 2, "s": 256, "d": 128, "causal": 0}
    assert suite.problems(ok) == []
    assert suite.problems({**ok, "s": 200}) and suite.problems({**ok, "d": 96})
    assert suite.problems({**ok, "causal": 2})


def test_entry_points_and_shared_memory_mirror_the_kernel(
    loaded: LoadedSuite, suite: ModuleType
) -> None:
    source = version_named(loaded, "01_wgmma_pingpong").source
    # the four entry points are made by one macro
    entries = set(re.findall(r"^FA3_ENTRY\((\w+), (\d+), (true|false)\)", source, re.M))
    assert entries == {
        (f"fa3_fwd_d{d}" + ("_causal" if c else ""), str(d), "true" if c else "false")
        for d in suite.HEAD_DIMS
        for c in (0, 1)
    }
    consts = {m[0]: int(m[1]) for m in re.findall(r"constexpr int (\w+) = (\d+);", source)}
    assert consts["BM"] == consts["BN"] == suite.BM
    assert (consts["CONSUMERS"] + 1) * 128 == suite.THREADS
    assert consts["BOX_COLS"] == suite.BOX_COLS
    assert f"STAGES = D == 128 ? FA3_STAGES_D128 : {suite.D64_STAGES};" in source
    stages = int(suite.STAGES_DEFINE.search(source)[1])
    for d in suite.HEAD_DIMS:
        smem = suite.smem_bytes(d, stages)
        assert smem <= 227 * 1024
        # the header records the byte counts the suite asks for
        assert f"{smem:,} bytes" in source
    # the 128-key tiles of Q, K and V for D = 128, 2 stages, 9 mbarriers, 1 KiB of slack
    assert suite.smem_bytes(128, 2) == 5 * 32768 + 9 * 8 + 1024


def test_work_model_counts_only_unmasked_pairs(suite: ModuleType) -> None:
    full = {"b": 8, "h": 16, "s": 4096, "d": 128, "causal": 0}
    assert suite.flops(full) == 4 * 8 * 16 * 4096**2 * 128
    causal = {**full, "causal": 1}
    assert suite.flops(causal) == 4 * 8 * 16 * 128 * 4096 * 4097 / 2
    assert 0.5 < suite.flops(causal) / suite.flops(full) < 0.501


def test_causal_reference_matches_a_loop(suite: ModuleType) -> None:
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, n, 8)) for n in (4, 9, 9))
    rows = np.array([0, 3, 5, 8])
    got = suite.causal_attention64(q, k, v, rows)
    for h in range(2):
        for i, r in enumerate(rows):
            s = q[h, i] @ k[h, : r + 1].T / math.sqrt(8)
            w = np.exp(s - s.max())
            assert np.allclose(got[h, i], (w / w.sum()) @ v[h, : r + 1])
    # row 0 sees key 0 only: its output is V's first row
    assert np.allclose(got[:, 0], v[:, 0])
