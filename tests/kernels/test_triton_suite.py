"""The Triton topic without a GPU: it loads, each benchmark is the CUDA suite's own (same
inputs, reference, tolerance, work model, library candidates), every version is a Triton
kernel with a `launch`, the ragged check shapes are ragged, and the fingerprint covers the
suites it reuses. Where Triton and PyTorch are installed, the kernels also run in Triton's
interpreter on the CPU against a float64 reference at small and ragged shapes."""

from __future__ import annotations

import ast
import importlib.util
import math
import os
import re
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from curriculum.bench.staleness import fingerprint, used_topics
from curriculum.bench.suites import LoadedSuite, load_suite, plan_cases

REPO = Path(__file__).resolve().parents[2]
TRITON = REPO / "kernels" / "triton"
# stem -> (benchmark name, the topic it comes from, the CUDA version it is measured against)
EXPECTED = {
    "01_softmax": ("softmax", "softmax", "03_block_row"),
    "02_layernorm": ("layernorm", "layernorm", "06_stable_variance"),
    "03_gemm_bf16": ("bf16", "gemm", "12_wgmma_tma"),
    "04_gemm_bf16_out": ("bf16_out", "gemm", "13_wgmma_persistent"),
    "06_gemm_bf16_out_tma": ("bf16_out", "gemm", "13_wgmma_persistent"),
    "07_tma_flash_attention": ("prefill", "attention", "02_flash_fwd"),
    "05_flash_attention": ("prefill", "attention", "02_flash_fwd"),
}
# Fields a Triton benchmark must share with the CUDA one, object for object.
SHARED = (
    "inputs", "outputs", "reference", "flops", "bytes", "work_convention", "tolerance",
    "tolerance_reason", "headline", "roofline", "baselines", "baseline", "compare", "flush_l2",
)  # fmt: skip


@pytest.fixture(scope="module")
def loaded() -> LoadedSuite:
    return load_suite(TRITON)


def cuda_benchmark(topic: str, name: str):
    """The benchmark of the topic's suite module that the Triton suite imported."""
    module = sys.modules["curriculum_suite_triton"]
    used = getattr(module, topic.upper())
    assert Path(used.__file__) == REPO / "kernels" / topic / "suite.py"
    return next(b for b in used.SUITE.benchmarks if b.name == name)


def test_every_version_is_a_python_file_claimed_once(loaded: LoadedSuite) -> None:
    assert {v.stem: loaded.claims[v.stem].name for v in loaded.versions} == {
        stem: bench for stem, (bench, _, _) in EXPECTED.items()
    }
    assert {v.language for v in loaded.versions} == {"python"}
    assert not list(TRITON.glob("*.cu"))


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_benchmark_is_the_cuda_one(loaded: LoadedSuite, stem: str) -> None:
    name, topic, cuda_stem = EXPECTED[stem]
    ours, theirs = loaded.claims[stem], cuda_benchmark(topic, name)
    for field in SHARED:
        assert getattr(ours, field) == getattr(theirs, field), field
    assert [dict(s) for s in ours.shapes] == [dict(theirs.headline)]
    # the CUDA version compared against exists and is claimed by the same benchmark name
    cuda = load_suite(REPO / "kernels" / topic)
    assert cuda.claims[cuda_stem].name == name


def test_headline_shapes_are_the_cuda_headlines(loaded: LoadedSuite) -> None:
    shapes = {c.version.stem: c.shape for c in plan_cases([loaded])}
    assert shapes == {
        "01_softmax": {"rows": 32768, "cols": 4096},
        "02_layernorm": {"rows": 32768, "cols": 4096},
        "03_gemm_bf16": {"m": 4096, "n": 4096, "k": 4096},
        "04_gemm_bf16_out": {"m": 4096, "n": 4096, "k": 4096},
        "05_flash_attention": {"b": 8, "h": 16, "s": 4096, "d": 128},
        "06_gemm_bf16_out_tma": {"m": 4096, "n": 4096, "k": 4096},
        "07_tma_flash_attention": {"b": 8, "h": 16, "s": 4096, "d": 128},
    }


def test_check_shapes_are_ragged(loaded: LoadedSuite) -> None:
    """No size of a check shape is a multiple of a tile or a power of two: the masks run."""
    for bench in loaded.suite.benchmarks:
        (shape,) = bench.check_shapes
        sizes = [v for k, v in shape.items() if k not in ("b", "h", "d")]
        assert all(v % 64 and v & (v - 1) for v in sizes), (bench.name, shape)


def test_fingerprint_covers_the_reused_suites(loaded: LoadedSuite) -> None:
    assert used_topics((TRITON / "suite.py").read_bytes()) == [
        "softmax", "layernorm", "gemm", "attention",
    ]  # fmt: skip
    for case in plan_cases([loaded]):
        assert case.fingerprint == fingerprint(REPO, "triton", case.version.stem)


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_version_is_a_triton_kernel_and_a_launch(loaded: LoadedSuite, stem: str) -> None:
    version = next(v for v in loaded.versions if v.stem == stem)
    assert re.match(rf"{stem[:2]} \S", version.title), version.title
    functions = _functions(ast.parse(version.source))
    kernels = [
        f for f in functions.values()
        if any(ast.unparse(d) == "triton.jit" for d in f.decorator_list)
    ]  # fmt: skip
    assert len(kernels) == 1
    launch = functions["launch"]
    assert [a.arg for a in launch.args.args][:2] == ["shape", "t"]


def test_suite_imports_no_gpu_library() -> None:
    tree = ast.parse((TRITON / "suite.py").read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {a.name.split(".")[0] for n in top for a in n.names} | {
        (n.module or "").split(".")[0] for n in top if isinstance(n, ast.ImportFrom)
    }
    assert not names & {"cupy", "torch", "triton", "numpy"}


# --- the kernels in Triton's interpreter, where Triton and PyTorch are installed --------------


def _interpreter() -> tuple[ModuleType, ModuleType]:
    """torch and triton with TRITON_INTERPRET=1, two interpreter gaps (Triton 3.6) patched:
    tl.dot on bf16 multiplies the bit patterns as integers, and fp32 -> bf16 truncates where
    the GPU rounds to nearest even."""
    os.environ["TRITON_INTERPRET"] = "1"
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    if not getattr(builder, "_curriculum_patched", False):
        dot, cast = builder.create_dot, builder.cast_impl

        def wide(h):
            if h.dtype.scalar == tl.bfloat16:
                bits = h.data.astype(np.uint32) << 16
                return interpreter.TensorHandle(bits.view(np.float32), tl.float32)
            return h

        def create_dot(self, a, b, d, *rest):
            return dot(self, wide(a), wide(b), d, *rest)

        def cast_impl(self, src, dst_type):
            if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
                u = src.data.astype(np.float32).view(np.uint32)
                bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
                return interpreter.TensorHandle(bits, tl.bfloat16)
            return cast(self, src, dst_type)

        builder.create_dot, builder.cast_impl = create_dot, cast_impl
        builder._curriculum_patched = True
    return torch, triton


def _version(stem: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"triton_interp_{stem}", TRITON / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rel(torch, got, want) -> float:
    got, want = got.double(), want.double()
    assert torch.isfinite(got).all()
    return float((got - want).norm() / want.norm())


@pytest.mark.parametrize(("rows", "cols"), [(6, 4096), (5, 3000)])
def test_softmax_and_layernorm_in_the_interpreter(rows: int, cols: int) -> None:
    torch, _ = _interpreter()
    gen = torch.Generator().manual_seed(rows)
    x = 2 * torch.randn(rows, cols, generator=gen)
    y = torch.full_like(x, float("nan"))
    _version("01_softmax").launch({}, {"x": x, "y": y})
    assert _rel(torch, y, torch.softmax(x.double(), -1)) < 1e-6
    gamma = 1 + 0.25 * torch.randn(cols, generator=gen)
    beta = 0.5 * torch.randn(cols, generator=gen)
    y = torch.full_like(x, float("nan"))
    t = {"x": x, "gamma": gamma, "beta": beta, "y": y}
    _version("02_layernorm").launch({}, t, eps=1e-5)
    want = torch.nn.functional.layer_norm(x.double(), (cols,), gamma.double(), beta.double())
    assert _rel(torch, y, want) < 1e-6


@pytest.mark.parametrize(("m", "n", "k"), [(256, 512, 128), (200, 300, 100)])
def test_gemm_in_the_interpreter(m: int, n: int, k: int) -> None:
    torch, _ = _interpreter()
    gen = torch.Generator().manual_seed(m)
    a = torch.randn(m, k, generator=gen).bfloat16()
    b = torch.randn(k, n, generator=gen).bfloat16()
    c = torch.full((m, n), float("nan"))
    _version("03_gemm_bf16").launch({}, {"a": a, "b": b, "c": c})
    assert _rel(torch, c, a.double() @ b.double()) < 1e-5
    c16 = torch.full((m, n), float("nan")).bfloat16()
    _version("04_gemm_bf16_out").launch({}, {"a": a, "b": b, "c": c16})
    assert _rel(torch, c16, a.double() @ b.double()) < 3e-3  # bf16 rounding of C: about 1.1e-3


@pytest.mark.parametrize(("m", "n", "k"), [(256, 512, 128), (200, 264, 72)])
def test_tma_gemm_in_the_interpreter(
    m: int, n: int, k: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tiles past every edge: the descriptors zero-fill the loads and clip the store."""
    torch, _ = _interpreter()
    sms = type("Properties", (), {"multi_processor_count": 4})()
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: sms)
    gen = torch.Generator().manual_seed(m)
    a = torch.randn(m, k, generator=gen).bfloat16()
    b = torch.randn(k, n, generator=gen).bfloat16()
    c = torch.full((m, n), float("nan")).bfloat16()
    _version("06_gemm_bf16_out_tma").launch({}, {"a": a, "b": b, "c": c})
    assert _rel(torch, c, a.double() @ b.double()) < 3e-3


def test_gemm_check_shape_suits_tma(loaded: LoadedSuite) -> None:
    """TMA needs rows of 16 bytes: the ragged GEMM shape keeps K and N multiples of 8 bf16."""
    for name in ("bf16", "bf16_out"):
        bench = next(b for b in loaded.suite.benchmarks if b.name == name)
        (shape,) = bench.check_shapes
        assert shape["k"] % 8 == 0 and shape["n"] % 8 == 0
        assert shape["k"] % 16 and shape["n"] % 16  # no 16-element specialisation for 03, 04


@pytest.mark.parametrize("stem", ["05_flash_attention", "07_tma_flash_attention"])
@pytest.mark.parametrize("s", [256, 200])
def test_flash_attention_in_the_interpreter(stem: str, s: int) -> None:
    """Two heads, so a tile past S in the first head would read the second's rows."""
    torch, _ = _interpreter()
    gen = torch.Generator().manual_seed(s)
    q, k, v = (torch.randn(1, 2, s, 128, generator=gen).bfloat16() for _ in range(3))
    o = torch.full((1, 2, s, 128), float("nan")).bfloat16()
    _version(stem).launch({}, {"q": q, "k": k, "v": v, "o": o})
    scores = q.double() @ k.double().transpose(-1, -2) / math.sqrt(128)
    want = torch.softmax(scores, -1) @ v.double()
    assert _rel(torch, o, want) < 5e-3  # bf16 P and O: about 2e-3


# --- the capsule's quotes of the compiled kernels ----------------------------------------------

CAPSULE = (
    REPO / "content" / "courses" / "kernel-engineering" / "capsules" / "triton-block-kernels.md"
)
ARTIFACT_BLOCK = re.compile(r"```artifact\npath: (\S+)\nlines: (\d+)-(\d+)\n", re.M)


def test_capsule_quotes_whole_sections_of_the_compiled_report() -> None:
    """Each `lines:` range starts at a kernel's section and ends inside that kernel's sections, so
    a regenerated report with other line numbers fails here rather than quoting the wrong kernel."""
    if not CAPSULE.is_file():
        pytest.skip("capsule not present")
    blocks = ARTIFACT_BLOCK.findall(CAPSULE.read_text(encoding="utf-8"))
    assert len(blocks) >= 3
    for path, first, last in blocks:
        lines = (REPO / path).read_text(encoding="utf-8").splitlines()
        assert lines[0].startswith("// triton/compiled:") and lines[1].startswith("// triton ")
        chosen = lines[int(first) - 1 : int(last)]
        assert chosen[0].startswith("=== kernel "), (path, first)
        kernels = {ln.split()[2] for ln in chosen if ln.startswith("=== kernel ")}
        assert len(kernels) == 1, (path, first, last, kernels)
        assert chosen[-1].startswith("ptx: "), (path, last)
