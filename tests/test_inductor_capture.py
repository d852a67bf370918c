"""kernels/inductor/capture.py: reading Inductor's output code and writing the summary,
checked on a hand-written module in the shape Inductor writes (no GPU, no torch)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from curriculum import artifacts

REPO = Path(__file__).resolve().parents[1]
PATH = REPO / "kernels" / "inductor" / "capture.py"


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("inductor_capture", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["inductor_capture"] = module
    spec.loader.exec_module(module)
    return module


cap = _load()

Q = "'" * 3
# A compiled F.gelu(F.linear(x, w, b)) as Inductor lays it out: a kernel defined by
# async_compile.triton, a wrapper whose call() runs cuBLAS and then the kernel, comments
# that name ATen ops, and the benchmark helpers after call().
OUTPUT_CODE = f"""
from torch._inductor.select_algorithm import extern_kernels
aten = torch.ops.aten
async_compile = AsyncCompile()


# kernel path: /tmp/torchinductor/ab/cab.py
# Topologically Sorted Source Nodes: [linear, gelu], Original ATen: [aten.addmm, aten.gelu]
triton_poi_fused_addmm_gelu_0 = async_compile.triton('triton_poi_fused_addmm_gelu_0', {Q}
import triton
import triton.language as tl

@triton_heuristics.pointwise(
    size_hints={{'x': 16777216}},
    filename=__file__,
)
@triton.jit
def triton_poi_fused_addmm_gelu_0(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr):
    tmp0 = tl.load(in_out_ptr0 + (x2), None).to(tl.float32)
    extern_kernels.mm(this_is_inside_a_string)
{Q}, device_str='cuda')


triton_red_fused_sum_1 = async_compile.triton('triton_red_fused_sum_1', {Q}
@triton_heuristics.reduction(
    size_hints={{'x': 32768, 'r0_': 4096}},
    reduction_hint=ReductionHint.INNER,
)
@triton.jit
def triton_red_fused_sum_1(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK, R0_BLOCK):
    pass
{Q}, device_str='cuda')


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def call(self, args):
        arg0_1, arg1_1, arg2_1 = args
        args.clear()
        with torch.cuda._DeviceGuard(0):
            buf0 = empty_strided_cuda((4096, 4096), (4096, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [linear], Original ATen: [aten.addmm]
            extern_kernels.mm(arg2_1, reinterpret_tensor(arg1_1, (4096, 4096), (1, 4096), 0), out=buf0)
            buf1 = buf0; del buf0  # reuse
            stream0 = get_raw_stream(0)
            triton_poi_fused_addmm_gelu_0.run(buf1, arg0_1, 16777216, stream=stream0)
            buf2 = torch.ops.aten._scaled_dot_product_flash_attention.default(buf1, buf1, buf1)
            triton_red_fused_sum_1.run(buf1, buf0, 32768, 4096, stream=stream0)
        return (buf1, )

runner = Runner(partitions=[])
call = runner.call


def get_args():
    arg0_1 = rand_strided((4096, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    return [arg0_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    fn = lambda: call(list(args))
    extern_kernels.bmm(not_a_launch)
"""


def test_kernel_kind_from_the_name_prefix() -> None:
    assert cap.kernel_kind("triton_poi_fused_addmm_gelu_0") == "pointwise"
    assert cap.kernel_kind("triton_per_fused_native_layer_norm_0") == "persistent reduction"
    assert cap.kernel_kind("triton_red_fused__softmax_0") == "looped reduction"
    assert cap.kernel_kind("triton_tem_fused_addmm_gelu_0") == "GEMM template"
    assert cap.kernel_kind("cpp_fused_add_0") == "other"


def test_kernel_sources_in_definition_order() -> None:
    sources = cap.kernel_sources(OUTPUT_CODE)
    assert list(sources) == ["triton_poi_fused_addmm_gelu_0", "triton_red_fused_sum_1"]
    first = sources["triton_poi_fused_addmm_gelu_0"]
    assert first.startswith("import triton\n")
    assert "def triton_poi_fused_addmm_gelu_0(" in first
    assert Q not in first and "device_str" not in first


def test_launches_in_order_outside_strings_comments_and_helpers() -> None:
    found = [(x.kind, x.name) for x in cap.launches(OUTPUT_CODE)]
    assert found == [
        ("extern", "extern_kernels.mm"),
        ("triton", "triton_poi_fused_addmm_gelu_0"),
        ("aten", "torch.ops.aten._scaled_dot_product_flash_attention.default"),
        ("triton", "triton_red_fused_sum_1"),
    ]
    assert cap.calls_cublas(cap.launches(OUTPUT_CODE))


def test_no_cublas_without_a_matrix_product() -> None:
    only_triton = [
        cap.Launch("triton", "triton_per_fused__softmax_0"),
        cap.Launch("extern", "extern_kernels.convolution"),
    ]
    assert not cap.calls_cublas(only_triton)
    assert cap.calls_cublas([cap.Launch("extern", "extern_kernels.addmm")])


def test_kernel_infos_read_heuristic_and_size_hints() -> None:
    infos = cap.kernel_infos(OUTPUT_CODE)
    assert [(i.name, i.kind, i.heuristic) for i in infos] == [
        ("triton_poi_fused_addmm_gelu_0", "pointwise", "pointwise"),
        ("triton_red_fused_sum_1", "looped reduction", "reduction"),
    ]
    assert infos[1].size_hints == "{'x': 32768, 'r0_': 4096}"


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("triton_per_fused__softmax_0", "Triton"),
        ("nvjet_tst_256x128_64x4_2x1_v_bz_coopA_TNT", "cuBLAS"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", "cuBLAS"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16", "cuDNN"),
        (
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<cutlass::bfloat16_t>>",
            "FlashAttention",
        ),
        ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80", "mem-efficient SDPA"),
        ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>", "ATen"),
        ("Memset (Device)", "copy/memset"),
    ],
)
def test_gpu_kernel_family(name: str, family: str) -> None:
    assert cap.gpu_kernel_family(name) == family


PROV = {
    "gpu": "NVIDIA H200",
    "torch": "2.11.0+cu130",
    "triton": "3.6.0",
    "cuda": "13.0",
    "date": "2026-12-03T10:15:00Z",
    "git_rev": "abc1234",
}


def _record(op: str, eager_ms: float, compiled_ms: float, cublas: bool) -> dict[str, Any]:
    return {
        "op": op,
        "status": "ok",
        "cublas": cublas,
        "eager": {"median_ms": eager_ms},
        "compiled": {"median_ms": compiled_ms},
        "kernels": [{"name": "triton_per_fused__softmax_0", "kind": "persistent reduction"}],
        "gpu_kernels": {"eager": [{}, {}], "compiled": [{}]},
    }


def test_summary_table_lines() -> None:
    table = cap.summary_table(
        [
            _record("softmax_bf16", 0.4172, 0.3108, False),
            {"op": "late_op", "status": "skipped (time budget)"},
        ]
    )
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["op", "eager", "us"]
    row = lines[1].split()
    assert row[:8] == ["softmax_bf16", "417.2", "310.8", "1.34x", "2", "1", "no", "-"]
    assert lines[1].endswith("triton_per_fused__softmax_0 (persistent reduction)")
    assert lines[2].startswith("late_op") and lines[2].endswith("skipped (time budget)")
    assert all(line == line.rstrip() for line in lines)


def test_files_open_with_provenance_an_artifact_block_reads() -> None:
    text = cap.header(["inductor/softmax_bf16: a title", cap.stamp_line(PROV)]) + "body\n"
    head, skip = artifacts._provenance_lines(text)
    assert skip == 2
    assert (
        head[1]
        == "NVIDIA H200, torch 2.11.0+cu130, Triton 3.6.0, CUDA 13.0, 2026-12-03, git abc1234"
    )


def test_write_summary(tmp_path: Path) -> None:
    cap.write_summary(tmp_path, PROV, [_record("layernorm_f32", 0.35, 0.25, False)])
    import json

    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["command"] == cap.COMMAND and data["ops"][0]["op"] == "layernorm_f32"
    assert (tmp_path / "summary.txt").read_text().startswith("// inductor: eager PyTorch")


def test_ops_are_named_uniquely_and_shaped_like_the_suites() -> None:
    names = [op.name for op in cap.OPS]
    assert len(names) == len(set(names))
    for op in cap.OPS:
        assert op.compare.split("/")[0] in {
            "layernorm",
            "rmsnorm",
            "softmax",
            "swiglu",
            "gemm",
            "attention",
        }
        assert (REPO / "kernels" / f"{op.compare}.cu").is_file(), op.compare


def test_refuses_an_unknown_op_and_a_machine_without_torch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cap.main(["--only", "no_such_op"]) == 2
    assert "no op named" in capsys.readouterr().out
    if importlib.util.find_spec("torch") is None:
        assert cap.main(["--only", "layernorm_f32", "--out", "/nonexistent/never"]) == 2
        assert "needs torch" in capsys.readouterr().out


def test_config_lines() -> None:
    configs = {
        "triton_per_fused__softmax_0": [
            {
                "block": {"XBLOCK": 1, "R0_BLOCK": 4096},
                "num_warps": 16,
                "num_stages": 1,
                "registers": 40,
                "spills": 0,
                "shared_bytes": None,
            }
        ]
    }
    assert cap.config_lines(configs) == [
        "config triton_per_fused__softmax_0: XBLOCK=1 R0_BLOCK=4096, 16 warps, 1 stages, "
        "40 registers, 0 spills"
    ]
    assert cap.config_lines({}) == []


def test_short_call_and_bias_addmm_is_cublas() -> None:
    assert cap.short_call("extern_kernels.bias_addmm") == "bias_addmm"
    assert (
        cap.short_call("torch.ops.aten._scaled_dot_product_cudnn_attention.default")
        == "aten._scaled_dot_product_cudnn_attention"
    )
    assert cap.calls_cublas([cap.Launch("extern", "extern_kernels.bias_addmm")])


def test_reparse_rewrites_what_the_code_gives_and_keeps_the_timings(tmp_path: Path) -> None:
    rec = _record("linear_gelu_bf16", 0.1993, 0.2010, False)
    rec["kernels"], rec["launches"] = [], []
    cap.write_summary(tmp_path, PROV, [rec, {"op": "late", "status": "skipped (time budget)"}])
    (tmp_path / "linear_gelu_bf16").mkdir()
    text = cap.header(["inductor/linear_gelu_bf16: title", "provenance"]) + OUTPUT_CODE
    (tmp_path / "linear_gelu_bf16" / "output_code.txt").write_text(text)
    assert cap.strip_header(text) == OUTPUT_CODE
    assert cap.main(["--reparse", "--out", str(tmp_path)]) == 0
    import json

    data = json.loads((tmp_path / "summary.json").read_text())
    got = data["ops"][0]
    assert got["cublas"] is True and got["eager"] == {"median_ms": 0.1993}
    assert [k["name"] for k in got["kernels"]][0] == "triton_poi_fused_addmm_gelu_0"
    assert data["ops"][1]["status"] == "skipped (time budget)"
    assert data["provenance"] == PROV


def test_ptx_counts_the_families_a_page_reads() -> None:
    ptx = "\n".join(
        [
            ".visible .entry k(",
            "\tld.global.v4.b32 \t{%r1, %r2, %r3, %r4}, [%rd1];",
            "\t@%p1 ld.global.v4.b32 \t{%r5, %r6, %r7, %r8}, [%rd2];",
            "\tex2.approx.ftz.f32 \t%f2, %f1;",
            "\tdiv.rn.f32 \t%f3, %f2, %f4;",
            "\tadd.f32 \t%f5, %f3, %f3;",
            "\tbar.sync \t0;",
            "$L__BB0_1:",
            "\t// ld.global in a comment",
        ]
    )
    assert cap.ptx_counts(ptx) == {
        "ld.global.v4.b32": 2,
        "bar.sync": 1,
        "div.rn.f32": 1,
        "ex2.approx.ftz.f32": 1,
    }
