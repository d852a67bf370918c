"""The collectives runner's arithmetic and document, without torch or a GPU."""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "kernels" / "collectives"


def _load(name: str) -> Any:
    full = f"kernels_collectives_{name}"  # the name run.py and chart.py load model.py under
    if full not in sys.modules:
        spec = importlib.util.spec_from_file_location(full, HERE / f"{name}.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[full] = mod
        spec.loader.exec_module(mod)
    return sys.modules[full]


m = _load("model")


def test_size_ladder_is_every_power_of_two_from_1kib_to_1gib() -> None:
    sizes = m.size_ladder()
    assert sizes[0] == 1024 and sizes[-1] == 1024**3
    assert len(sizes) == 21
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:], strict=False))
    assert m.size_ladder(4096, 4096) == [4096]


@pytest.mark.parametrize("lo,hi", [(1000, 4096), (1024, 3000), (8192, 1024), (0, 1024)])
def test_size_ladder_refuses_bad_bounds(lo: int, hi: int) -> None:
    with pytest.raises(ValueError):
        m.size_ladder(lo, hi)


@pytest.mark.parametrize(
    "op,n,factor",
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 4, 1.5),
        ("all_reduce", 8, 1.75),
        ("all_gather", 2, 0.5),
        ("all_gather", 8, 0.875),
        ("reduce_scatter", 4, 0.75),
        ("all_reduce", 1, 0.0),
        ("reduce_scatter", 1, 0.0),
    ],
)
def test_bus_factor(op: str, n: int, factor: float) -> None:
    assert m.bus_factor(op, n) == pytest.approx(factor)


def test_bus_bandwidth_of_an_8_gpu_all_reduce() -> None:
    # 256 MiB in 1.5 ms: algbw 178.96 GB/s, busbw x 2*7/8 = 313.18 GB/s.
    nbytes, s = 256 * 1024**2, 1.5e-3
    assert m.algbw_gbps(nbytes, s) == pytest.approx(268435456 / 1.5e-3 / 1e9)
    assert m.busbw_gbps("all_reduce", 8, nbytes, s) == pytest.approx(178.956970 * 1.75, rel=1e-6)


def test_unknown_op_and_bad_time_are_refused() -> None:
    with pytest.raises(ValueError):
        m.bus_factor("broadcast", 2)
    with pytest.raises(ValueError):
        m.algbw_gbps(1024, 0.0)


def test_buffers_hold_whole_elements_per_rank() -> None:
    assert m.buffer_elems("all_reduce", 1024, 8) == (512, 512)
    assert m.buffer_elems("all_gather", 1024, 8) == (64, 512)
    assert m.buffer_elems("reduce_scatter", 1024, 8) == (512, 64)
    # 1 KiB over 3 ranks of 2-byte elements: 170 each, 1020 bytes moved.
    assert m.buffer_elems("all_gather", 1024, 3) == (170, 510)
    assert m.message_bytes("all_gather", 1024, 3) == 1020
    assert m.message_bytes("all_reduce", 1024**3, 8) == 1024**3
    with pytest.raises(ValueError):
        m.buffer_elems("all_reduce", 8, 8)


def test_calls_per_sample_halve_with_size() -> None:
    assert [m.calls_per_sample(s) for s in (1024, 2048, 64 * 1024, 128 * 1024, 1024**3)] == [
        64,
        64,
        2,
        1,
        1,
    ]


def test_alpha_beta_ring() -> None:
    # 8 GPUs, alpha 5 us, 256 MiB over 450 GB/s links: 14 x 5 + 1.75 x 268435456 / 450e3 us.
    want = 14 * 5 + 1.75 * 268435456 / 450e3
    assert m.ring_allreduce_us(268435456, 8, 5.0, 450.0) == pytest.approx(want)
    assert m.ring_allreduce_us(268435456, 1, 5.0, 450.0) == 0.0


def test_tp_shards_of_the_70b_like_layer() -> None:
    cfg = m.LayerConfig()
    full = cfg.weight_shapes()
    assert full["wq"] == (8192, 8192) and full["wk"] == (8192, 1024)
    assert cfg.weight_bytes() == 2 * (8192 * 8192 * 2 + 2 * 8192 * 1024 + 3 * 8192 * 28672)
    s = m.tp_shapes(cfg, 8)
    assert s["wq"] == (8192, 1024) and s["wk"] == (8192, 128) and s["wv"] == (8192, 128)
    assert s["wo"] == (1024, 8192)
    assert s["w_gate"] == (8192, 3584) and s["w_up"] == (8192, 3584)
    assert s["w_down"] == (3584, 8192)
    assert m.tp_heads(cfg, 8) == (8, 1)
    assert m.tp_heads(cfg, 2) == (32, 4)
    # The shards add up to the layer, for every split.
    for n in (1, 2, 4, 8):
        assert m.tp_weight_bytes_per_rank(cfg, n) * n == cfg.weight_bytes()
    assert m.tp_allreduce_bytes(cfg, 16) == 16 * 8192 * 2


def test_tp_refuses_a_split_that_cuts_a_head() -> None:
    cfg = m.LayerConfig()
    assert m.tp_check(cfg, 3) is not None
    assert m.tp_check(cfg, 16) is not None  # 8 KV heads do not split 16 ways
    with pytest.raises(ValueError):
        m.tp_shapes(cfg, 3)


def test_kind_slug() -> None:
    assert m.kind_slug("NVIDIA H200", 8) == "nvidia-h200-x8"
    assert m.kind_slug("NVIDIA H100 80GB HBM3", 1) == "nvidia-h100-80gb-hbm3-x1"


def _row(op: str, n: int, nbytes: int, median_us: float, mode: str = "graph") -> dict[str, Any]:
    s = median_us * 1e-6
    return {
        "op": op,
        "world": n,
        "bytes": nbytes,
        "mode": mode,
        "calls_per_sample": 1,
        "time": {
            "median_us": median_us,
            "p20_us": median_us * 0.99,
            "p80_us": median_us * 1.01,
            "samples": 20,
        },
        "algbw_gbps": m.algbw_gbps(nbytes, s),
        "busbw_gbps": m.busbw_gbps(op, n, nbytes, s),
    }


def _doc(n: int = 8) -> dict[str, Any]:
    t = {"median_us": 100.0, "p20_us": 99.0, "p80_us": 101.0, "samples": 20}
    split = {"median_us": 25.0, "p20_us": 24.0, "p80_us": 26.0, "samples": 20}
    return {
        "format": 1,
        "kind": f"nvidia-h200-x{n}",
        "provenance": {
            "gpu_name": "NVIDIA H200",
            "gpu_count": n,
            "world": n,
            "driver": "580",
            "torch": "2.11.0",
            "cuda": "13.0",
            "nccl": "2.27.3",
            "date": "2026-12-03T10:00:00Z",
            "git_rev": "abc",
            "git_dirty": False,
            "env": {"NCCL_NVLS_ENABLE": "0"},
            "topology": "GPU0 X",
            "seconds": 12.0,
        },
        "timing": "CUDA events",
        "dtype": "bfloat16",
        "collectives": [
            _row(op, n, s, 10.0 + s / 1e5 + extra, mode)
            for op in m.OPS
            for s in (1024, 1 << 28)
            for mode, extra in (("graph", 0.0), ("eager", 20.0))
        ],
        "layer": {
            "config": {"hidden": 8192},
            "rows": [
                {
                    "batch": 1,
                    "world": n,
                    "mode": "graph",
                    "one_gpu": t,
                    "split": split,
                    "speedup": 4.0,
                    "rel_err": 3e-3,
                    "tolerance": 2e-2,
                }
            ],
        },
    }


def test_graph_rows_are_preferred_and_a_failed_capture_is_allowed() -> None:
    d = _doc()
    d["collectives"] = [r for r in d["collectives"] if r["mode"] == "eager"]
    d["dropped"] = [
        {"op": op, "bytes": b, "mode": "graph", "why": "capture failed on some rank"}
        for op in m.OPS
        for b in (1024, 1 << 28)
    ]
    doc = m.validate_text(json.dumps(d))
    assert [r.mode for r in m.rows_of(doc, "all_gather")] == ["eager", "eager"]
    full = m.validate_text(json.dumps(_doc()))
    assert [r.mode for r in m.rows_of(full, "all_gather")] == ["graph", "graph"]
    assert [r.mode for r in m.rows_of(full, "all_gather", "eager")] == ["eager", "eager"]
    eager = m.busbw_at(full, "all_reduce", 1024, "eager")
    assert eager is not None and eager < m.busbw_at(full, "all_reduce", 1024)  # host cost added


def test_a_good_document_validates_and_reads_back() -> None:
    doc = m.validate_text(json.dumps(_doc()))
    want = m.busbw_gbps("all_reduce", 8, 1 << 28, (10.0 + (1 << 28) / 1e5) * 1e-6)
    assert m.busbw_at(doc, "all_reduce", 1 << 28) == pytest.approx(want)
    assert m.busbw_at(doc, "all_reduce", 1 << 20) == pytest.approx(
        m.busbw_gbps("all_reduce", 8, 1024, (10.0 + 1024 / 1e5) * 1e-6)
    )
    assert m.busbw_at(doc, "all_reduce", 512) is None
    one = _doc(1)
    assert all(r["busbw_gbps"] == 0.0 for r in one["collectives"])
    one["dropped"] = [{"op": "all_reduce", "bytes": 1024, "mode": "eager", "why": "too fast"}]
    m.validate_text(json.dumps(one))  # only a one-GPU run may drop a size


def _broken(edit: Any) -> dict[str, Any]:
    d = copy.deepcopy(_doc())
    edit(d)
    return d


@pytest.mark.parametrize(
    "edit,why",
    [
        (lambda d: d["provenance"]["env"].pop("NCCL_NVLS_ENABLE"), "NVLS"),
        (lambda d: d["provenance"]["env"].update(NCCL_NVLS_ENABLE="1"), "NVLS"),
        (lambda d: d["collectives"][0].update(busbw_gbps=1.0), "busbw_gbps"),
        (lambda d: d["collectives"][0]["time"].update(p20_us=1e9), "percentiles"),
        (lambda d: d["collectives"].append(d["collectives"][0]), "twice"),
        (lambda d: d.update(kind="nvidia-h200-x4"), "world size"),
        (lambda d: d["layer"]["rows"][0].update(speedup=2.0), "speedup"),
        (lambda d: d["layer"]["rows"][0].update(rel_err=0.5), "tolerance"),
        (lambda d: d["collectives"][0].update(op="broadcast"), "op"),
        (lambda d: d.update(extra=1), "extra"),
        (
            lambda d: d.update(
                dropped=[{"op": "all_reduce", "bytes": 1024, "mode": "eager", "why": "too fast"}]
            ),
            "dropped",
        ),
        (lambda d: d["collectives"][0].pop("mode"), "mode"),
    ],
)
def test_a_broken_document_is_refused(edit: Any, why: str) -> None:
    with pytest.raises(ValidationError) as exc:
        m.Document.model_validate(_broken(edit))
    assert why.lower() in str(exc.value).lower()


def test_runner_keeps_nvls_off() -> None:
    text = (HERE / "run.py").read_text(encoding="utf-8")
    assert text.count('os.environ["NCCL_NVLS_ENABLE"] = "0"') == 2  # the parent and every rank


def test_runner_without_torch_says_why_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed here: the runner would measure")
    run = _load("run")
    assert run.main(["--world", "1"]) == 2
    assert "PyTorch is not installed" in capsys.readouterr().err
    assert run.main(["--min-bytes", "1000"]) == 2


def _write(root: Path, doc: dict[str, Any]) -> None:
    folder = root / "kernels" / "collectives" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{doc['kind']}.json").write_text(json.dumps(doc), encoding="utf-8")


def test_chart_reads_every_results_file_and_draws_busbw(tmp_path: Path) -> None:
    chart = _load("chart")
    assert chart.load(tmp_path) == []
    empty_hash = chart.data_hash(tmp_path)
    for n in (8, 2, 1):
        _write(tmp_path, _doc(n))
    docs = chart.load(tmp_path)
    assert [d.provenance.world for d in docs] == [1, 2, 8]
    assert chart.data_hash(tmp_path) != empty_hash
    pts = chart.series(docs[2], "all_reduce")
    assert [b for b, _ in pts] == [1024, 1 << 28]
    assert pts[1][1] == pytest.approx(
        m.busbw_gbps("all_reduce", 8, 1 << 28, (10.0 + 2684.35456) * 1e-6)
    )
    with pytest.raises(ValueError):
        chart.series(docs[2], "broadcast")
    svg = chart.render_svg(docs, "all_gather")
    assert svg.startswith("<?xml") and "<svg" in svg
    assert svg == chart.render_svg(docs, "all_gather")  # deterministic
    assert "8 GPUs" in svg and "2 GPUs" in svg and "1 GPUs" not in svg  # one GPU moves nothing


def test_chart_refuses_a_bad_file_and_draws_nothing_from_one_gpu(tmp_path: Path) -> None:
    chart = _load("chart")
    _write(tmp_path, _doc(1))
    with pytest.raises(ValueError, match="more than one GPU"):
        chart.render_svg(chart.load(tmp_path))
    assert chart.main(["--root", str(tmp_path), "--out", str(tmp_path / "c.svg")]) == 1
    bad = _doc(2)
    bad["provenance"]["env"] = {}
    _write(tmp_path, bad)
    with pytest.raises(ValueError, match="nvidia-h200-x2.json"):
        chart.load(tmp_path)


# --- on the device ------------------------------------------------------------------------


@pytest.mark.gpu
def test_one_gpu_run_writes_a_valid_document(tmp_path: Path) -> None:
    """The runner end to end on one GPU (spawn, NCCL, checks, timing, the split layer)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    # As a script, the way it is run: spawned ranks re-import the runner by its file, which a
    # module loaded under a synthetic name in this process could not offer them.
    out = tmp_path / "x1.json"
    args = ["--world", "1", "--max-bytes", str(1 << 20), "--reps", "5", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, str(HERE / "run.py"), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    doc = m.validate_text(out.read_text(encoding="utf-8"))
    assert doc.provenance.world == 1 and doc.kind.endswith("-x1")
    assert doc.provenance.env["NCCL_NVLS_ENABLE"] == "0"
    assert len(doc.collectives) + len(doc.dropped) == 2 * 3 * 11  # 1 KiB to 1 MiB, 3 ops, 2 modes
    assert {r.mode for r in doc.layer.rows} >= {"eager"}
