"""The attention suite without a GPU: it loads, claims every file once, every shape fits its
kernels, the work model at the headlines, the split plan, the headers; the split-KV merge, the
paged layout and the sampled prefill check in NumPy; and a small on-device check marked `gpu`."""

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

from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

ATTENTION = Path(__file__).resolve().parents[2] / "kernels" / "attention"
EXPECTED = {
    "01_naive": "prefill_naive",
    "02_flash_fwd": "prefill",
    "03_decode": "decode",
    "04_split_kv": "decode",
    "05_paged": "decode",
    "06_split_kv_prefetch": "decode",
    "07_split_kv_tail": "decode",
}
ENTRIES = {
    "01_naive": {"naive_scores", "naive_softmax", "naive_pv"},
    "02_flash_fwd": {"flash_fwd"},
    "03_decode": {"decode"},
    "04_split_kv": {"split_kv"},
    "05_paged": {"paged"},
    "06_split_kv_prefetch": {
        f"split_kv_prefetch_{v}" for v in ("p0", "h0", "p2", "p4", "h4", "p8")
    },
    "07_split_kv_tail": {"split_kv_tail"},
}
PREFILL_HEADLINE = {"b": 8, "h": 16, "s": 4096, "d": 128}
DECODE_HEADLINE = {"b": 1, "hq": 32, "hkv": 8, "t": 32768, "d": 128}


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(ATTENTION)


@pytest.fixture(scope="module")
def suite(loaded: LoadedSuite) -> ModuleType:
    """The imported suite.py, for its helpers."""
    return sys.modules["curriculum_suite_attention"]


def _bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns, nearest even."""
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


# --- what the suite declares ------------------------------------------------------------


def test_every_version_claimed_once(loaded: LoadedSuite) -> None:
    assert {v.stem: loaded.claims[v.stem].name for v in loaded.versions} == EXPECTED
    assert all(re.fullmatch(r"\d{2}_[a-z0-9_]+\.cu", p.name) for p in ATTENTION.glob("*.cu"))
    assert len(plan_cases([loaded])) == 2 + 4 + 5 * 3


def test_every_shape_fits_every_version_that_runs_it(
    loaded: LoadedSuite, suite: ModuleType
) -> None:
    for version in loaded.versions:
        bench = loaded.claims[version.stem]
        for shape in bench.shapes:
            assert suite.problems(version.stem, shape) == [], (version.stem, shape)
    by_name = {b.name: b for b in loaded.suite.benchmarks}
    assert dict(by_name["prefill"].headline) == PREFILL_HEADLINE
    assert dict(by_name["decode"].headline) == DECODE_HEADLINE
    assert sorted(s["t"] for s in by_name["decode"].shapes) == [1024, 4096, 32768]
    # 01 stays small: its fp32 score scratch is B*H*S^2*4 bytes.
    for shape in by_name["prefill_naive"].shapes:
        assert shape["b"] * shape["h"] * shape["s"] ** 2 * 4 <= 1 << 30


def test_shapes_that_do_not_fit_are_refused(loaded: LoadedSuite, suite: ModuleType) -> None:
    assert suite.problems("02_flash_fwd", {**PREFILL_HEADLINE, "s": 4096 + 64})
    assert suite.problems("02_flash_fwd", {**PREFILL_HEADLINE, "d": 64})
    assert suite.problems("04_split_kv", {**DECODE_HEADLINE, "t": 1000})
    assert suite.problems("05_paged", {**DECODE_HEADLINE, "hkv": 16})
    assert suite.problems("04_split_kv", {**DECODE_HEADLINE, "b": 1024, "hq": 64, "hkv": 16})
    assert not suite.problems("05_paged", {**DECODE_HEADLINE, "b": 512})
    with pytest.raises(ValueError, match="03_decode"):
        suite._require_fit(version_named(loaded, "03_decode"), {**DECODE_HEADLINE, "t": 32})


def test_work_model_at_the_headlines(loaded: LoadedSuite) -> None:
    by_name = {b.name: b for b in loaded.suite.benchmarks}
    prefill = by_name["prefill"]
    assert prefill.flops(PREFILL_HEADLINE) == 4 * 8 * 16 * 4096**2 * 128 == 1 << 40
    assert prefill.bytes(PREFILL_HEADLINE) == 4 * 8 * 16 * 4096 * 128 * 2 == 1 << 29
    decode = by_name["decode"]
    assert decode.bytes(DECODE_HEADLINE) == 2 * 8 * 32768 * 128 * 2 + 2 * 32 * 128 * 2
    assert decode.bytes(DECODE_HEADLINE) == (1 << 27) + (1 << 14)
    assert decode.flops(DECODE_HEADLINE) == 4 * 32 * 32768 * 128 == 1 << 29
    for name in ("prefill_naive", "prefill"):
        assert by_name[name].roofline.compute == "gemm_bf16"
    assert decode.roofline.bandwidth == "copy" and decode.roofline.compute is None
    for bench in by_name.values():
        names = [c.name for c in bench.candidates]
        assert names == ["cuDNN SDPA", "FlashAttention SDPA", "efficient SDPA", "math SDPA"]
        assert bench.tolerance_reason and 0 < bench.tolerance <= 1e-2
        assert bench.compare is not None
    # Decode intensity: 4 FLOP per byte, far under the ~200 FLOP/byte ridge of bf16 on an H200.
    assert decode.flops(DECODE_HEADLINE) / decode.bytes(DECODE_HEADLINE) < 4.01


def test_split_plan(suite: ModuleType) -> None:
    plan = suite.plan_splits
    assert (plan(32768, 8, 132).splits, plan(32768, 8, 132).tokens_per_split) == (32, 1024)
    assert (plan(4096, 8, 132).splits, plan(4096, 8, 132).tokens_per_split) == (32, 128)
    assert (plan(1024, 8, 132).splits, plan(1024, 8, 132).tokens_per_split) == (16, 64)
    with pytest.raises(ValueError, match="splits"):
        plan(4096 * 257, 8, 132)
    for t in range(64, 300_000, 64 * 37):
        for groups in (1, 8, 64, 512):
            p = plan(t, groups, 132)
            assert p.tokens_per_split % 64 == 0 and 64 <= p.tokens_per_split <= 4096
            assert (p.splits - 1) * p.tokens_per_split < t <= p.splits * p.tokens_per_split


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_header_states_idea_bound_and_constraints(loaded: LoadedSuite, stem: str) -> None:
    version = version_named(loaded, stem)
    assert re.match(rf"^{stem[:2]} \S.*: \S", version.title), version.title
    text = " ".join(version.header)
    previous = "Idea:" if stem.startswith("01") else f"Idea against 0{int(stem[:2]) - 1}:"
    for label in (previous, "Expected bound", "Size constraints:"):
        assert label in text, f"{stem}: header lacks {label!r}"
    assert "H200" in text and "estimate" in text
    assert "static_assert" in version.source
    assert set(KERNEL_ENTRY.findall(version.source)) == ENTRIES[stem]


def test_flash_constants_match_the_launcher(loaded: LoadedSuite, suite: ModuleType) -> None:
    source = version_named(loaded, "02_flash_fwd").source
    consts = {m[0]: int(m[1]) for m in re.findall(r"constexpr int (\w+) = (\d+);", source)}
    assert consts["BM"] == suite.FLASH_BM and consts["D"] == suite.HEAD_DIM
    smem = (consts["BM"] * 128 + 2 * consts["STAGES"] * consts["BN"] * 128) * 2
    assert smem == suite.FLASH_SMEM == 96 * 1024
    assert consts["BM"] // 16 * 32 == suite.FLASH_THREADS
    paged = version_named(loaded, "05_paged").source
    assert f"constexpr int PAGE = {suite.PAGE};" in paged
    assert f"constexpr int MAX_SPLIT_TOKENS = {suite.MAX_SPLIT_TOKENS};" in paged
    for stem in ("04_split_kv", "05_paged"):
        source = version_named(loaded, stem).source
        assert f"constexpr int MAX_SPLITS = {suite.MAX_SPLITS};" in source
        assert f"constexpr int MAX_GROUPS = {suite.MAX_GROUPS};" in source


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_compiles_for_sm90_without_spills(stem: str) -> None:
    proc = subprocess.run(
        ["nvcc", "-arch=sm_90", "-std=c++17", "-Xptxas", "-v", "-c", "-o", "/dev/null"]
        + [str(ATTENTION / f"{stem}.cu")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
    spills = re.findall(r"(\d+) bytes (?:stack frame|spill stores|spill loads)", proc.stderr)
    assert spills and all(n == "0" for n in spills), proc.stderr


# --- the split-KV merge, in NumPy (log2 domain, as 04 and 05 compute it) ------------------


def _partial(s2: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(m, l, acc) of one token range: s2 are scores in log2 units [heads, n], v [n, D]."""
    if s2.shape[1] == 0:  # an empty range: the identity of the merge
        heads = s2.shape[0]
        return np.full(heads, -np.inf), np.zeros(heads), np.zeros((heads, v.shape[1]))
    m = s2.max(axis=1)
    w = np.exp2(s2 - m[:, None])
    return m, w.sum(axis=1), w @ v


def _merge(states: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> np.ndarray:
    """The split merge: M = max m_i, out = sum 2^(m_i - M) acc_i / sum 2^(m_i - M) l_i."""
    m = np.stack([s[0] for s in states])
    big = m.max(axis=0)
    w = np.exp2(m - big)
    total = (w * np.stack([s[1] for s in states])).sum(axis=0)
    acc = (w[:, :, None] * np.stack([s[2] for s in states])).sum(axis=0)
    return acc / total[:, None]


def test_split_kv_merge_is_the_dense_attention(suite: ModuleType) -> None:
    rng = np.random.default_rng(11)
    t, d, heads = 5000, 128, 4
    q = rng.standard_normal((heads, d))
    k = rng.standard_normal((t, d))
    v = rng.standard_normal((t, d))
    k[4321] = 4.0 * q[2]  # one token dominates head 2 late in the context: earlier splits rescale
    s2 = (q @ k.T) * (math.log2(math.e) / math.sqrt(d))
    dense = suite.softmax_attention64(q, k, v)
    plan = suite.plan_splits(t - t % 64, 8, 132)
    bounds = list(range(0, t, plan.tokens_per_split)) + [t]
    states = [_partial(s2[:, a:b], v[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    np.testing.assert_allclose(_merge(states), dense, rtol=1e-11, atol=1e-13)
    # Merging is associative: merge the CTA's half-warp states first, then the splits; and an
    # empty state (m = -inf, l = 0) carries weight 0.
    inner = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        parts = [_partial(s2[:, i : min(i + 8, b)], v[i : min(i + 8, b)]) for i in range(a, b, 8)]
        parts.append(_partial(s2[:, :0], v[:0]))
        merged = _merge(parts)
        m = np.max([p[0] for p in parts], axis=0)
        total = sum(np.exp2(p[0] - m) * p[1] for p in parts)
        inner.append((m, total, merged * total[:, None]))
    np.testing.assert_allclose(_merge(inner), dense, rtol=1e-11, atol=1e-13)


def test_split_kv_merge_in_float32_keeps_the_tolerance(suite: ModuleType) -> None:
    # 32 splits of 1024 tokens as the kernels hold them: fp32 states, fp32 merge.
    rng = np.random.default_rng(12)
    t, d, heads = 32768, 128, 4
    q = _bf16(rng.standard_normal((heads, d))).astype(np.uint32) << 16
    k = _bf16(rng.standard_normal((t, d))).astype(np.uint32) << 16
    v = _bf16(rng.standard_normal((t, d))).astype(np.uint32) << 16
    qf, kf, vf = (a.view(np.float32) for a in (q, k, v))
    dense = suite.softmax_attention64(
        qf.astype(np.float64), kf.astype(np.float64), vf.astype(np.float64)
    )
    s2 = (qf @ kf.T) * np.float32(math.log2(math.e) / math.sqrt(d))
    states = []
    for a in range(0, t, 1024):
        m = s2[:, a : a + 1024].max(axis=1)
        w = np.exp2(s2[:, a : a + 1024] - m[:, None]).astype(np.float32)
        states.append((m, w.sum(axis=1, dtype=np.float32), w @ vf[a : a + 1024]))
    out = _merge(states).astype(np.float32)
    rel = np.linalg.norm(out - dense) / np.linalg.norm(dense)
    assert rel < 1e-5
    rounded = (_bf16(out).astype(np.uint32) << 16).view(np.float32)
    rel_bf16 = np.linalg.norm(rounded - dense) / np.linalg.norm(dense)
    decode = next(b for b in suite.SUITE.benchmarks if b.name == "decode")
    assert 5e-4 < rel_bf16 < decode.tolerance / 3


def _lazy_state(
    s2: np.ndarray, v: np.ndarray, step: int, slack: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """04-05's loop on one softmax state: `step` tokens a turn; the reference m moves (and l, acc
    are rescaled) only when some new score of any head exceeds it by more than `slack`."""
    heads = s2.shape[0]
    m, total, acc = np.full(heads, -np.inf), np.zeros(heads), np.zeros((heads, v.shape[1]))
    for a in range(0, s2.shape[1], step):
        sc = s2[:, a : a + step]
        mx = sc.max(axis=1)
        if (mx > m + slack).any():
            m_new = np.maximum(m, mx)
            alpha = np.exp2(m - m_new)
            total, acc, m = total * alpha, acc * alpha[:, None], m_new
        p = np.exp2(sc - m[:, None])
        assert p.max() <= 2.0**slack
        total, acc = total + p.sum(axis=1), acc + p @ v[a : a + step]
    return m, total, acc


def test_lazy_rescale_gives_the_same_attention(suite: ModuleType, loaded: LoadedSuite) -> None:
    for stem in ("04_split_kv", "05_paged"):
        assert "constexpr float RESCALE_SLACK = 8.0f;" in version_named(loaded, stem).source
    rng = np.random.default_rng(13)
    t, d, heads = 4096, 128, 4
    q = rng.standard_normal((heads, d))
    k = rng.standard_normal((t, d))
    v = rng.standard_normal((t, d))
    k[3001] = 4.0 * q[1]  # a late dominant token: the reference must move there
    k[40:400] *= np.linspace(0.2, 1.0, 360)[:, None]  # slowly rising scores: several moves
    s2 = (q @ k.T) * (math.log2(math.e) / math.sqrt(d))
    dense = suite.softmax_attention64(q, k, v)
    # 8 states of a CTA, one a warp, each taking its warp's 8 tokens of every 64 a turn, merged as
    # 04-05 merge them.
    warp_of = (np.arange(t) // 8) % 8
    states = [_lazy_state(s2[:, warp_of == w], v[warp_of == w], 8, 8.0) for w in range(8)]
    np.testing.assert_allclose(_merge(states), dense, rtol=1e-11, atol=1e-13)


# --- the tensor-core step of 04-05, lane by lane in NumPy ---------------------------------

# Where lane (g, t) keeps accumulator tile i's c0 (and, + 2, its c2): the kernels' state store.
OUT_DIM = "32 * (i / 2) + 8 * (g / 2) + 4 * (i % 2) + g % 2"


def _lanes() -> list[tuple[int, int]]:
    return [(lane >> 2, lane & 3) for lane in range(32)]


def _words(row: np.ndarray, t: int) -> list[np.ndarray]:
    """Lane t's 16 words (value pairs) of one 128-value row: chunks t, t + 4, t + 8, t + 12."""
    return [
        row[8 * (4 * r + t) + 2 * w : 8 * (4 * r + t) + 2 * w + 2]
        for r in range(4)
        for w in range(4)
    ]


def test_tensor_core_step_computes_scores_and_pv(loaded: LoadedSuite) -> None:
    """One warp-step of 8 tokens as the PTX fragment layouts of mma.m16n8k16, mma.m16n8k8 and
    movmatrix.trans place the values: the scores come out as q K^T and the accumulators, read back
    by the state store's dim formula, as P V."""
    for stem in ("04_split_kv", "05_paged"):
        assert OUT_DIM in version_named(loaded, stem).source
    rng = np.random.default_rng(17)
    q, k, v = (
        rng.standard_normal((4, 128)),
        rng.standard_normal((8, 128)),
        rng.standard_normal((8, 128)),
    )
    lanes = _lanes()
    kw = {(g, t): _words(k[g], t) for g, t in lanes}  # word 4 r + w of chunk r, lane (g, t)
    qw = {(g, t): _words(q[g], t) if g < 4 else [np.zeros(2)] * 16 for g, t in lanes}
    # q K^T: step (r, s) takes words 2s (k 2t, 2t + 1) and 2s + 1 (k 2t + 8, 2t + 9) of chunk r
    scores = np.zeros((16, 8))
    for r in range(4):
        for s_ in range(2):
            a, b = np.zeros((16, 16)), np.zeros((16, 8))
            for g, t in lanes:
                lo, hi = 4 * r + 2 * s_, 4 * r + 2 * s_ + 1
                a[g, 2 * t : 2 * t + 2], a[g, 2 * t + 8 : 2 * t + 10] = qw[g, t][lo], qw[g, t][hi]
                b[2 * t : 2 * t + 2, g], b[2 * t + 8 : 2 * t + 10, g] = kw[g, t][lo], kw[g, t][hi]
            scores += a @ b
    c = {(g, t): scores[g, 2 * t : 2 * t + 2] for g, t in lanes}  # c0, c1 of lane (g, t)
    np.testing.assert_allclose(scores[:4], q @ k.T, rtol=1e-12, atol=1e-12)
    assert not scores[4:].any()
    # P V on m16n8k8: B is P^T straight from the score fragment; A is V^T from movmatrix.trans
    p = np.exp(rng.standard_normal((4, 8)))
    pb = {(g, t): p[g, 2 * t : 2 * t + 2] if g < 4 else np.zeros(2) for g, t in lanes}
    for g, t in lanes:  # the score lane (g, t) holds is the P its B fragment needs: no shuffle
        if g < 4:
            np.testing.assert_allclose(c[g, t], (q @ k.T)[g, 2 * t : 2 * t + 2], rtol=1e-12)
    vw = {(g, t): _words(v[g], t) for g, t in lanes}

    def transposed(word: int) -> dict[tuple[int, int], np.ndarray]:
        m = np.zeros((8, 8))
        for g, t in lanes:
            m[g, 2 * t : 2 * t + 2] = vw[g, t][word]
        return {(g, t): m.T[g, 2 * t : 2 * t + 2] for g, t in lanes}

    b = np.zeros((8, 8))
    for g, t in lanes:
        b[2 * t : 2 * t + 2, g] = pb[g, t]
    out = np.zeros((4, 128))
    for i in range(8):
        r, s_ = i // 2, i % 2
        lo, hi = transposed(4 * r + 2 * s_), transposed(4 * r + 2 * s_ + 1)
        a = np.zeros((16, 8))
        for g, t in lanes:
            a[g, 2 * t : 2 * t + 2], a[g + 8, 2 * t : 2 * t + 2] = lo[g, t], hi[g, t]
        tile = a @ b  # out^T rows (dims) x columns (heads)
        for g, t in lanes:
            if t < 2:
                dim = 32 * (i // 2) + 8 * (g // 2) + 4 * (i % 2) + g % 2
                out[2 * t : 2 * t + 2, dim] = tile[g, 2 * t : 2 * t + 2]
                out[2 * t : 2 * t + 2, dim + 2] = tile[g + 8, 2 * t : 2 * t + 2]
    np.testing.assert_allclose(out, p @ v, rtol=1e-12, atol=1e-12)


# --- the paged layout and the references, in NumPy ---------------------------------------


def test_block_table_finds_every_token(suite: ModuleType) -> None:
    rng = np.random.default_rng(13)
    b, hkv, t, d, page = 2, 8, 128, 16, suite.PAGE
    cache = rng.standard_normal((b, hkv, t, d))
    table = np.argsort(rng.random(b * t // page)).astype(np.int32).reshape(b, t // page)
    pool = suite.paginate(cache, table)
    assert pool.shape == (b * t // page, hkv, page, d)
    flat = pool.reshape(-1, d)
    for bi in range(b):
        for hk in range(hkv):
            for tok in range(t):
                # The kernel's row: ((page * Hkv + hk) * PAGE + t % PAGE), in rows of D.
                row = (int(table[bi, tok // page]) * hkv + hk) * page + tok % page
                assert np.array_equal(flat[row], cache[bi, hk, tok])
    assert sorted(table.ravel().tolist()) == list(range(b * t // page))


def test_decode_reference_is_per_head_attention(suite: ModuleType) -> None:
    rng = np.random.default_rng(14)
    shape = {"b": 2, "hq": 8, "hkv": 2, "t": 64, "d": 128}
    q = _bf16(rng.standard_normal((2, 8, 128)))
    k = _bf16(rng.standard_normal((2, 2, 64, 128)))
    v = _bf16(rng.standard_normal((2, 2, 64, 128)))
    inputs64 = {n: a.astype(np.float64) for n, a in (("q", q), ("k", k), ("v", v))}
    out = suite.decode_reference(inputs64, shape)["out"]
    qf, kf, vf = (suite.bf16_bits_to_float64(a) for a in (q, k, v))
    for bi in range(2):
        for h in range(8):
            hk = h // 4
            s = kf[bi, hk] @ qf[bi, h] / math.sqrt(128)
            p = np.exp(s - s.max())
            want = (p / p.sum()) @ vf[bi, hk]
            np.testing.assert_allclose(out[bi, h], want, rtol=1e-12, atol=1e-14)


def test_prefill_check_samples_rows_and_catches_unwritten_ones(suite: ModuleType) -> None:
    assert suite.sample_rows(1024) == slice(0, 1024, 1)
    for s in (2048, 4096):
        rows = range(s)[suite.sample_rows(s)]
        assert rows.step % 2 == 1 and len({r % 128 for r in rows}) == 128
    rng = np.random.default_rng(15)
    shape = {"b": 2, "h": 2, "s": 2048, "d": 128}
    q, k, v = (_bf16(rng.standard_normal((2, 2, 2048, 128))) for _ in range(3))
    inputs64 = {n: a.astype(np.float64) for n, a in (("q", q), ("k", k), ("v", v))}
    ref = suite.prefill_reference(inputs64, shape)["o"]
    assert ref.shape == (2, 2, len(range(2048)[suite.sample_rows(2048)]), 128)
    qf, kf, vf = (suite.bf16_bits_to_float64(a) for a in (q, k, v))
    dense = suite.softmax_attention64(qf[1, 0], kf[1, 0], vf[1, 0])
    np.testing.assert_allclose(ref[1, 0], dense[suite.sample_rows(2048)], rtol=1e-12, atol=1e-14)
    o = _bf16(np.zeros((2, 2, 2048, 128)))
    o[...] = _bf16(dense.astype(np.float32))[None, None]
    assert np.isfinite(suite.prefill_compare({"o": o})["o"]).all()
    o[1, 1, 2] = 0xFFFF  # the poison pattern, in a row the sample skips
    assert np.isnan(suite.prefill_compare({"o": o})["o"]).all()


# --- on the device ------------------------------------------------------------------------


@pytest.mark.gpu
def test_every_version_matches_the_reference_on_its_smallest_shape(loaded: LoadedSuite) -> None:
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA device")
    for version in loaded.versions:
        bench = loaded.claims[version.stem]
        shape = min(bench.shapes, key=lambda s: math.prod(s.values()))
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
            assert rel <= bench.tolerance, f"{version.id}: rel_err {rel:.2e}"
