"""The capstone decoder's CPU half: shapes, launch plans, work counts, data and figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curriculum import decoder as D


def test_default_shapes_fit_every_kernel():
    assert D.problems(D.Config()) == []


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"mlp": 5632}, "swiglu/02_fused"),  # 1 x 5632 is not a multiple of 4096
        ({"prompt": 2000}, "gemm/12_wgmma_tma"),
        ({"q_heads": 32}, "attention/04_split_kv"),
        ({"context": 2050}, "attention/04_split_kv"),
        ({"batches": (1, 2)}, "gemv/01_bf16"),
        ({"hidden": 3072}, "rmsnorm/02_persistent_bf16"),
        ({"head_dim": 64}, "head_dim 64"),
        ({"vocab": 32016}, "lm_head"),
    ],
)
def test_problems_name_the_kernel_whose_rule_breaks(change, words):
    found = D.problems(D.Config(**change))
    assert found and any(words in p for p in found), found


def test_weight_bytes_by_hand():
    cfg = D.Config()
    h, m = 2048, 8192
    per_layer = h * (16 + 8) * 128 + 16 * 128 * h + 3 * h * m + 2 * h
    assert cfg.layer_params() == per_layer
    assert cfg.weight_bytes() == 2 * (8 * per_layer + h + h * 32768)
    # 8 layers x 2 x (K and V) x 4 heads x 2048 slots x 128 dims x 2 bytes
    assert cfg.kv_bytes(1) == 8 * 2 * 4 * 2048 * 128 * 2 == 33_554_432
    assert cfg.decode_bytes(16) == cfg.weight_bytes() + 16 * cfg.kv_bytes(1)


def test_flops_by_hand():
    cfg = D.Config()
    matmul = 8 * (cfg.layer_params() - 2 * 2048)
    assert cfg.decode_flops(1) == 2 * (matmul + 2048 * 32768) + 4 * 16 * 2048 * 128 * 8
    s = 2048
    want = 2 * s * matmul + 2 * 2048 * 32768 + 4 * s * s * 16 * 128 * 8
    assert cfg.prefill_flops() == want


def test_launch_plans_count_and_follow_the_rules():
    cfg = D.Config()
    pre, dec = D.prefill_ops(cfg), D.decode_ops(cfg, 4)
    assert len(pre) == 1 + 14 * 8 + 3
    assert len(dec) == 1 + 12 * 8 + 3
    assert len({op.name for op in pre}) == len(pre)
    for op in pre:
        if op.kind == "gemm":
            assert op.dims["m"] % 128 == 0 and op.dims["n"] % 256 == 0 and op.dims["k"] % 64 == 0
    for op in dec:
        if op.kind == "gemv":
            assert op.dims["batch"] == 4 and op.dims["k"] % 64 == 0 and op.dims["n"] % 32 == 0
        if op.kind == "swiglu":
            assert op.dims["tokens"] * op.dims["d"] % 4096 == 0
    kinds = {op.kind for op in dec}
    assert kinds == {"glue", "rmsnorm", "gemv", "split_kv", "swiglu"}
    assert {op.kind for op in pre} == {"glue", "rmsnorm", "gemm", "flash", "swiglu", "gemv"}


def test_kind_of_profiler_names():
    assert D.kind_of("gemm_bf16_wgmma_tma") == "gemm"
    assert D.kind_of("bf16_b16") == "gemv"
    assert D.kind_of("void flash_fwd(unsigned short const*, int)") == "flash"
    assert D.kind_of("persistent_bf16_vpt2") == "rmsnorm"
    assert D.kind_of("rope_decode") == "glue"
    assert D.kind_of("at::native::vectorized_elementwise_kernel<4>") == "other"


def test_breakdown_sums_and_shares():
    bd = D.breakdown([("bf16_b1", 6.0), ("bf16_b1", 2.0), ("split_kv", 1.5), ("add_bf16", 0.5)])
    assert bd["kernels"] == 4 and bd["kernel_us"] == 10.0
    assert bd["kinds"]["gemv"] == {"count": 2, "us": 8.0, "pct": 80.0}
    assert bd["kinds"]["glue"]["pct"] == 5.0
    assert bd["entries"]["split_kv"]["count"] == 1


def _stat(us: float) -> dict[str, float]:
    return {"median_us": us, "p20_us": us * 0.99, "p80_us": us * 1.01, "samples": 50}


def sample_data() -> dict:
    cfg = D.Config()
    decode = {
        str(b): {
            "ours_eager": _stat(900.0 + b),
            "ours_graph": _stat(300.0 + b),
            "torch_eager": _stat(1500.0),
            "torch_graph": _stat(320.0),
            "torch_compile": {**_stat(310.0), "mode": "reduce-overhead", "compile_s": 41.0},
        }
        for b in cfg.batches
    }
    return {
        "format": D.FORMAT,
        "provenance": {
            "gpu_name": "NVIDIA H200",
            "driver": "1",
            "torch": "2",
            "cupy": "14",
            "date": "2026-12-03T10:20:00Z",
            "git_rev": "abc",
        },
        "config": D.config_dict(cfg),
        "work": D.work_model(cfg),
        "copy_gbps": 4000.0,
        "checks": {
            "prefill": {"passed": True, "rel_err": 0.004, "what": "prefill"},
            "decode_b1": {"passed": True, "rel_err": 0.003, "agree_pct": 100.0, "steps": 4},
        },
        "timing": {
            "prefill": {
                "ours_eager": _stat(5000.0),
                "ours_graph": _stat(4800.0),
                "torch_eager": _stat(6000.0),
                "torch_compile": {**_stat(5200.0), "compile_s": 30.0},
            },
            "decode": decode,
        },
        "breakdown": {
            "decode_b1": D.breakdown([("bf16_b1", 250.0), ("split_kv", 20.0), ("add_bf16", 5.0)])
        },
    }


def write(tmp_path: Path, data: dict) -> Path:
    folder = tmp_path / "kernels" / "decoder"
    folder.mkdir(parents=True)
    (folder / D.DATA_FILE).write_text(json.dumps(data), encoding="utf-8")
    return tmp_path


def test_validate_accepts_sample_and_names_problems():
    assert D.validate(sample_data()) == []
    bad = sample_data()
    bad["timing"]["decode"]["1"]["ours_graph"]["p20_us"] = 1e9
    del bad["breakdown"]
    found = D.validate(bad)
    assert "missing 'breakdown'" in found
    bad = sample_data()
    bad["timing"]["decode"]["1"]["ours_graph"]["p20_us"] = 1e9
    assert any("percentiles out of order" in p for p in D.validate(bad))
    assert D.validate([]) == ["not a JSON object"]


def test_figures(tmp_path):
    root = write(tmp_path, sample_data())
    text, value, prov = D.figure(root, "decoder/decode_ours_graph", "tokens_per_s", "batch=1")
    assert value == pytest.approx(1 / 301e-6) and text.endswith("tokens/s")
    assert "CUDA graph" in prov and "50 samples" in prov
    _, value, _ = D.figure(root, "decoder/decode_ours_graph", "speedup", "batch=4")
    assert value == pytest.approx(904 / 304)
    _, value, _ = D.figure(root, "decoder/prefill_ours_graph", "tokens_per_s", None)
    assert value == pytest.approx(2048 / 4800e-6)
    _, floor, _ = D.figure(root, "decoder/floor", "us", "batch=1")
    assert floor == pytest.approx(D.Config().decode_bytes(1) / 4000e9 * 1e6)
    _, pct, _ = D.figure(root, "decoder/decode_ours_graph", "pct_floor", "batch=1")
    assert pct == pytest.approx(100 * floor / 301)
    _, err, _ = D.figure(root, "decoder/check_decode", "rel_err", "batch=1")
    assert err == 0.003
    _, share, _ = D.figure(root, "decoder/breakdown_decode", "gemv_pct", "batch=1")
    assert share == pytest.approx(100 * 250 / 275, abs=0.01)
    text, _, _ = D.figure(root, "decoder/decode_torch_compile", "compile_s", "batch=1")
    assert text == "41 s"


@pytest.mark.parametrize(
    ("case", "field", "shape", "words"),
    [
        ("decoder/decode_ours_graph", "tokens_per_s", None, "needs its batch"),
        ("decoder/decode_ours_graph", "bogus", "batch=1", "takes:"),
        ("decoder/decode_ours_graph", "us", "batch=2", "no ours_graph timing"),
        ("decoder/nonsense", "us", None, "keys:"),
        ("decoder/check_prefill", "rel_err", "batch=9", "no check"),
        ("decoder/prefill_torch_graph", "us", None, "no torch_graph timing of prefill"),
    ],
)
def test_figure_errors_say_what_is_wrong(tmp_path, case, field, shape, words):
    root = write(tmp_path, sample_data())
    with pytest.raises(ValueError, match=words):
        D.figure(root, case, field, shape)


def test_missing_data_says_how_to_make_it(tmp_path):
    with pytest.raises(ValueError, match="python -m curriculum.decoder"):
        D.load(tmp_path)


def test_without_a_gpu_one_line_and_exit_2(capsys, monkeypatch):
    from curriculum.decoder import __main__ as command

    monkeypatch.setattr(command, "gpu_missing", lambda need_torch=True: "cupy is not installed")
    assert command.main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cupy is not installed" in err


# --- charts and the figures as pages resolve them ----------------------------------------------


def test_breakdown_and_throughput_charts_draw_deterministic_svg(tmp_path):
    from curriculum.charts import ChartSpec, chart_inputs_hash, render_chart

    root = write(tmp_path, sample_data())
    bd = ChartSpec(kind="breakdown", topic="decoder", segment="decode_b1", alt="where time goes")
    svg = render_chart(bd, None, root)  # type: ignore[arg-type]
    assert svg.startswith("<?xml") and svg == render_chart(bd, None, root)  # type: ignore[arg-type]
    assert "GEMV (gemv/01 bf16)" in svg and "91%" in svg
    tp = ChartSpec(kind="throughput", topic="decoder", alt="tokens a second")
    svg = render_chart(tp, None, root)  # type: ignore[arg-type]
    assert "torch.compile" in svg and "decode, batch 16" in svg
    before = chart_inputs_hash(tp, None, root)  # type: ignore[arg-type]
    data = sample_data()
    data["timing"]["decode"]["1"]["ours_graph"] = _stat(200.0)
    (root / "kernels" / "decoder" / D.DATA_FILE).write_text(json.dumps(data), encoding="utf-8")
    assert chart_inputs_hash(tp, None, root) != before  # type: ignore[arg-type]


def test_breakdown_chart_needs_a_step_it_has(tmp_path):
    from pydantic import ValidationError

    from curriculum.charts import ChartSpec, render_chart

    with pytest.raises(ValidationError, match="needs segment"):
        ChartSpec(kind="breakdown", topic="decoder", alt="b")
    with pytest.raises(ValidationError, match="timeline only"):
        ChartSpec(kind="throughput", topic="decoder", segment="prefill", alt="t")
    root = write(tmp_path, sample_data())
    with pytest.raises(ValueError, match="no breakdown 'prefill'.*decode_b1"):
        render_chart(
            ChartSpec(kind="breakdown", topic="decoder", segment="prefill", alt="b"), None, root
        )  # type: ignore[arg-type]


def test_throughput_rows():
    rows = dict(D.throughput_rows(sample_data()))
    assert rows["prefill, 2048 tokens"]["ours_graph"] == pytest.approx(2048 / 4800e-6)
    assert rows["decode, batch 16"]["torch_eager"] == pytest.approx(16 / 1500e-6)
    assert "torch_graph" not in rows["prefill, 2048 tokens"]


def test_check_resolves_decoder_figures(tmp_path):
    from curriculum.errors import Diagnostics, Loc
    from curriculum.measure import Measurements, _check_figure

    root = write(tmp_path, sample_data())
    m = Measurements(root=root, primary="nvidia-h200")
    diags = Diagnostics()
    for case, field, shape in (
        ("decoder/decode_ours_graph", "tokens_per_s", "batch=1"),
        ("decoder/decode_ours_graph", "tokens_per_sec", "batch=1"),
        ("decoder/decode_ours_graph", "us", "batch=2"),
    ):
        ref = {"case": case, "field": field, "shape": shape, "gpu": None}
        _check_figure(m, ref, Loc("c.md", 1, 1), "capsule 'c'", set(), diags)
    codes = [(d.severity, d.code) for d in diags.sorted()]
    assert codes.count(("error", "figure.unknown-field")) == 1
    assert ("warning", "figure.missing") in codes and len(codes) == 2
    fig = m.figure({"case": "decoder/decode_ours_graph", "field": "us", "shape": "batch=1"})
    assert fig.text == "301 µs" and not fig.missing


def test_op_work_adds_up_to_the_step():
    cfg = D.Config()
    ops = D.decode_ops(cfg, 1)
    total = sum(D.op_work(cfg, op)[1] for op in ops)
    # the weights and the KV cache, plus a few hundred kilobytes of activations
    assert cfg.decode_bytes(1) < total < cfg.decode_bytes(1) + 2e6
    flops = sum(D.op_work(cfg, op)[0] for op in D.prefill_ops(cfg))
    assert flops == pytest.approx(cfg.prefill_flops(), rel=1e-3)
    qkv = next(op for op in D.prefill_ops(cfg) if op.name == "L0.qkv")
    assert D.op_work(cfg, qkv) == (
        2 * 2048 * 3072 * 2048,
        2 * 2048 * 2048 + 2 * 2048 * 3072 + 4 * 2048 * 3072,
    )


def test_op_breakdown_groups_and_rates():
    cfg = D.Config(layers=1)
    ops = D.decode_ops(cfg, 1)
    rows = D.op_breakdown(cfg, ops, [10.0] * len(ops))
    assert rows["gate_up"]["count"] == 2 and rows["gate_up"]["us"] == 20.0
    assert rows["norms"]["count"] == 3 and rows["adds"]["count"] == 2
    # gate and up: 2 x 8192 x 2048 bf16 weights in 20 µs
    want = (2 * (2 * 8192 * 2048 + 2 * 2048 + 2 * 8192)) / 20e-6 / 1e9
    assert rows["gate_up"]["gbps"] == pytest.approx(want, abs=0.1)
    assert sum(r["pct"] for r in rows.values()) == pytest.approx(100, abs=0.1)
    with pytest.raises(ValueError, match="kernels for"):
        D.op_breakdown(cfg, ops, [1.0])


def test_breakdown_chart_and_figures_by_op_group(tmp_path):
    from curriculum.charts import ChartSpec, render_chart

    data = sample_data()
    cfg = D.Config()
    ops = D.decode_ops(cfg, 1)
    data["breakdown"]["decode_b1"]["ops"] = D.op_breakdown(cfg, ops, [3.0] * len(ops))
    root = write(tmp_path, data)
    svg = render_chart(
        ChartSpec(kind="breakdown", topic="decoder", segment="decode_b1", alt="b"), None, root
    )  # type: ignore[arg-type]
    assert "gate and up projections" in svg and "GB/s" in svg
    _, value, _ = D.figure(root, "decoder/breakdown_decode", "gate_up_gbps", "batch=1")
    assert value == data["breakdown"]["decode_b1"]["ops"]["gate_up"]["gbps"]
    _, value, _ = D.figure(root, "decoder/breakdown_decode", "gemv_pct", "batch=1")
    assert value == pytest.approx(100 * 250 / 275, abs=0.01)
    with pytest.raises(ValueError, match="no op group 'gate_up'"):
        D.figure(
            write(tmp_path / "x", sample_data()),
            "decoder/breakdown_decode",
            "gate_up_gbps",
            "batch=1",
        )
