"""The verify suite without a GPU: it loads and claims every file once, every shape fits, the work
model at the headline, the one-wave plan, the draft mask and the references in NumPy, 01's split
and tile walk with its causal rule, 02's 16-row tensor-core step lane by lane, the headers; and a
small on-device check marked `gpu`."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from conftest import KERNEL_ENTRY, version_named

from curriculum.bench.staleness import includes
from curriculum.bench.suites import LoadedSuite, load_suite

VERIFY = Path(__file__).resolve().parents[2] / "kernels" / "verify"
EXPECTED = {
    "00_k_decodes": "k_decodes",
    "01_one_pass": "verify",
    "02_tensor_core": "verify",
    "03_one_launch": "verify",
    "04_in_flight": "verify",
    "05_one_range": "verify",
}
ENTRIES = {
    "00_k_decodes": {"split_kv"},  # from attention/04, included
    "01_one_pass": {"verify_partial", "verify_merge"},
    "02_tensor_core": {"verify_mma8", "verify_mma16", "verify_merge"},
    "03_one_launch": {"verify_fused8", "verify_fused16"},
    "04_in_flight": {"verify_staged8", "verify_staged16"},
    "05_one_range": {"verify_span8", "verify_span16", "verify_span32"},
}


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(VERIFY)


@pytest.fixture(scope="module")
def suite(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_verify"]


def _bf16(x: np.ndarray) -> np.ndarray:
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


# --- what the suite declares ------------------------------------------------------------


def test_every_version_claimed_once(loaded: LoadedSuite) -> None:
    assert {v.stem: loaded.claims[v.stem].name for v in loaded.versions} == EXPECTED


def test_shapes_fit_and_the_k_sweep_is_the_common_key_order(suite: ModuleType) -> None:
    for shape in (*suite.SHAPES, *suite.CHECK_SHAPES):
        assert suite.problems("01_one_pass", shape) == []
    assert suite.HEADLINE in suite.SHAPES
    assert [s["k"] for s in suite.K_SWEEP] == [1, 2, 3, 4, 6, 8]
    orders = [tuple(s) for s in suite.SHAPES]
    # a sweep chart keeps the most common key order: the k sweep at T = 32768
    assert orders.count(("k", "t")) > orders.count(("t", "k")) > 0
    assert suite.problems("01_one_pass", {"k": 9, "t": 64})
    assert suite.problems("01_one_pass", {"k": 2, "t": 100})


def test_work_model_at_the_headline(suite: ModuleType) -> None:
    shape = {"k": 4, "t": 32768}
    kv = 2 * 8 * (32768 + 4) * 128 * 2
    assert suite.verify_bytes(shape) == kv + 2 * 32 * 4 * 128 * 2
    assert suite.verify_flops(shape) == 4 * 32 * 128 * (4 * 32768 + 10)
    assert suite.visible_pairs(4, 32768) == 32769 + 32770 + 32771 + 32772
    one = suite.attention.decode_bytes({"b": 1, "hq": 32, "hkv": 8, "t": 32768, "d": 128})
    assert suite.decodes_bytes(shape) == 4 * one
    # the point of the topic: k decodes read the cache k times, one verify once
    assert suite.decodes_bytes(shape) / suite.verify_bytes(shape) == pytest.approx(4, rel=1e-3)


@pytest.mark.parametrize("sms", [132, 114, 78])
def test_plan_is_one_wave_of_whole_steps(suite: ModuleType, sms: int) -> None:
    for t in (64, 192, 1024, 4096, 32768, 131072):
        for k in range(1, 9):
            for stem in EXPECTED:
                if stem == "00_k_decodes":
                    continue
                entry, p = suite.plan_for(stem, k, t, sms)
                per_sm = 1 if entry.endswith(("16", "32")) else 2
                assert p.ctas <= max(per_sm * sms, 8 * p.row_blocks), (stem, k, t, p)
                assert p.tokens_per_split % 64 == 0
                assert p.splits <= suite.MERGE_MAX_SPLITS
                assert (p.splits - 1) * p.tokens_per_split < t <= p.splits * p.tokens_per_split
                assert p.rows == 4 * k
                assert p.row_blocks == (-(-4 * k // 16) if entry.endswith("16") else 1)
                if entry == "verify_span32":  # one CTA for both 16-row blocks
                    assert 4 * k > 16 and p.ctas <= sms
                assert entry == ("verify_partial" if stem == "01_one_pass" else entry)
    assert suite.plan_for("02_tensor_core", 2, 4096, 132)[0] == "verify_mma8"
    assert suite.plan_for("02_tensor_core", 3, 4096, 132)[0] == "verify_mma16"
    assert suite.plan_for("03_one_launch", 8, 4096, 132)[0] == "verify_fused16"
    assert suite.plan_for("04_in_flight", 1, 4096, 132)[0] == "verify_staged8"
    assert [suite.plan_for("05_one_range", k, 4096, 132)[0] for k in (2, 4, 5)] == [
        "verify_span8",
        "verify_span16",
        "verify_span32",
    ]
    with pytest.raises(ValueError):
        suite.plan_verify(9, 4096, 132)


def test_draft_mask_is_causal_within_the_draft(suite: ModuleType) -> None:
    mask = suite.draft_mask(np, 3, 5)
    assert mask.shape == (3, 8)
    assert mask[:, :5].all()  # the cache, for every draft token
    assert mask[:, 5:].tolist() == [[True, False, False], [True, True, False], [True, True, True]]


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_header_states_idea_bound_and_constraints(loaded: LoadedSuite, stem: str) -> None:
    version = version_named(loaded, stem)
    assert re.match(rf"^{stem[:2]} \S.*: \S", version.title), version.title
    text = " ".join(version.header)
    previous = "Idea:" if stem.startswith("00") else f"Idea against 0{int(stem[:2]) - 1}:"
    for label in (previous, "Expected bound", "Size constraints:"):
        assert label in text, f"{stem}: header lacks {label!r}"
    assert "estimate" in text
    source = version.source
    if stem == "00_k_decodes":
        attention = VERIFY.parent / "attention" / "04_split_kv.cu"
        assert '#include "../attention/04_split_kv.cu"' in source
        assert includes(VERIFY / "00_k_decodes.cu") == [attention.resolve()]
        source = attention.read_text(encoding="utf-8")
    else:
        assert "static_assert" in source
        assert "constexpr int MAX_DRAFT = 8;" in source or stem != "01_one_pass"
    assert set(KERNEL_ENTRY.findall(source)) == ENTRIES[stem]


def test_constants_match_the_launcher(loaded: LoadedSuite, suite: ModuleType) -> None:
    for stem in ("01_one_pass", "02_tensor_core", "03_one_launch", "04_in_flight", "05_one_range"):
        source = version_named(loaded, stem).source
        assert "constexpr int D = 128;" in source and "constexpr int G = 4;" in source
        merged_apart = stem in ("01_one_pass", "02_tensor_core")
        assert ("constexpr int MERGE_THREADS = D / 2;" in source) == merged_apart
        assert "constexpr int THREADS" in source
    assert (
        f"constexpr int MAX_DRAFT = {suite.MAX_DRAFT};"
        in version_named(loaded, "01_one_pass").source
    )
    for stem in ("02_tensor_core", "03_one_launch", "04_in_flight", "05_one_range"):
        assert "constexpr int BLOCK_ROWS = 16;" in version_named(loaded, stem).source
    assert suite.MMA_ROWS == 16 and suite.MERGE_THREADS == 64 and suite.THREADS == 256
    merge = f"constexpr int MERGE_MAX_SPLITS = {suite.MERGE_MAX_SPLITS};"
    for stem in ("04_in_flight", "05_one_range"):
        assert merge in version_named(loaded, stem).source


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_compiles_for_sm90_without_spills(stem: str) -> None:
    proc = subprocess.run(
        ["nvcc", "-arch=sm_90", "-std=c++17", "-Xptxas", "-v", "-c", "-o", "/dev/null"]
        + [str(VERIFY / f"{stem}.cu")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
    spills = re.findall(r"(\d+) bytes (?:stack frame|spill stores|spill loads)", proc.stderr)
    assert spills and all(n == "0" for n in spills), proc.stderr


# --- the references and 01's walk, in NumPy -------------------------------------------------


def _inputs(suite: ModuleType, k: int, t: int, seed: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    b, hq, hkv, d = suite.B, suite.HQ, suite.HKV, suite.D
    return {
        "q": _bf16(rng.standard_normal((b, hq, k, d))),
        "k": _bf16(rng.standard_normal((b, hkv, t + k, d))),
        "v": _bf16(rng.standard_normal((b, hkv, t + k, d))),
    }


def _values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def test_verify_reference_is_masked_attention_per_draft(suite: ModuleType) -> None:
    k, t = 3, 64
    inputs = _inputs(suite, k, t)
    ref = suite.verify_reference(
        {n: a.astype(np.float64) for n, a in inputs.items()}, {"k": k, "t": t}
    )
    out = ref["out"]
    q, kc, vc = (_values(inputs[n]) for n in ("q", "k", "v"))
    for h in (0, 5, 31):
        for i in range(k):
            n = t + i + 1  # the cache and drafts 0..i
            s = kc[0, h // 4, :n] @ q[0, h, i] / math.sqrt(128)
            w = np.exp(s - s.max())
            want = (w / w.sum()) @ vc[0, h // 4, :n]
            np.testing.assert_allclose(out[0, h, i], want, rtol=1e-12, atol=1e-13)


def test_decodes_reference_is_one_decode_a_draft_token(suite: ModuleType) -> None:
    k, t = 2, 64
    rng = np.random.default_rng(5)
    inputs = {
        "q": _bf16(rng.standard_normal((k, 1, 32, 128))),
        "k": _bf16(rng.standard_normal((1, 8, t, 128))),
        "v": _bf16(rng.standard_normal((1, 8, t, 128))),
    }
    up = {n: a.astype(np.float64) for n, a in inputs.items()}
    out = suite.decodes_reference(up, {"k": k, "t": t})["out"]
    assert out.shape == (k, 1, 32, 128)
    one = suite.attention.decode_reference(
        {"q": up["q"][1], "k": up["k"], "v": up["v"]},
        {"b": 1, "hq": 32, "hkv": 8, "t": t, "d": 128},
    )["out"]
    np.testing.assert_array_equal(out[1], one)


def test_split_walk_with_the_draft_rule_is_the_reference(suite: ModuleType) -> None:
    """01's plan, 32-token tiles, the visibility rule `pos < t_end and pos <= T + draft` with the
    last range running to T + k, and the split merge: equal to the float64 reference."""
    k, t = 5, 192
    inputs = _inputs(suite, k, t, seed=9)
    ref = suite.verify_reference(
        {n: a.astype(np.float64) for n, a in inputs.items()}, {"k": k, "t": t}
    )
    q, kc, vc = (_values(inputs[n]) for n in ("q", "k", "v"))
    _, plan = suite.plan_for("01_one_pass", k, t, 132)
    assert plan.splits == 3
    scale = suite.LOG2E / math.sqrt(128)
    for hk in (0, 7):
        rows = q[0, 4 * hk : 4 * hk + 4].reshape(4 * k, 128)  # row r = (head r // k, draft r % k)
        states = []
        for split in range(plan.splits):
            t0 = split * plan.tokens_per_split
            t_end = t + k if split == plan.splits - 1 else min(t, t0 + plan.tokens_per_split)
            m = np.full(4 * k, -np.inf)
            total, acc = np.zeros(4 * k), np.zeros((4 * k, 128))
            for a in range(t0, t_end, 32):
                pos = np.arange(a, a + 32)
                s = rows @ kc[0, hk, np.minimum(pos, t + k - 1)].T * scale
                draft = np.arange(4 * k) % k
                s[~((pos[None, :] < t_end) & (pos[None, :] <= t + draft[:, None]))] = -np.inf
                m_new = np.maximum(m, s.max(axis=1))
                alpha = np.exp2(m - m_new)
                p = np.exp2(s - m_new[:, None])
                total = total * alpha + p.sum(axis=1)
                acc = acc * alpha[:, None] + p @ vc[0, hk, np.minimum(pos, t + k - 1)]
                m = m_new
            states.append((m, total, acc))
        big = np.max([s[0] for s in states], axis=0)
        w = [np.exp2(s[0] - big) for s in states]
        num = sum(wi[:, None] * s[2] for wi, s in zip(w, states, strict=True))
        den = sum(wi * s[1] for wi, s in zip(w, states, strict=True))
        out = num / den[:, None]
        want = ref["out"][0, 4 * hk : 4 * hk + 4].reshape(4 * k, 128)
        np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-12)


# --- 02's 16-row step, lane by lane (the PTX fragment layouts) ------------------------------


def _lanes() -> list[tuple[int, int]]:
    return [(lane >> 2, lane & 3) for lane in range(32)]


def _words(row: np.ndarray, t: int) -> list[np.ndarray]:
    """Lane t's 16 words (value pairs) of one 128-value row: chunks t, t + 4, t + 8, t + 12."""
    return [
        row[8 * (4 * r + t) + 2 * w : 8 * (4 * r + t) + 2 * w + 2]
        for r in range(4)
        for w in range(4)
    ]


# The lines of 02-04 that the lane-by-lane model below stands for.
STEP_LINES = (
    "const int dim = 32 * (i / 2) + 8 * (g / 2) + 4 * (i % 2) + g % 2;",
    "const int c_lo = 8 * b + 2 * tq, c_hi = c_lo + 1;",
    "qa[2 * r][1] = hi.x;",
    "qa[2 * r][2] = lo.y;",
    "s[b][0] = (sa[2 * b] + sb[2 * b]) * scale_log2;",
    "pb[b] = pack_bf16x2(p0, p1);",
)


def test_sixteen_row_step_computes_scores_and_pv(loaded: LoadedSuite) -> None:
    """Rows g in a0/a2 and g + 8 in a1/a3 of m16n8k16: the scores of all 16 rows, c0/c1 row g and
    c2/c3 row g + 8; each as the B fragment of its own m16n8k8 P V block; the write-back puts
    block b's columns 2t, 2t + 1 at rows 8 b + 2t, 8 b + 2t + 1."""
    for stem in ("02_tensor_core", "03_one_launch", "04_in_flight", "05_one_range"):
        source = version_named(loaded, stem).source
        for line in STEP_LINES:
            assert line in source, (stem, line)
    rng = np.random.default_rng(23)
    q, k, v = (rng.standard_normal((n, 128)) for n in (16, 8, 8))
    lanes = _lanes()
    kw = {(g, t): _words(k[g], t) for g, t in lanes}
    lo = {(g, t): _words(q[g], t) for g, t in lanes}
    hi = {(g, t): _words(q[g + 8], t) for g, t in lanes}
    scores = np.zeros((16, 8))
    for r in range(4):
        for s_ in range(2):
            a, b = np.zeros((16, 16)), np.zeros((16, 8))
            w0, w1 = 4 * r + 2 * s_, 4 * r + 2 * s_ + 1
            for g, t in lanes:
                a[g, 2 * t : 2 * t + 2], a[g + 8, 2 * t : 2 * t + 2] = lo[g, t][w0], hi[g, t][w0]
                a[g, 2 * t + 8 : 2 * t + 10] = lo[g, t][w1]
                a[g + 8, 2 * t + 8 : 2 * t + 10] = hi[g, t][w1]
                b[2 * t : 2 * t + 2, g], b[2 * t + 8 : 2 * t + 10, g] = kw[g, t][w0], kw[g, t][w1]
            scores += a @ b
    np.testing.assert_allclose(scores, q @ k.T, rtol=1e-12, atol=1e-12)
    c = {(g, t): (scores[g, 2 * t : 2 * t + 2], scores[g + 8, 2 * t : 2 * t + 2]) for g, t in lanes}
    p = np.exp(rng.standard_normal((16, 8)))
    vw = {(g, t): _words(v[g], t) for g, t in lanes}

    def transposed(word: int) -> dict[tuple[int, int], np.ndarray]:
        m = np.zeros((8, 8))
        for g, t in lanes:
            m[g, 2 * t : 2 * t + 2] = vw[g, t][word]
        return {(g, t): m.T[g, 2 * t : 2 * t + 2] for g, t in lanes}

    out = np.zeros((16, 128))
    for blk in range(2):
        bmat = np.zeros((8, 8))
        for g, t in lanes:
            assert c[g, t][blk].shape == (2,)  # c0/c1 (block 0) or c2/c3 (block 1): P's B fragment
            bmat[2 * t : 2 * t + 2, g] = p[8 * blk + g, 2 * t : 2 * t + 2]
        for i in range(8):
            r, s_ = i // 2, i % 2
            v_lo, v_hi = transposed(4 * r + 2 * s_), transposed(4 * r + 2 * s_ + 1)
            a = np.zeros((16, 8))
            for g, t in lanes:
                a[g, 2 * t : 2 * t + 2], a[g + 8, 2 * t : 2 * t + 2] = v_lo[g, t], v_hi[g, t]
            tile = a @ bmat
            for g, t in lanes:
                dim = 32 * (i // 2) + 8 * (g // 2) + 4 * (i % 2) + g % 2
                c_lo, c_hi = 8 * blk + 2 * t, 8 * blk + 2 * t + 1
                out[c_lo, dim], out[c_lo, dim + 2] = tile[g, 2 * t], tile[g + 8, 2 * t]
                out[c_hi, dim], out[c_hi, dim + 2] = tile[g, 2 * t + 1], tile[g + 8, 2 * t + 1]
    np.testing.assert_allclose(out, p @ v, rtol=1e-12, atol=1e-12)


def test_draft_step_mask_matches_the_rule(suite: ModuleType) -> None:
    """02's masked step: lane (g, t) drops token T + 2t + j for its row's draft i when 2t + j > i;
    the kept set is the draft mask's last k columns, for every row of every block."""
    for k in range(1, 9):
        mask = suite.draft_mask(np, k, 0)  # [k, k]: draft i sees draft positions 0..i
        rows = 4 * k
        for row0 in range(0, rows, 16):
            for blk in range(2):
                for g in range(8):
                    r = row0 + g + 8 * blk
                    if r >= rows:
                        continue
                    i = r % k
                    for tq in range(4):
                        for j in range(2):
                            pos = 2 * tq + j
                            kept = not pos > i
                            assert kept == (pos < k and bool(mask[i, pos]))


# --- on the device ------------------------------------------------------------------------


@pytest.mark.gpu
def test_every_version_matches_the_reference_on_the_check_shape(loaded: LoadedSuite) -> None:
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA device")
    for version in loaded.versions:
        bench = loaded.claims[version.stem]
        for shape in (*bench.check_shapes, {"k": 8, "t": 1024}):
            module = cupy.RawModule(code=version.source, options=tuple(bench.compile_options))
            inputs = bench.inputs(shape, cupy.random.default_rng(1))
            outputs = {}
            for name, spec in bench.outputs.items():
                out = cupy.empty(spec.shape(shape), dtype=spec.dtype)
                out.view(cupy.uint8).fill(0xFF)
                outputs[name] = out
            bench.launch(module, version, shape, {**inputs, **outputs})
            cupy.cuda.get_current_stream().synchronize()
            ref = bench.reference({n: a.astype(cupy.float64) for n, a in inputs.items()}, shape)
            got = bench.compare(outputs) if bench.compare else outputs
            for name in bench.outputs:
                g = got[name].astype(cupy.float64)
                rel = float(cupy.linalg.norm(g - ref[name]) / cupy.linalg.norm(ref[name]))
                assert rel <= bench.tolerance, f"{version.id} at {shape}: rel_err {rel:.2e}"


class _Warp:
    """One warp's walk through its range in 04's loop: which step's rows each stage holds."""

    def __init__(self, t: int, t_end: int, stages: int, step: int = 64) -> None:
        self.t, self.t_end, self.step = t, t_end, step
        self.held = [t, t + step if stages == 2 and t + step < t_end else None]
        self.seen: list[int] = []

    def stage_step(self, i: int, ahead: int) -> bool:
        assert self.held[i] == self.t  # the stage holds this step's rows
        self.seen.append(self.t)
        self.held[i] = self.t + ahead if self.t + ahead < self.t_end else None
        self.t += self.step
        return self.t < self.t_end


def test_two_stage_loop_visits_every_step_once_with_its_own_rows(loaded: LoadedSuite) -> None:
    """04's loop as written: stage_step computes on the rows its stage holds, reloads the stage
    `ahead` tokens on, and the two stages alternate; every step of the warp is computed once, on
    the rows loaded for it, for ranges of 1 to 5 steps."""
    source = version_named(loaded, "04_in_flight").source
    assert "const int t_ahead = t + ahead;" in source
    assert "const int ahead = 2 * CTA_TOKENS;" in source
    assert "stage_step<NB>(st, qa, kr2, vr2, kh, vh, t, t_end, ahead" in source
    for steps in range(1, 6):
        for stages in (1, 2):
            t_begin, warp = 128, 3
            w = _Warp(t_begin + 8 * warp, t_begin + 64 * steps, stages)
            if stages == 2:
                while w.stage_step(0, 128) and w.stage_step(1, 128):
                    pass
            else:
                while w.stage_step(0, 64):
                    pass
            assert w.seen == [t_begin + 8 * warp + 64 * n for n in range(steps)]


@pytest.mark.parametrize("warps", [8, 4])
def test_a_row_blocks_warps_cover_the_range_once(warps: int) -> None:
    """05's row blocks of 4 warps step 32 tokens (04's 8 warps, 64): over ranges of 1 to 5
    64-token steps, the block's warps together compute every 8-token tile once."""
    step = 8 * warps
    for steps in range(1, 6):
        t_begin, t_end = 192, 192 + 64 * steps
        tiles = []
        for slot in range(warps):
            w = _Warp(t_begin + 8 * slot, t_end, 2, step)
            while w.stage_step(0, 2 * step) and w.stage_step(1, 2 * step):
                pass
            tiles += w.seen
        assert sorted(tiles) == list(range(t_begin, t_end, 8))
