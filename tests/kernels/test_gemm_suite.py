"""The GEMM ladder's suite, checked without a GPU (one test at the end needs one).

What is checked here: every .cu file is claimed by exactly one benchmark and has
a launch geometry; every swept shape satisfies the size multiples each kernel
assumes; the geometry in suite.py agrees with the constants in the .cu source;
the 07 autotuning candidates pass the kernel's own static_asserts (mirrored);
the work model at 4096^3; the header of every file; the bf16 helpers; and,
where nvcc is installed, that every version compiles for Hopper without spills.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from conftest import suite_module

from curriculum.bench.api import Benchmark, Suite, Version, discover_versions

TOPIC_DIR = Path(__file__).resolve().parents[2] / "kernels" / "gemm"
gemm = suite_module("gemm")
SUITE: Suite = gemm.SUITE
VERSIONS: list[Version] = discover_versions(TOPIC_DIR)
BY_NAME: dict[str, Benchmark] = {b.name: b for b in SUITE.benchmarks}


def _owner(version: Version) -> Benchmark:
    owners = [b for b in SUITE.benchmarks if b.claims(version)]
    assert len(owners) == 1, f"{version.stem} claimed by {[b.name for b in owners]}"
    return owners[0]


def _constants(source: str) -> dict[str, int]:
    """Integer constants of a .cu file: `constexpr int X = expr;` and `#define X n`,
    evaluated in order (C++ integer division on positive values is Python's //)."""
    values: dict[str, int] = {}
    for line in source.splitlines():
        define = re.match(r"\s*#define\s+([A-Z_][A-Z0-9_]*)\s+(\d+)\s*$", line)
        if define:
            values.setdefault(define[1], int(define[2]))
            continue
        const = re.match(r"\s*constexpr int\s+([A-Z_][A-Z0-9_]*)\s*=\s*([^;]+);", line)
        if const:
            expr = const[2].replace("/", "//")
            try:
                values[const[1]] = int(eval(expr, {"__builtins__": {}}, dict(values)))
            except (NameError, SyntaxError, TypeError):
                continue
    return values


def test_the_ladder_is_thirteen_versions_in_order() -> None:
    assert [v.number for v in VERSIONS] == list(range(1, 14))
    assert SUITE.topic == "gemm"


def test_every_version_is_claimed_by_exactly_one_benchmark() -> None:
    claimed = {v.stem: _owner(v).name for v in VERSIONS}
    fp32 = {v.stem for v in VERSIONS[:9]}
    assert {s for s, b in claimed.items() if b == "sgemm"} == fp32 - {"07_autotuned"}
    assert {s for s, b in claimed.items() if b == "sgemm_tiles"} == {"07_autotuned"}
    assert {s for s, b in claimed.items() if b == "bf16"} == {v.stem for v in VERSIONS[9:12]}
    assert {s for s, b in claimed.items() if b == "bf16_out"} == {v.stem for v in VERSIONS[12:]}


def test_a_persistent_grid_is_one_block_per_sm_or_one_per_tile() -> None:
    geometry = gemm.GEOMETRY["13_wgmma_persistent"]
    assert geometry.grid(4096, 4096, sms=132) == (132,)
    assert geometry.grid(256, 256, sms=132) == (2,)  # two 128x256 tiles
    with pytest.raises(ValueError, match="SM count"):
        geometry.grid(4096, 4096)
    assert gemm.GEOMETRY["12_wgmma_tma"].grid(4096, 4096, sms=132) == (16, 32)


def test_bf16_output_bytes_count_c_in_bf16() -> None:
    shape = {"m": 4096, "n": 4096, "k": 4096}
    assert gemm.BF16_OUT.bytes(shape) == 3 * 4096 * 4096 * 2
    assert gemm.BF16.bytes(shape) == 4096 * 4096 * (2 + 2 + 4)


def test_geometry_has_one_entry_per_version_and_names_a_kernel_of_it() -> None:
    assert set(gemm.GEOMETRY) == {v.stem for v in VERSIONS}
    for v in VERSIONS:
        entry = gemm.GEOMETRY[v.stem].entry
        pattern = rf'extern "C" __global__ void(?: __launch_bounds__\([^)]*\))?\s+{entry}\('
        assert re.search(pattern, v.source), f"{v.stem}: no extern \"C\" kernel {entry}"
    assert gemm.TMA_VERSIONS.issubset(gemm.GEOMETRY)


def test_every_swept_shape_satisfies_every_versions_size_multiples() -> None:
    for v in VERSIONS:
        bench = _owner(v)
        geometries = [gemm.GEOMETRY[v.stem]]
        if v.stem == "07_autotuned":
            geometries += [c.geometry() for c in gemm.AUTOTUNE_CANDIDATES]
        for shape in [*bench.shapes, bench.headline]:
            for g in geometries:
                assert g.accepts(shape), f"{v.stem} {g.multiple} rejects {dict(shape)}"


def test_shapes_are_the_square_sweep_with_the_4096_headline() -> None:
    squares = [{"m": n, "n": n, "k": n} for n in (256, 512, 1024, 2048, 4096, 8192)]
    for bench in SUITE.benchmarks:
        shapes = [dict(s) for s in bench.shapes]
        if bench.name == "sgemm_tiles":  # 07 adds its tile sweep, checked in test_gemm_autotune
            assert shapes[: len(squares)] == squares
            assert all(gemm.candidate_of(s) is not None for s in shapes[len(squares) :])
        else:
            assert shapes == squares
        assert dict(bench.headline) == {"m": 4096, "n": 4096, "k": 4096}


def test_geometry_agrees_with_the_constants_in_the_source() -> None:
    for v in VERSIONS:
        g = gemm.GEOMETRY[v.stem]
        consts = _constants(v.source)
        threads = int(np.prod(g.block))
        if "BM" in consts:
            assert g.tile == (consts["BM"], consts["BN"]), v.stem
            assert g.multiple == (consts["BM"], consts["BN"], consts["BK"]), v.stem
            assert threads == consts["THREADS"], v.stem
        else:
            tile = consts["TILE"]
            assert g.tile == (tile, tile) and g.block == (tile, tile), v.stem
            assert g.multiple in ((1, 1, 1), (tile, tile, tile)), v.stem
        assert g.dynamic_smem == consts.get("SMEM_BYTES", 0), v.stem
        if g.dynamic_smem:
            assert "extern __shared__" in v.source, v.stem


def test_edge_handling_matches_the_declared_multiples() -> None:
    # Only versions that accept any size may be launched on partial tiles, and
    # those must guard their threads.
    for v in VERSIONS:
        if gemm.GEOMETRY[v.stem].multiple == (1, 1, 1):
            assert "if (row >= M || col >= N) return;" in v.source, v.stem


def test_autotune_candidates_pass_the_kernels_rules() -> None:
    candidates = gemm.AUTOTUNE_CANDIDATES
    assert gemm.AUTOTUNE_DEFAULT in candidates
    assert len(candidates) == len(set(candidates)) >= 20
    for c in candidates:
        assert c.problems() == [], c
        assert c.fits_registers(), c
        assert c.options() == (
            f"-DBM={c.bm}", f"-DBN={c.bn}", f"-DBK={c.bk}", f"-DTM={c.tm}", f"-DTN={c.tn}"
        )
    assert set(gemm.autotune_variants()) == {c.label for c in candidates}
    defaults = _constants(next(v for v in VERSIONS if v.stem == "07_autotuned").source)
    d = gemm.AUTOTUNE_DEFAULT
    assert (defaults["BM"], defaults["BN"], defaults["BK"], defaults["TM"], defaults["TN"]) == (
        d.bm, d.bn, d.bk, d.tm, d.tn
    )
    assert BY_NAME["sgemm_tiles"].version_options["07_autotuned"] == d.options()


def test_autotune_rules_reject_what_the_kernel_rejects() -> None:
    tc = gemm.TileConfig
    assert tc(64, 64, 8, 4, 4).problems()  # 256 threads, 128 float4 of A: uneven copy
    assert tc(128, 256, 8, 8, 8).problems()  # 512 threads, 256 float4 of A
    assert tc(256, 256, 32, 8, 8).problems()  # 64 KB of static shared memory
    assert tc(128, 128, 16, 2, 8).problems()  # fragments read as float4
    assert not tc(256, 256, 16, 8, 8).fits_registers()  # 1024 threads x 8x8 results


def test_work_model_at_4096() -> None:
    shape = {"m": 4096, "n": 4096, "k": 4096}
    flops = 2 * 4096**3
    assert BY_NAME["sgemm"].flops(shape) == BY_NAME["bf16"].flops(shape) == flops == 137438953472
    assert BY_NAME["sgemm"].bytes(shape) == 3 * 4096 * 4096 * 4 == 201326592
    assert BY_NAME["bf16"].bytes(shape) == 2 * 4096 * 4096 * 2 + 4096 * 4096 * 4 == 134217728
    rect = {"m": 256, "n": 512, "k": 1024}
    assert BY_NAME["sgemm"].bytes(rect) == (256 * 1024 + 1024 * 512 + 256 * 512) * 4
    assert BY_NAME["bf16"].bytes(rect) == (256 * 1024 + 1024 * 512) * 2 + 256 * 512 * 4


def test_benchmarks_declare_rooflines_baselines_and_options() -> None:
    sgemm, tiles, bf16 = BY_NAME["sgemm"], BY_NAME["sgemm_tiles"], BY_NAME["bf16"]
    # The tile sweep is 07 under the same inputs, check, work model and baseline as 01-09.
    for attr in ("inputs", "reference", "launch", "flops", "bytes", "tolerance", "baselines",
                 "roofline", "compile_options", "outputs"):
        assert getattr(tiles, attr) == getattr(sgemm, attr), attr
    assert (sgemm.roofline.bandwidth, sgemm.roofline.compute) == ("copy", "sgemm_fp32")
    assert (bf16.roofline.bandwidth, bf16.roofline.compute) == ("copy", "gemm_bf16")
    assert [c.name for c in sgemm.candidates] == ["cuBLAS (cupy.matmul)", "torch.matmul"]
    assert [c.name for c in bf16.candidates] == ["cuBLAS (gemmEx, fp32 C)", "torch.matmul (bf16 C)"]
    assert sgemm.tolerance == 1e-5 and bf16.tolerance <= 1e-2
    assert sgemm.tolerance_reason and bf16.tolerance_reason
    assert bf16.version_options["12_wgmma_tma"] == ("-arch=sm_90a",)
    for bench in (sgemm, tiles, bf16):
        assert set(bench.version_options) <= {v.stem for v in VERSIONS if bench.claims(v)}
        assert dict(bench.outputs)["c"].dtype == "float32"
        assert dict(bench.outputs)["c"].shape({"m": 3, "n": 5, "k": 7}) == (3, 5)


HEADER_SECTIONS = ("Expected bound (estimate)", "Constraints:")


@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: v.stem)
def test_header_structure(version: Version) -> None:
    lines = version.source.splitlines()
    m = re.match(r"^// (\d{2}) ([^:]+): \S", lines[0])
    assert m, f"{version.stem}: line 1 must be '// NN title: ...'"
    assert int(m[1]) == version.number
    header = "\n".join(version.header)
    idea = "Idea:" if version.number == 1 else f"Idea against {version.number - 1:02d}:"
    assert idea in header, f"{version.stem}: header lacks '{idea}'"
    for section in HEADER_SECTIONS:
        assert section in header, f"{version.stem}: header lacks '{section}'"
    assert "4096" in header and "H200" in header
    assert "static_assert(" in version.source
    for match in re.finditer(r"static_assert\((.*?)\);", version.source, re.S):
        assert re.search(r'"[^"]{8,}"\s*$', match[1]), f"{version.stem}: a static_assert says no why"


def test_bf16_rounding_is_nearest_even_and_decoding_accepts_the_upcast() -> None:
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, 1e-3], dtype=np.float32)
    bits = gemm.to_bf16_bits(x)
    assert bits.dtype == np.uint16
    assert [int(b) for b in bits] == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x3A83]
    decoded = gemm.bf16_bits_to_float64(bits)
    assert np.array_equal(decoded, gemm.bf16_bits_to_float64(bits.astype(np.float64)))
    assert decoded[2] == 1.015625 and decoded[3] == -2.5


def test_references_use_the_inputs_exactly() -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 4)).astype(np.float32)
    shape = {"m": 8, "n": 4, "k": 16}
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = BY_NAME["sgemm"].reference({"a": a.astype(np.float64), "b": b.astype(np.float64)}, shape)
    assert np.allclose(got["c"], want, rtol=0, atol=1e-12)
    ab, bb = gemm.to_bf16_bits(a), gemm.to_bf16_bits(b)
    upcast = {"a": ab.astype(np.float64), "b": bb.astype(np.float64)}  # what the harness passes
    got = BY_NAME["bf16"].reference(upcast, shape)["c"]
    exact = gemm.bf16_bits_to_float64(ab) @ gemm.bf16_bits_to_float64(bb)
    assert np.array_equal(got, exact)
    assert 1e-4 < np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-2  # bf16 rounding shows


_FAKE_ENCODER = r"""
#include <stdint.h>
#include <string.h>
int cuTensorMapEncodeTiled(void* map, int dtype, uint32_t rank, void* address,
                           const uint64_t* dims, const uint64_t* strides, const uint32_t* box,
                           const uint32_t* elem, int interleave, int swizzle, int l2, int oob) {
    if ((uintptr_t)map % 64) return 1;
    uint64_t v[16] = {dtype, rank, (uint64_t)address, dims[0], dims[1], strides[0], box[0],
                      box[1], elem[0], elem[1], interleave, swizzle, l2, oob, 0, 0};
    memcpy(map, v, sizeof v);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler for the stand-in driver")
def test_tensor_map_encoding_passes_the_right_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctypes

    (tmp_path / "fake.c").write_text(_FAKE_ENCODER)
    lib = tmp_path / "libfakecuda.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "fake.c")], check=True)
    real_cdll = ctypes.CDLL
    monkeypatch.setattr(ctypes, "CDLL", lambda name: real_cdll(str(lib)))
    tmap = gemm.tensor_map_2d(0xABCD00, inner=4096, outer=8192, box_inner=64, box_outer=128)
    assert tmap.shape == (1,) and tmap.dtype.itemsize == 128
    assert tmap.ctypes.data % 64 == 0  # the driver requires it; CuPy passes these bytes by value
    fields = np.frombuffer(tmap.tobytes(), dtype=np.uint64)[:14].tolist()
    assert fields == [9, 2, 0xABCD00, 4096, 8192, 4096 * 2, 64, 128, 1, 1, 0, 3, 3, 0]


def _nvcc_flags(options: tuple[str, ...]) -> list[str]:
    """NVRTC options -> nvcc flags (nvcc 13.0 needs -gencode for the 'a' target)."""
    if "-arch=sm_90a" in options:
        arch = ["-gencode=arch=compute_90a,code=sm_90a"]
    else:
        arch = ["-arch=sm_90"]
    return arch + [o for o in options if not o.startswith("-arch=")]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_every_version_compiles_for_hopper_without_spills(tmp_path: Path) -> None:
    def build(v: Version) -> tuple[str, int, str]:
        bench = _owner(v)
        options = tuple(bench.compile_options) + tuple(bench.version_options.get(v.stem, ()))
        cmd = ["nvcc", *_nvcc_flags(options), "-Xptxas", "-v", "-c", "-o", str(tmp_path / f"{v.stem}.o"), str(v.path)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        return v.stem, proc.returncode, proc.stdout + proc.stderr

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(build, VERSIONS))
    for stem, rc, log in results:
        assert rc == 0, f"{stem} failed to compile:\n{log}"
        spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
        assert spills and all(s == ("0", "0") for s in spills), f"{stem} spills:\n{log}"
        assert "wgmma serialization" not in log, f"{stem}:\n{log}"


def _cupy_with_gpu() -> ModuleType:
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception as exc:  # CUDA raises its own error types when no driver answers
        pytest.skip(f"no CUDA device: {exc}")
    return cupy


@pytest.mark.gpu
@pytest.mark.parametrize("size", [256, 512])
def test_every_version_matches_its_reference_on_the_gpu(size: int) -> None:
    cupy = _cupy_with_gpu()
    shape = {"m": size, "n": size, "k": size}
    rng = cupy.random.default_rng(size)
    for v in VERSIONS:
        bench = _owner(v)
        options = tuple(bench.compile_options) + tuple(bench.version_options.get(v.stem, ()))
        module = cupy.RawModule(code=v.source, options=options, backend="nvrtc")
        inputs = bench.inputs(shape, rng)
        spec = bench.outputs["c"]
        # Poisoned: NaN in fp32, and 0xFFFF (a NaN) in bf16 bits.
        c = cupy.full(spec.shape(shape), cupy.nan, dtype=cupy.float32)
        if spec.dtype == "uint16":
            c = cupy.full(spec.shape(shape), 0xFFFF, dtype=cupy.uint16)
        bench.launch(module, v, shape, {**inputs, "c": c})
        cupy.cuda.runtime.deviceSynchronize()
        ref = bench.reference({k: a.astype(cupy.float64) for k, a in inputs.items()}, shape)["c"]
        got = bench.compare({"c": c})["c"] if bench.compare is not None else c
        rel = float(cupy.linalg.norm(got - ref) / cupy.linalg.norm(ref))
        assert rel <= bench.tolerance, f"{v.stem} at {size}: rel err {rel:.2e}"


def test_source_constants_follow_cpp_integer_arithmetic() -> None:
    source = """
constexpr int BM = 128;
constexpr int BK = 64;  // a comment after the value
constexpr int PAD = 8;
constexpr int STRIDE = BK + PAD;
constexpr int HALF = (STRIDE * 3) / 2;
constexpr int WIDE = sizeof(float) * BM;
constexpr int LATER = WIDE + 1;
"""
    c = gemm.source_constants(source)
    assert c == {"BM": 128, "BK": 64, "PAD": 8, "STRIDE": 72, "HALF": 108}


def test_tensor_core_geometry_follows_the_source_it_launches() -> None:
    for stem, entry in gemm.SOURCE_GEOMETRY.items():
        version = next(v for v in VERSIONS if v.stem == stem)
        assert gemm.geometry_from_source(entry, version.source) == gemm.GEOMETRY[stem]
    other = next(v for v in VERSIONS if v.stem == "10_wmma").source
    other = other.replace("constexpr int BN = 256;", "constexpr int BN = 128;")
    g = gemm.geometry_from_source("gemm_bf16_wmma", other)
    assert g.tile == (128, 128) and g.block == (128,) and g.multiple == (128, 128, 64)
    with pytest.raises(ValueError, match="does not define"):
        gemm.geometry_from_source("x", "constexpr int BM = 128;")
