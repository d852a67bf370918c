"""The GEMV suite without a GPU: it loads, claims every file, plans every launch and counts
its work; the INT4 packing, the bf16 dequantisation trick and the E4M3 table in NumPy; and one
warp of each kernel played out in NumPy, register by register, through the PTX layout of
mma.m16n8k16, so the k-permutation each kernel relies on is checked before any device runs it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from conftest import KERNEL_ENTRY, version_named

from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

GEMV = Path(__file__).resolve().parents[2] / "kernels" / "gemv"
EXPECTED = {
    "01_bf16": "gemv_bf16",
    "02_w4a16": "gemv_w4a16",
    "03_fp8_e4m3": "gemv_fp8",
    "04_nvfp4": "gemv_nvfp4",
    "05_prefetch_w4a16": "gemv_w4a16",
    "06_prefetch_fp8_e4m3": "gemv_fp8",
    "08_ksplit_fp8_e4m3": "gemv_fp8",
    "09_bulk_fp8_e4m3": "gemv_fp8",
}
PERSISTENT = {"09_bulk_fp8_e4m3"}  # one CTA an SM, dynamic shared memory
BATCH_1_ONLY = {"gemv_nvfp4"}  # benchmarks that sweep batch 1 alone
HEADLINE = {"batch": 1, "k": 8192, "n": 28672}
H200_SMS = 132


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(GEMV)


@pytest.fixture(scope="module")
def suite(loaded: LoadedSuite) -> ModuleType:
    return sys.modules["curriculum_suite_gemv"]


def _bench(loaded: LoadedSuite, name: str) -> object:
    return next(b for b in loaded.suite.benchmarks if b.name == name)


def test_every_version_claimed_once(loaded: LoadedSuite) -> None:
    assert {v.stem: loaded.claims[v.stem].name for v in loaded.versions} == EXPECTED


def test_shapes_sweep_batches_and_stay_past_the_l2(loaded: LoadedSuite) -> None:
    for bench in loaded.suite.benchmarks:
        assert dict(bench.headline) == HEADLINE
        shapes = [dict(s) for s in bench.shapes]
        batches = {1} if bench.name in BATCH_1_ONLY else {1, 4, 16}
        assert {s["batch"] for s in shapes if s["k"] == 8192} == batches
        assert any(s["k"] < 8192 and s["n"] < 28672 for s in shapes)
        for s in shapes:
            assert s["n"] * s["k"] // 2 >= 25 << 20  # even int4 weights are half an L2 or more
    assert len(plan_cases([loaded])) == (len(EXPECTED) - len(BATCH_1_ONLY)) * 4 + 2 * len(
        BATCH_1_ONLY
    )


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_every_shape_has_a_valid_launch(loaded: LoadedSuite, suite: ModuleType, stem: str) -> None:
    version = version_named(loaded, stem)
    entries = set(KERNEL_ENTRY.findall(version.source))
    batches = {s["batch"] for s in loaded.claims[stem].shapes}
    # 05 and 06 build several variants a batch: `<name>_b<batch>_<variant>`
    per_batch = {e.rsplit("_", 1)[0] if stem in suite.VARIANTS_BUILT else e for e in entries}
    assert per_batch == {f"{version.name}_b{b}" for b in batches} and batches <= set(suite.BATCHES)
    for shape in loaded.claims[stem].shapes:
        entry, blocks, threads = suite.plan(version, shape, H200_SMS)
        assert entry in entries
        if stem in PERSISTENT:
            grid, threads_wanted, smem = suite.persistent_launch(version, shape, H200_SMS)
            assert (blocks, threads) == (grid, threads_wanted) == (H200_SMS, threads)
            assert 48 * 1024 < smem <= 227 * 1024
            continue
        assert threads == suite.threads_per_block(stem, shape["batch"])
        tiles = shape["n"] // suite.rows_per_block(stem, shape["batch"])
        assert tiles - tiles // 2 <= blocks <= tiles
        assert shape["k"] % suite.FORMATS[stem].k_multiple == 0


def test_launch_refuses_shapes_that_do_not_fit(loaded: LoadedSuite, suite: ModuleType) -> None:
    w4 = version_named(loaded, "02_w4a16")
    with pytest.raises(ValueError, match="k=4608 is not a multiple of 1024"):
        suite.plan(w4, {"batch": 1, "k": 4608, "n": 28672}, H200_SMS)
    # 02 splits K between the four warps of a 16-row tile at batch 1 only; past one wave (7 blocks
    # an SM) two blocks an SM lead the grid with two tiles each
    assert suite.plan(w4, {"batch": 1, "k": 8192, "n": 28672}, H200_SMS)[1:] == (1792 - 264, 128)
    assert suite.plan(w4, {"batch": 1, "k": 4096, "n": 14336}, H200_SMS)[1:] == (896, 128)
    assert suite.plan(w4, {"batch": 1, "k": 4096, "n": 16000}, H200_SMS)[1] == 7 * H200_SMS
    assert suite.plan(w4, {"batch": 1, "k": 8192, "n": 28672}, 8)[1] == 1792 - 16
    assert suite.plan(w4, {"batch": 1, "k": 8192, "n": 1024}, 1)[1] == 64 - 2
    assert suite.plan(w4, {"batch": 4, "k": 8192, "n": 28672}, H200_SMS)[1:] == (896, 64)
    fp8 = version_named(loaded, "03_fp8_e4m3")
    assert suite.plan(fp8, {"batch": 1, "k": 8192, "n": 28672}, H200_SMS)[1:] == (896, 64)
    # 08: one 16-row tile a block of four warps at batch 1, K in quarters of whole stages
    split = version_named(loaded, "08_ksplit_fp8_e4m3")
    assert suite.plan(split, {"batch": 1, "k": 8192, "n": 28672}, H200_SMS)[1:] == (1792, 128)
    assert suite.plan(split, {"batch": 4, "k": 8192, "n": 28672}, H200_SMS)[1:] == (896, 64)
    with pytest.raises(ValueError, match="k=4224 is not a multiple of 512"):
        suite.plan(split, {"batch": 1, "k": 4224, "n": 28672}, H200_SMS)
    with pytest.raises(ValueError, match="n=28688 is not a multiple of 32"):
        suite.plan(w4, {"batch": 16, "k": 8192, "n": 28688}, H200_SMS)
    with pytest.raises(ValueError, match="batch=3"):
        suite.plan(w4, {"batch": 3, "k": 8192, "n": 28672}, H200_SMS)
    with pytest.raises(ValueError, match="n=100"):
        suite.plan(version_named(loaded, "01_bf16"), {"batch": 1, "k": 8192, "n": 100}, H200_SMS)


def test_persistent_launch_sizes_the_ring_from_the_source(
    loaded: LoadedSuite, suite: ModuleType
) -> None:
    """09: one CTA an SM; the launcher's shared memory is the kernel's carve-up, read off the
    source's own constants (a -D override in a scratch build would change both)."""
    v09 = version_named(loaded, "09_bulk_fp8_e4m3")
    geo = suite.geometry(v09)
    # parsed once: the launch runs inside the timed region, so it must not re-read the source
    assert suite.geometry(v09) is geo
    # every refill of a slot is fenced after its "empty" wait (generic reads, async-proxy writes)
    assert v09.source.count("proxy_fence();") == 4  # each consumer lane and each producer
    assert geo["PITCH"] == geo["TILE_K"] + 64 and geo["PITCH"] % 128 == 64
    assert f"#define PAIR_RING {geo['PAIR_RING']}" in v09.source
    # the kernel rounds its slot count as the launcher does (slot s is warp s mod PAIR_WARPS's)
    assert "PAIR_RING / (2 * k)) / PAIR_WARPS * PAIR_WARPS" in v09.source
    threads_1 = (geo["PAIR_WARPS"] + 1) * 32
    # 12 slots of two 8 KB rows, 16 KB of fp16 x, 24 mbarriers
    assert suite.persistent_launch(v09, HEADLINE, H200_SMS) == (H200_SMS, threads_1, 213_184)
    small = {"batch": 1, "k": 4096, "n": 14336}  # 24 slots of two 4 KB rows
    assert suite.persistent_launch(v09, small, H200_SMS)[2] == 24 * 8192 + 8192 + 16 * 24
    b16 = {"batch": 16, "k": 8192, "n": 28672}
    assert (
        suite.persistent_launch(v09, b16, H200_SMS)[2] == 5 * 16 * 2112 + 80 + 2 * 8 * 16 * 16 * 4
    )
    assert suite.plan(v09, b16, 8) == ("bulk_fp8_e4m3_b16", 8, (geo["TILE_WARPS"] + 1) * 32)
    with pytest.raises(ValueError, match="k=4352 is not a multiple of 512"):
        suite.plan(v09, {"batch": 1, "k": 4352, "n": 28672}, H200_SMS)
    with pytest.raises(ValueError, match="k=5120 is not a multiple of 2048"):
        suite.plan(v09, {"batch": 4, "k": 5120, "n": 28672}, H200_SMS)
    with pytest.raises(ValueError, match="fewer than 16 rows"):
        suite.plan(v09, {"batch": 16, "k": 8192, "n": 1024}, H200_SMS)
    with pytest.raises(ValueError, match="fewer ring slots of two rows than the 12 warps"):
        suite.plan(v09, {"batch": 1, "k": 8704, "n": 28672}, H200_SMS)
    # a slot count that is not a multiple of the warps is rounded down: 32 -> 24 at K = 512
    assert suite.persistent_launch(v09, {"batch": 1, "k": 512, "n": 600}, H200_SMS)[2] == (
        24 * 1024 + 1024 + 16 * 24
    )


@pytest.mark.parametrize(("n", "grid"), [(28672, 132), (14336, 132), (1000, 7), (33, 16)])
def test_persistent_rows_cover_n_once_and_balance_to_a_row(n: int, grid: int) -> None:
    """09's my_rows: CTA b owns rows [b N / grid, (b + 1) N / grid)."""
    starts = [b * n // grid for b in range(grid + 1)]
    counts = [starts[b + 1] - starts[b] for b in range(grid)]
    assert starts[0] == 0 and starts[-1] == n and sum(counts) == n
    assert max(counts) - min(counts) <= 1


@pytest.mark.parametrize(
    ("n", "sms"), [(28672, 132), (14336, 132), (16000, 132), (1024, 1), (2048, 3)]
)
def test_w4a16_batch_1_grid_covers_every_tile_once(
    loaded: LoadedSuite, suite: ModuleType, n: int, sms: int
) -> None:
    """02's batch-1 rule, as its source states it, on the launcher's grid: the first
    N / 16 - grid blocks own tiles 2b and 2b + 1 (warps 0-1 and 2-3, K in halves), every later
    block b one tile, doubles + b (warps 0-3, K in quarters); warp w of a slice > 0 leaves its sums
    in region w - 1 for its tile's slice-0 warp."""
    w4 = version_named(loaded, "02_w4a16")
    _, grid, threads = suite.plan(w4, {"batch": 1, "k": 8192, "n": n}, sms)
    assert "n / 16 - static_cast<int>(gridDim.x)" in w4.source
    doubles = n // 16 - grid
    slices: dict[int, list[int]] = {}
    for b in range(grid):
        for warp in range(threads // 32):
            ks = 2 if b < doubles else 4
            tile = 2 * b + warp // 2 if b < doubles else doubles + b
            slices.setdefault(tile, []).append(warp % ks)
    assert sorted(slices) == list(range(n // 16))
    assert all(
        sorted(got) == list(range(len(got))) and len(got) in (2, 4) for got in slices.values()
    )


def test_work_model_at_headline(loaded: LoadedSuite) -> None:
    n, k = 28672, 8192
    activations = 2 * (k + n)  # x read and y written once, bf16, batch 1
    bf16 = _bench(loaded, "gemv_bf16")
    w4 = _bench(loaded, "gemv_w4a16")
    fp8 = _bench(loaded, "gemv_fp8")
    assert bf16.bytes(HEADLINE) == 2 * n * k + activations == 469_835_776
    assert w4.bytes(HEADLINE) == n * k // 2 + 2 * n * (k // 128) + activations == 121_184_256
    assert fp8.bytes(HEADLINE) == n * k + 4 * n + activations == 235_069_440
    for bench in (bf16, w4, fp8):
        assert bench.flops(HEADLINE) == 2 * n * k
        assert bench.roofline.bandwidth == "read" and bench.roofline.compute is None
        names = [c.name for c in bench.candidates]
        assert names[0].startswith("F.linear") and names[1].startswith("torch.matmul")
        assert bench.tolerance == 1e-2 and bench.tolerance_reason
        assert bench.compare is not None
    # the quantised formats are 4x and 2x fewer bytes, scales included, to within 3%
    assert 3.85 < bf16.bytes(HEADLINE) / w4.bytes(HEADLINE) < 3.9
    assert 1.99 < bf16.bytes(HEADLINE) / fp8.bytes(HEADLINE) < 2.0


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_header_states_idea_bound_and_constraints(loaded: LoadedSuite, stem: str) -> None:
    version = version_named(loaded, stem)
    assert re.match(rf"^{stem[:2]} \S.*\S", version.title), version.title
    text = " ".join(version.header)
    previous = "Idea:" if stem.startswith("01") else "Idea against 0"
    for label in (previous, "Expected bound:", "Size constraints:"):
        assert label in text, f"{stem}: header lacks {label!r}"
    assert "K = 8192, N = 28672" in text and "4.5 TB/s" in text and " us" in text
    assert "static_assert" in version.source


def test_fp8_version_gets_the_toolkit_headers(loaded: LoadedSuite, suite: ModuleType) -> None:
    options = _bench(loaded, "gemv_fp8").compile_options
    assert options[:2] == ("--std=c++17", "-arch=sm_90")
    for flag in suite.toolkit_include():
        assert (Path(flag[2:]) / "cuda_fp8.h").is_file()
    assert _bench(loaded, "gemv_bf16").compile_options == ("--std=c++17", "-arch=sm_90")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_compiles_for_sm90_without_spills(stem: str) -> None:
    proc = subprocess.run(
        ["nvcc", "-arch=sm_90", "-std=c++17", "-Xptxas", "-v", "-c", "-o", "/dev/null"]
        + [str(GEMV / f"{stem}.cu")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
    spills = re.findall(r"(\d+) bytes (?:stack frame|spill stores|spill loads)", proc.stderr)
    registers = [int(r) for r in re.findall(r"Used (\d+) registers", proc.stderr)]
    assert len(spills) == 3 * len(registers) and all(n == "0" for n in spills), proc.stderr
    # 7 blocks of 2 warps an SM; a persistent version's one CTA of 9 warps may hold 224
    assert registers and max(registers) <= (224 if stem in PERSISTENT else 128)


# --- number formats in NumPy ------------------------------------------------------------


def test_int4_packing_round_trips_and_puts_pairs_in_halves(suite: ModuleType) -> None:
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 16, size=(5, 64)).astype(np.uint32)
    words = suite.pack_int4(codes, np)
    assert words.shape == (5, 8) and words.dtype == np.uint32
    np.testing.assert_array_equal(suite.unpack_int4(words, np), codes)
    for j in range(4):
        pair = (words >> (4 * j)) & 0x000F000F
        np.testing.assert_array_equal(pair & 0xF, codes[:, 2 * j :: 8])
        np.testing.assert_array_equal(pair >> 16, codes[:, 2 * j + 1 :: 8])
    # the float64 upcast the harness hands the reference unpacks the same way
    np.testing.assert_array_equal(suite.unpack_int4(words.astype(np.float64), np), codes)


def test_w4a16_tiling_round_trips_and_matches_the_kernels_copies(suite: ModuleType) -> None:
    n, k = 48, 768  # 3 warps of 16 rows, 3 stages of 256 values
    words = np.arange(n * k // 8, dtype=np.uint32).reshape(n, k // 8)
    tiled = suite.tile_w4a16(words, np)
    np.testing.assert_array_equal(suite.untile_w4a16(tiled, np), words)
    # 02 copies uint4 (stage * N/16 + warp) * 128 + 32 * (2 * piece + half) + lane of the tiled
    # words into its ring slot for row 16 * warp + lane / 4 + 8 * half, piece 8 * stage +
    # 4 * piece + lane % 4 of that row
    vectors = tiled.reshape(-1, 4)
    for stage in range(k // 256):
        for warp in range(n // 16):
            for piece in range(2):
                for half in range(2):
                    for lane in range(32):
                        got = vectors[
                            (stage * (n // 16) + warp) * 128 + 32 * (2 * piece + half) + lane
                        ]
                        row = 16 * warp + lane // 4 + 8 * half
                        at = 4 * (8 * stage + 4 * piece + lane % 4)
                        np.testing.assert_array_equal(got, words[row, at : at + 4])


def _bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def test_int4_dequantisation_by_mantissa_bits_is_exact(suite: ModuleType) -> None:
    codes = np.arange(16, dtype=np.uint32)
    biased = codes | 0x4300  # 02's OR into bf16 128.0
    np.testing.assert_array_equal(_bf16_value(biased), 128.0 + codes)
    assert _bf16_value(np.array([0x3F80]))[0] == 1.0
    assert _bf16_value(np.array([0xC308]))[0] == -136.0
    # biased * 1 - 136 is exact in bf16: q - 8 is an integer of 4 bits
    result = _bf16_value(biased) - 136.0
    np.testing.assert_array_equal(result, codes.astype(np.float64) - 8.0)
    assert np.all(suite.to_bf16_bits(result.astype(np.float32), np) == _round_trip(result))


def _round_trip(v: np.ndarray) -> np.ndarray:
    return (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def test_e4m3_table(suite: ModuleType) -> None:
    t = suite.e4m3_values()
    assert t.shape == (256,)
    assert t[0x00] == 0.0 and t[0x01] == 2.0**-9 and t[0x07] == 7 * 2.0**-9
    assert t[0x08] == 2.0**-6 and t[0x38] == 1.0 and t[0x3C] == 1.5
    assert t[0x7E] == 448.0 and t[0xFE] == -448.0 and t[0xB8] == -1.0
    assert np.isnan(t[0x7F]) and np.isnan(t[0xFF]) and np.isfinite(t).sum() == 254
    positive = t[:0x7F]
    assert np.all(np.diff(positive) > 0)  # codes 0..126 ascend: the encoder searches them
    np.testing.assert_array_equal(t[0x80:0xFF], -positive)
    # every value has at most 4 significant bits, so fp16 (the mma's type in 03) holds it exactly
    assert np.all(positive.astype(np.float16).astype(np.float64) == positive)


def test_e4m3_table_matches_ml_dtypes(suite: ModuleType) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    reference = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    np.testing.assert_array_equal(suite.e4m3_values(), reference)


def test_e4m3_encoder_picks_the_nearest_value(suite: ModuleType) -> None:
    t = suite.e4m3_values()
    finite = [c for c in range(256) if np.isfinite(t[c]) and c != 0x80]
    codes = suite.encode_e4m3(t[finite], np)
    np.testing.assert_array_equal(codes, np.array(finite, dtype=np.uint8))
    rng = np.random.default_rng(2)
    v = (rng.standard_normal(20000) * 60).clip(-448, 448).astype(np.float32)
    decoded = t[suite.encode_e4m3(v, np)]
    positive = t[:0x7F]
    nearest = positive[np.abs(np.abs(v)[:, None] - positive[None, :]).argmin(axis=1)]
    np.testing.assert_array_equal(np.abs(decoded), nearest)
    assert np.all((decoded == 0) | (np.sign(decoded) == np.sign(v)))


# --- one warp of each kernel, register by register --------------------------------------


def _mma(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """d of mma.m16n8k16 per lane, from per-lane registers as (low, high) value pairs:
    a (32, 4, 2), b (32, 2, 2) -> d (32, 4), PTX's layout: g = lane / 4, t = lane % 4."""
    big_a, big_b = np.zeros((16, 16)), np.zeros((16, 8))
    for lane in range(32):
        g, t = divmod(lane, 4)
        for h in range(2):
            big_a[g, 2 * t + h], big_a[g + 8, 2 * t + h] = a[lane, 0, h], a[lane, 1, h]
            big_a[g, 2 * t + 8 + h], big_a[g + 8, 2 * t + 8 + h] = a[lane, 2, h], a[lane, 3, h]
            big_b[2 * t + h, g], big_b[2 * t + 8 + h, g] = b[lane, 0, h], b[lane, 1, h]
    d = big_a @ big_b
    return np.array(
        [
            [d[g, 2 * t], d[g, 2 * t + 1], d[g + 8, 2 * t], d[g + 8, 2 * t + 1]]
            for g, t in (divmod(lane, 4) for lane in range(32))
        ]
    )


def _pair(word: int, decode: Callable[[int], float]) -> Pair:
    """A 32-bit register as its (low half, high half) values."""
    return decode(word & 0xFFFF), decode(word >> 16)


def _bf16(half: int) -> float:
    return float(_bf16_value(np.array([half]))[0])


def _words(row: np.ndarray, piece: int) -> list[int]:
    """The 4 little-endian 32-bit words of 16-byte piece `piece` of a row of raw bytes."""
    return [int(w) for w in row.view(np.uint32)[4 * piece : 4 * piece + 4]]


# One k16 step of a lane, read straight off the kernels' mma calls: the (low, high) value pairs
# of A registers a0..a3, then the indices (among the piece's x words) of B registers b0 and b1.
Pair = tuple[float, float]
Step = tuple[Pair, Pair, Pair, Pair, int, int]
Steps = Callable[[list[int], list[int]], list[Step]]


def _play_warp(
    x_bits: np.ndarray,
    rows: np.ndarray,
    values_per_piece: int,
    steps: Steps,
    scale: Callable[[int, int], float] | None,
) -> np.ndarray:
    """y (batch x 16) of one warp: x (batch x K bf16 bits), rows (16 x bytes a row)."""
    batch, k = x_bits.shape
    tiles = (batch + 7) // 8
    acc = np.zeros((tiles, 32, 4))
    x_bytes = x_bits.astype(np.uint16).view(np.uint8).reshape(batch, -1)
    for piece in range(k // values_per_piece // 4):  # piece c + 4p, in units of 4 lanes
        part = np.zeros((tiles, 32, 4))
        per_lane = []
        for lane in range(32):
            g, t = divmod(lane, 4)
            v = 4 * piece + t  # this lane's piece index along the row
            per_lane.append(steps(_words(rows[g], v), _words(rows[g + 8], v)))
        for s in range(len(per_lane[0])):
            for nt in range(tiles):
                a, b = np.zeros((32, 4, 2)), np.zeros((32, 2, 2))
                for lane in range(32):
                    g, t = divmod(lane, 4)
                    a0, a1, a2, a3, xw0, xw1 = per_lane[lane][s]
                    a[lane] = (a0, a1, a2, a3)
                    if g + 8 * nt < batch:
                        # x words of the same values: piece v of x is values_per_piece bf16
                        xs = x_bytes[g + 8 * nt].view(np.uint32)
                        base = (4 * piece + t) * values_per_piece // 2
                        b[lane] = (
                            _pair(int(xs[base + xw0]), _bf16),
                            _pair(int(xs[base + xw1]), _bf16),
                        )
                part[nt] += _mma(a, b)
        for lane in range(32):
            g, _ = divmod(lane, 4)
            sa = scale(g, piece) if scale else 1.0
            sb = scale(g + 8, piece) if scale else 1.0
            acc[:, lane] += part[:, lane] * np.array([sa, sa, sb, sb])
    y = np.full((batch, 16), np.nan)
    for nt in range(tiles):
        for lane in range(32):
            g, t = divmod(lane, 4)
            for e in range(2):
                col = 8 * nt + 2 * t + e
                if col < batch:
                    y[col, g], y[col, g + 8] = acc[nt, lane, e], acc[nt, lane, 2 + e]
    return y


def _bf16_steps(wa: list[int], wb: list[int]) -> list[Step]:
    p = [_pair(w, _bf16) for w in wa]
    q = [_pair(w, _bf16) for w in wb]
    # mma(a.x, b.x, a.y, b.y, xv.x, xv.y), then (a.z, b.z, a.w, b.w, xv.z, xv.w)
    return [(p[0], q[0], p[1], q[1], 0, 1), (p[2], q[2], p[3], q[3], 2, 3)]


def _dequant_pair(word: int, j: int) -> Pair:
    biased = ((word >> (4 * j)) & 0x000F000F) | 0x43004300
    lo, hi = _pair(biased, _bf16)
    return lo - 136.0, hi - 136.0


def _w4a16_steps(wa: list[int], wb: list[int]) -> list[Step]:
    steps = []
    for i in range(4):  # word i; x vector i of the piece is x words 4i..4i+3
        a = [_dequant_pair(wa[i], j) for j in range(4)]
        b = [_dequant_pair(wb[i], j) for j in range(4)]
        steps.append((a[0], b[0], a[1], b[1], 4 * i, 4 * i + 1))
        steps.append((a[2], b[2], a[3], b[3], 4 * i + 2, 4 * i + 3))
    return steps


def _fp8_steps_for(table: np.ndarray) -> Steps:
    def byte_pair(word: int, h: int) -> Pair:
        half = (word >> (16 * h)) & 0xFFFF
        return float(table[half & 0xFF]), float(table[half >> 8])

    def steps(wa: list[int], wb: list[int]) -> list[Step]:
        return [
            (
                byte_pair(wa[i], 0),
                byte_pair(wb[i], 0),
                byte_pair(wa[i], 1),
                byte_pair(wb[i], 1),
                2 * i,
                2 * i + 1,
            )
            for i in range(4)
        ]

    return steps


def _x_bits(suite: ModuleType, batch: int, k: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((batch, k)).astype(np.float32)
    return suite.to_bf16_bits(x, np)


@pytest.mark.parametrize("batch", [1, 3, 16])
def test_bf16_warp_computes_x_wt(suite: ModuleType, batch: int) -> None:
    k = 256  # two stages of 128
    x_bits = _x_bits(suite, batch, k, batch)
    w_bits = suite.to_bf16_bits(np.random.default_rng(10 + batch).standard_normal((16, k)), np)
    y = _play_warp(x_bits, w_bits.view(np.uint8).reshape(16, -1), 8, _bf16_steps, None)
    want = suite.bf16_bits_to_float64(x_bits, np) @ suite.bf16_bits_to_float64(w_bits, np).T
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("batch", [4, 16])  # the bf16 route; batch 1 has its own test below
def test_w4a16_warp_computes_x_wt_with_group_scales(suite: ModuleType, batch: int) -> None:
    k = 1024  # two stages of 512, 8 groups of 128
    rng = np.random.default_rng(20 + batch)
    codes = rng.integers(0, 16, size=(16, k))
    words = suite.pack_int4(codes, np)
    scale_bits = suite.to_bf16_bits(0.01 + 0.02 * rng.random((16, k // 128)), np)
    scales = suite.bf16_bits_to_float64(scale_bits, np)
    x_bits = _x_bits(suite, batch, k, 30 + batch)
    y = _play_warp(
        x_bits,
        words.view(np.uint8).reshape(16, -1),
        32,
        _w4a16_steps,
        lambda row, group: float(scales[row, group]),
    )
    w = (codes - 8.0).reshape(16, -1, 128) * scales[:, :, None]
    want = suite.bf16_bits_to_float64(x_bits, np) @ w.reshape(16, k).T
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)


def _f16(half: int) -> float:
    return float(np.array([half], dtype=np.uint16).view(np.float16)[0])


def _f16_pair(lo: float, hi: float) -> int:
    """Two values as the fp16x2 register cvt.rn.f16x2.f32 makes of them (lo in the low half)."""
    halves = np.array([lo, hi], dtype=np.float32).astype(np.float16).view(np.uint16)
    return int(halves[0]) | int(halves[1]) << 16


def test_w4a16_batch_1_fp16_route_folds_the_zero_point(suite: ModuleType) -> None:
    """02 at batch 1: codes biased by fp16 1024 (or 16 x code at bits 4-7), x in fp16 with values
    2, 3, 6, 7 of every 8 divided by 16, each group's first partial started at minus
    1032 x sum(x) over the unscaled values and 72 x sum(x) over the scaled ones. Only lanes 0-3
    supply x (column 0); the other lanes' B registers are garbage (NaN here) and only columns
    1-7, never stored, may show it."""
    k = 512  # 4 groups of 128
    rng = np.random.default_rng(60)
    codes = rng.integers(0, 16, size=(16, k))
    rows = suite.pack_int4(codes, np).view(np.uint8).reshape(16, -1)
    scale_bits = suite.to_bf16_bits(0.01 + 0.02 * rng.random((16, k // 128)), np)
    scales = suite.bf16_bits_to_float64(scale_bits, np)
    x = rng.standard_normal(k)
    x = np.where(np.abs(x) < 2.0**-9, 2.0**-9, x)  # fp16 holds bf16 x / 16 exactly from 2^-10
    x_bits = suite.to_bf16_bits(x.astype(np.float32), np)
    xv = suite.bf16_bits_to_float64(x_bits, np)

    def pairs(word: int) -> list[Pair]:  # values (0, 1), 16 x (2, 3), (4, 5), 16 x (6, 7)
        hi = word >> 8
        masks = [(word, 0x000F000F), (word, 0x00F000F0), (hi, 0x000F000F), (hi, 0x00F000F0)]
        return [_pair((w & m) | 0x64006400, _f16) for w, m in masks]

    acc = np.zeros((32, 4))
    for group in range(k // 128):
        offset = 0.0
        for v in range(4 * group, 4 * group + 4):  # the pieces of the group, lane t = v % 4
            for i in range(4):
                vals = xv[32 * v + 8 * i : 32 * v + 8 * i + 8]
                offset += 1032 * vals[[0, 1, 4, 5]].sum() + 72 * vals[[2, 3, 6, 7]].sum()
        part = np.full((32, 4), -offset)
        for i in range(4):
            steps: list[tuple[np.ndarray, np.ndarray]] = [
                (np.zeros((32, 4, 2)), np.full((32, 2, 2), np.nan)) for _ in range(2)
            ]
            for lane in range(32):
                g, t = divmod(lane, 4)
                v = 4 * group + t
                a = pairs(_words(rows[g], v)[i])
                b = pairs(_words(rows[g + 8], v)[i])
                vals = xv[32 * v + 8 * i : 32 * v + 8 * i + 8]
                x16 = [
                    _f16_pair(vals[0], vals[1]),
                    _f16_pair(vals[2] / 16, vals[3] / 16),
                    _f16_pair(vals[4], vals[5]),
                    _f16_pair(vals[6] / 16, vals[7] / 16),
                ]
                steps[0][0][lane] = (a[0], b[0], a[1], b[1])
                steps[1][0][lane] = (a[2], b[2], a[3], b[3])
                if g == 0:
                    steps[0][1][lane] = (_pair(x16[0], _f16), _pair(x16[1], _f16))
                    steps[1][1][lane] = (_pair(x16[2], _f16), _pair(x16[3], _f16))
            for a_regs, b_regs in steps:
                part += _mma(a_regs, b_regs)
        for lane in range(32):
            g = lane // 4
            acc[lane] += part[lane] * np.array([scales[g, group]] * 2 + [scales[g + 8, group]] * 2)
    y = np.concatenate([acc[0::4, 0], acc[0::4, 2]])  # lanes t = 0: column 0, rows g and g + 8
    w = (codes - 8.0).reshape(16, -1, 128) * scales[:, :, None]
    np.testing.assert_allclose(y, w.reshape(16, k) @ xv, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("batch", [1, 4])
def test_fp8_warp_computes_x_wt(suite: ModuleType, batch: int) -> None:
    k = 512  # two stages of 256
    table = suite.e4m3_values()
    rng = np.random.default_rng(40 + batch)
    w = rng.standard_normal((16, k))
    row_scale = np.abs(w).max(axis=1) / 448.0
    w8 = suite.encode_e4m3((w / row_scale[:, None]).astype(np.float32), np)
    x_bits = _x_bits(suite, batch, k, 50 + batch)
    y = _play_warp(x_bits, w8.reshape(16, -1), 16, _fp8_steps_for(table), None)
    want = suite.bf16_bits_to_float64(x_bits, np) @ table[w8].T
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)


def test_fp8_row_pair_diagonal_computes_two_dot_products(suite: ModuleType) -> None:
    """09 at batch 1: a warp's slot is two whole rows; lane (g, t) takes bytes 64g + 16t .. + 15 of
    every 512 of both rows as A rows g and 8 + g, and the same 16 values of x (from the two halves
    of the fp16 copy) as B column g. Only D[g][g] and D[8 + g][g] are kept, from lane (g, g / 2)."""
    k = 1024
    table = suite.e4m3_values()
    rng = np.random.default_rng(60)
    w8 = suite.encode_e4m3(rng.standard_normal((2, k)).astype(np.float32) * 50, np)
    x_bits = _x_bits(suite, 1, k, 61)
    x = suite.bf16_bits_to_float64(x_bits, np)[0]
    # shared x: vector v of 8 values is half v % 2 of 16-value piece v / 2
    halves = [x.reshape(-1, 2, 8)[:, h] for h in range(2)]
    acc = np.zeros((4, 32, 4))
    for c in range(0, k, 512):
        a, b = np.zeros((4, 32, 4, 2)), np.zeros((4, 32, 2, 2))
        for lane in range(32):
            off = c + 16 * lane
            r0, r1 = table[w8[0, off : off + 16]], table[w8[1, off : off + 16]]
            piece = c // 16 + lane
            xv = np.concatenate([halves[0][piece], halves[1][piece]])
            # word i is bytes 4i..4i+3: pair 0 goes to a0/a1 with b0, pair 1 to a2/a3 with b1
            for i in range(4):
                a[i, lane] = (
                    r0[4 * i : 4 * i + 2],
                    r1[4 * i : 4 * i + 2],
                    r0[4 * i + 2 : 4 * i + 4],
                    r1[4 * i + 2 : 4 * i + 4],
                )
                b[i, lane] = (xv[4 * i : 4 * i + 2], xv[4 * i + 2 : 4 * i + 4])
        for i in range(4):
            acc[i] += _mma(a[i], b[i])
    d0 = d1 = 0.0
    for lane in range(32):
        g, t = divmod(lane, 4)
        if t == g >> 1:
            d0 += acc[:, lane, g & 1].sum()
            d1 += acc[:, lane, 2 + (g & 1)].sum()
    np.testing.assert_allclose([d0, d1], table[w8] @ x, rtol=1e-12)


def test_fp8_integer_widening_is_exact_to_a_power_of_two() -> None:
    """06's FAST route: (in & 0x80008000) | ((in & 0x7F007F00) >> 1) on a word (and on the word
    shifted left by 8) gives fp16 pairs worth 2^-8 times every finite E4M3 byte, subnormals too."""

    def e4m3(b: int) -> float:
        sign = -1.0 if b & 0x80 else 1.0
        e, m = (b >> 3) & 0xF, b & 7
        return sign * (m * 2.0**-9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))

    finite = [b for b in range(256) if b & 0x7F != 0x7F]
    rng = np.random.default_rng(3)
    words = [int.from_bytes(bytes(rng.choice(finite, 4).tolist()), "little") for _ in range(2000)]
    words += [int.from_bytes(bytes([b, b ^ 0x80, 0, b]), "little") for b in finite]
    for word in words:
        odd = (word & 0x80008000) | ((word & 0x7F007F00) >> 1)  # bytes 1 and 3
        lo = (word << 8) & 0xFFFFFFFF
        even = (lo & 0x80008000) | ((lo & 0x7F007F00) >> 1)  # bytes 0 and 2
        halves = np.array([even, odd], dtype=np.uint32).view(np.float16).astype(np.float64)
        expect = [e4m3((word >> (8 * i)) & 0xFF) * 2.0**-8 for i in (0, 2, 1, 3)]
        np.testing.assert_array_equal(halves, expect)
