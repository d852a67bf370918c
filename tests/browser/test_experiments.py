"""The experiments of the shipped site, in a browser.

Each experiment's model lives once, in its script module; these tests import that module in
the page and compare what it returns with values computed here. Then every input of every
experiment is given bad values (empty, unparsable, negative, below its minimum, above its
maximum, huge, off its step): the page must refuse each with a message that names the input,
mark the input invalid, and never show NaN, Infinity, undefined or null.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from .conftest import Tab

EXPERIMENTS = ("decode-economics", "roofline-explorer", "continuous-batching")
GARBAGE = re.compile(r"NaN|Infinity|undefined|null")


def page_of(site: str, tab: Tab, eid: str) -> Any:
    return tab.goto(f"{site}public/experiments/{eid}/index.html")


def module(page: Any, site: str, eid: str, call: str) -> Any:
    """Import the experiment's own module in the page and evaluate `call` with it as `m`."""
    url = f"{site}public/static/js/experiments/{eid}.js"
    return page.evaluate(f"async () => {{ const m = await import({url!r}); return {call}; }}")


def fill(page: Any, values: dict[str, float]) -> None:
    for name, value in values.items():
        page.fill(f"[data-input={name}]", str(value))


def output(page: Any) -> tuple[str, str]:
    out = page.locator("[data-output]")
    return out.get_attribute("data-state") or "", out.inner_text()


def assert_clean(page: Any) -> None:
    """Nothing the scripts write holds NaN, Infinity, undefined or null."""
    text = page.locator("form.experiment").inner_text()
    assert not GARBAGE.search(text), text


def type_text(page: Any, name: str, text: str) -> None:
    """Type as a reader would (fill refuses text a number field cannot hold)."""
    box = page.locator(f"[data-input={name}]")
    box.fill("")
    box.focus()
    page.keyboard.type(text)


# -- the models, against values computed here -------------------------------------------


def test_decode_economics_model(shipped_site: str, tab: Tab) -> None:
    page = page_of(shipped_site, tab, "decode-economics")
    p = {"batch": 16, "paramsB": 70, "weightBytes": 1, "kvTokens": 8192, "kvBytes": 2, "layers": 80,
         "kvHeads": 8, "headDim": 128, "bandwidthTBps": 4.8}
    got = module(page, shipped_site, "decode-economics", f"m.decodeBound({p!r})".replace("'", '"'))
    kv_per_token = 2 * 80 * 8 * 128 * 2
    weights = 70e9 * 1
    kv = 16 * 8192 * kv_per_token
    seconds = (weights + kv) / 4.8e12
    assert got["kvBytesPerToken"] == kv_per_token == 327_680
    assert got["weightBytes"] == pytest.approx(weights)
    assert got["kvBytes"] == pytest.approx(kv)
    assert got["seconds"] == pytest.approx(seconds)
    assert got["tokensPerSecond"] == pytest.approx(16 / seconds)
    assert got["perSequence"] == pytest.approx(1 / seconds)


def test_decode_economics_page(shipped_site: str, tab: Tab) -> None:
    page = page_of(shipped_site, tab, "decode-economics")
    state, text = output(page)
    assert state == "ok" and "per sequence" in text, text  # on load, from the starting values
    assert_clean(page)
    fill(page, {"batch": 16, "params": 70, "weight-bytes": 1, "kv-tokens": 8192, "kv-bytes": 2,
                "layers": 80, "kv-heads": 8, "head-dim": 128, "bandwidth": 4.8})
    seconds = (70e9 + 16 * 8192 * 327_680) / 4.8e12
    _, text = output(page)
    assert "Weights 70.00 GB + KV cache 42.95 GB" in text
    assert f"step time ≥ {seconds * 1e3:.2f} ms" in text
    assert f"≤ {16 / seconds:.0f} tokens/s ({1 / seconds:.1f} per sequence)" in text
    rows = page.locator("[data-table=decode-economics] tbody tr")
    assert rows.count() == 5  # 1, 4, 16, 64, 256: the reader's 16 is one of them
    row16 = rows.nth(2).locator("th, td").all_inner_texts()
    assert row16[0] == "16" and row16[3] == f"{seconds * 1e3:.2f}"


def test_roofline_explorer_model(shipped_site: str, tab: Tab) -> None:
    page = page_of(shipped_site, tab, "roofline-explorer")
    for gflop, gbytes, peak, tbps in ((1, 4, 50, 4), (137.439, 0.2013, 50, 4), (0.001, 10000, 5000, 0.1)):
        call = f"m.rooflinePoint({{gflop: {gflop}, gbytes: {gbytes}, peakTflops: {peak}, tbps: {tbps}}})"
        got = module(page, shipped_site, "roofline-explorer", call)
        intensity = gflop / gbytes
        assert got["intensity"] == pytest.approx(intensity)
        assert got["ridge"] == pytest.approx(peak / tbps)
        assert got["attainable"] == pytest.approx(min(peak, intensity * tbps))
        assert got["seconds"] == pytest.approx(max(gflop * 1e9 / (peak * 1e12), gbytes * 1e9 / (tbps * 1e12)))
        assert got["bound"] == ("memory" if intensity < peak / tbps else "compute")


def test_roofline_explorer_page(shipped_site: str, tab: Tab) -> None:
    page = page_of(shipped_site, tab, "roofline-explorer")
    assert output(page)[0] == "ok"
    assert_clean(page)
    fill(page, {"gflop": 1, "gbytes": 4, "peak": 50, "bandwidth": 4})
    _, text = output(page)
    # 1 GFLOP over 4 GB is 0.25 FLOP/B, left of a ridge of 12.5: 1 TFLOP/s, 1000 µs.
    assert "Intensity 0.25 FLOP/byte against a ridge of 12.50: memory-bound" in text
    assert "Attainable 1.00 TFLOP/s; time ≥ 1000.0 µs" in text
    assert page.locator("[data-figure] svg[role=img]").count() == 1
    rows = page.locator("[data-table=roofline-explorer] tbody tr")
    assert rows.count() == 5
    # SGEMM 4096³: 2·4096³ FLOP over 3·4096²·4 B, against this roof.
    last = rows.nth(4).locator("th, td").all_inner_texts()
    intensity = 2 * 4096**3 / (3 * 4096**2 * 4)
    assert last[3] == f"{intensity:.2f}" and last[4] == "compute"


def test_roofline_explorer_refuses_a_huge_roof_without_hanging(shipped_site: str, tab: Tab) -> None:
    page = page_of(shipped_site, tab, "roofline-explorer")
    fill(page, {"peak": "1e300"})
    state, text = output(page)
    assert state == "refused" and "between 0.1 and 5000" in text
    assert page.locator("[data-figure] svg").count() == 0
    fill(page, {"peak": 5000, "bandwidth": 0.1, "gflop": 1000000, "gbytes": 0.0001})
    assert output(page)[0] == "ok"  # the largest accepted values still draw
    assert page.locator("[data-figure] svg[role=img]").count() == 1
    assert_clean(page)


def test_continuous_batching_model(shipped_site: str, tab: Tab) -> None:
    page = page_of(shipped_site, tab, "continuous-batching")
    p = {"rate": 0.01, "maxBatch": 1, "meanTokens": 8, "weightGB": 16, "cacheMB": 100,
         "bandwidthTBps": 4, "requests": 50, "seed": 7}
    js = str(p).replace("'", '"')
    step = module(page, shipped_site, "continuous-batching", f"m.stepSeconds({js}, 3)")
    assert step == pytest.approx((16e9 + 3 * 100e6) / 4e12)
    reqs = module(page, shipped_site, "continuous-batching", f"m.makeRequests({js})")
    assert len(reqs) == 50
    assert all(1 <= r["tokens"] <= 15 for r in reqs)
    assert all(b["arrival"] > a["arrival"] for a, b in zip(reqs, reqs[1:], strict=False))
    # One sequence at a time, arrivals 100 s apart on average and steps of a few ms: (almost)
    # every request runs alone on arrival, so its time is its tokens times one step.
    one = (16e9 + 100e6) / 4e12
    times = sorted(r["tokens"] * one for r in reqs)
    for continuous in (False, True):
        got = module(page, shipped_site, "continuous-batching", f"m.simulate({js}, {str(continuous).lower()})")
        assert got["p50Request"] == pytest.approx(times[len(times) // 2])
        assert got["p95Gap"] == pytest.approx(one)
        assert math.isfinite(got["tokensPerSecond"]) and got["tokensPerSecond"] > 0


def test_continuous_batching_page(shipped_site: str, tab: Tab) -> None:
    page = page_of(shipped_site, tab, "continuous-batching")
    state, text = output(page)
    assert state == "ok" and "Static batching" in text and "Continuous batching" in text
    assert_clean(page)
    fill(page, {"requests": 5000, "mean-tokens": 4096})
    state, text = output(page)
    assert state == "refused" and "2,000,000" in text


# -- every bad value into every input ------------------------------------------------------


def bad_values(lo: float, hi: float, step: float) -> list[tuple[str, str, str]]:
    """(how it is typed, the text, what the message must say)."""
    cases = [("fill", "", "is empty"), ("type", "1e", "is not a number"), ("type", "-", "is not a number"),
             ("fill", "-5", "must lie between"), ("fill", "1e300", "must lie between"),
             ("fill", f"{hi * 10 + 1:g}", "must lie between")]
    if lo > 0:
        cases.append(("fill", "0", "must lie between"))
        cases.append(("fill", f"{lo / 2:g}", "must lie between"))
    off_grid = lo + step / 2
    if off_grid < hi:
        cases.append(("fill", f"{off_grid:.10g}", "must be a multiple of"))
    return cases


@pytest.mark.parametrize("eid", EXPERIMENTS)
def test_every_input_refuses_bad_values(shipped_site: str, tab: Tab, eid: str) -> None:
    page = page_of(shipped_site, tab, eid)
    inputs = page.locator("form.experiment [data-input]")
    names = [inputs.nth(i).get_attribute("data-input") for i in range(inputs.count())]
    assert len(names) >= 4, names
    refused: list[str] = []
    for name in names:
        box = page.locator(f"[data-input={name}]")
        good = box.input_value()
        lo, hi, step = (float(box.get_attribute(a) or "nan") for a in ("min", "max", "step"))
        label = page.locator(f"label[for=in-{name}]").inner_text().split(" (")[0].strip()
        for how, text, says in bad_values(lo, hi, step):
            if how == "fill":
                box.fill(text)
            else:
                type_text(page, name, text)
            state, message = output(page)
            assert state == "refused", f"{eid}: {name} = {text!r} was not refused: {message}"
            assert message.startswith("Not computed:") and says in message, (name, text, message)
            assert label in message, (name, text, message)
            assert box.get_attribute("aria-invalid") == "true", (name, text)
            assert_clean(page)
            refused.append(f"{name}={text!r}")
        box.fill(good)
        state, message = output(page)
        assert state == "ok", f"{eid}: {name} back at {good} still refused: {message}"
        assert box.get_attribute("aria-invalid") == "false"
        assert_clean(page)
    assert len(refused) >= 7 * len(names)
    assert tab.errors == []


# -- the capacity planner ------------------------------------------------------------------

PLANNER_8B = {"paramsB": 8.03, "weightBytes": 2, "layers": 32, "hidden": 4096, "kvHeads": 8,
              "headDim": 128, "kvBytes": 2, "memoryGB": 141, "reservePct": 10, "prompt": 2048,
              "output": 256, "targetMs": 30, "bandwidthTBps": 4.3, "efficiencyPct": 87,
              "peakTflops": 804, "tracedOneUs": 958.37, "tracedBigUs": 1279.62}
# A 70B-class model in FP8 with an FP8 cache at 8K + 1K tokens, on a 4.8 TB/s, 141 GB GPU.
PLANNER_70B = {"paramsB": 70, "weightBytes": 1, "layers": 80, "hidden": 8192, "kvHeads": 8,
               "headDim": 128, "kvBytes": 1, "memoryGB": 141, "reservePct": 5, "prompt": 8192,
               "output": 1024, "targetMs": 50, "bandwidthTBps": 4.8, "efficiencyPct": 90,
               "peakTflops": 1500, "tracedOneUs": 1000, "tracedBigUs": 1400}
PLANNER_INPUTS = {"params": "paramsB", "weight-bytes": "weightBytes", "layers": "layers",
                  "hidden": "hidden", "kv-heads": "kvHeads", "head-dim": "headDim",
                  "kv-bytes": "kvBytes", "memory": "memoryGB", "reserve": "reservePct",
                  "prompt": "prompt", "output": "output", "target": "targetMs",
                  "bandwidth": "bandwidthTBps", "efficiency": "efficiencyPct", "peak": "peakTflops",
                  "traced-1": "tracedOneUs", "traced-64": "tracedBigUs"}
TRACED_WEIGHTS, TRACED_KV, TRACED_LAYERS = 852_561_920, 2 * 8 * 4 * 128 * 2 * 512, 8


def planner_by_hand(p: dict[str, float]) -> dict[str, Any]:
    """The planner's outputs, computed here from its stated formulas."""
    kv_token = 2 * p["layers"] * p["kvHeads"] * p["headDim"] * p["kvBytes"]
    weights = p["paramsB"] * 1e9 * p["weightBytes"]
    cache = p["memoryGB"] * 1e9 * (1 - p["reservePct"] / 100) - weights
    by_memory = math.floor(cache / (kv_token * (p["prompt"] + p["output"])))
    bw = p["bandwidthTBps"] * 1e12 * p["efficiencyPct"] / 100
    avg = p["prompt"] + p["output"] / 2
    flops = 2 * p["paramsB"] * 1e9 + 4 * p["layers"] * avg * p["hidden"]
    traced = lambda b: (TRACED_WEIGHTS + b * TRACED_KV) / bw  # noqa: E731
    overhead = max(0.0, p["tracedOneUs"] * 1e-6 - traced(1)) / TRACED_LAYERS
    factor = max(1.0, (p["tracedBigUs"] - p["tracedOneUs"]) * 1e-6 / (traced(64) - traced(1)))

    def step(b: int, over: bool) -> float:
        f, o = (factor, overhead) if over else (1.0, 0.0)
        return p["layers"] * o + max((weights + f * b * kv_token * avg) / bw,
                                     b * flops / (p["peakTflops"] * 1e12))

    def batch(over: bool) -> int:
        b = 0
        while step(b + 1, over) <= p["targetMs"] * 1e-3:
            b += 1
        return b

    out = {"kv_token": kv_token, "weights": weights, "cache": cache, "by_memory": by_memory,
           "overhead": overhead, "factor": factor}
    for name, over in (("bound", False), ("measured", True)):
        latency = batch(over)
        b = min(latency, by_memory)
        out[name] = {"latency": latency, "batch": b, "step": step(b, over), "tps": b / step(b, over)}
    return out


@pytest.mark.parametrize("p", [PLANNER_8B, PLANNER_70B], ids=["8b-bf16", "70b-fp8"])
def test_capacity_planner_model(shipped_site: str, tab: Tab, p: dict[str, float]) -> None:
    page = page_of(shipped_site, tab, "capacity-planner")
    js = str(p).replace("'", '"')
    got = module(page, shipped_site, "capacity-planner", f"m.plan({js})")
    want = planner_by_hand(p)
    assert got["kvBytesPerToken"] == want["kv_token"]
    assert got["weightBytes"] == pytest.approx(want["weights"])
    assert got["cacheBytes"] == pytest.approx(want["cache"])
    assert got["maxSequences"] == want["by_memory"]
    assert got["calibration"]["overheadPerLayer"] == pytest.approx(want["overhead"])
    assert got["calibration"]["perSequenceFactor"] == pytest.approx(want["factor"])
    for name in ("bound", "measured"):
        assert got[name]["latency"] == want[name]["latency"], name
        assert got[name]["batch"] == want[name]["batch"], name
        assert got[name]["stepSeconds"] == pytest.approx(want[name]["step"]), name
        assert got[name]["tokensPerSecond"] == pytest.approx(want[name]["tps"]), name


def test_capacity_planner_hand_values() -> None:
    """The two settings, worked once more with the numbers written out, so a slip in the
    by-hand function above cannot hide a slip in the page."""
    a = planner_by_hand(PLANNER_8B)
    assert a["kv_token"] == 131_072  # 2 x 32 x 8 x 128 x 2
    assert a["cache"] == pytest.approx(141e9 * 0.9 - 16.06e9)  # 110.84 GB
    assert a["by_memory"] == 367  # 110.84e9 / (131072 x 2304)
    # (30 ms x 4.3 TB/s x 0.87 - 16.06 GB) / (131072 x 2176 B) = 337.2
    assert a["bound"]["latency"] == 337
    assert a["overhead"] == pytest.approx((958.37e-6 - 860_950_528 / 3.741e12) / 8)
    assert a["measured"]["latency"] == 131
    b = planner_by_hand(PLANNER_70B)
    assert b["kv_token"] == 163_840  # 2 x 80 x 8 x 128 x 1
    assert b["by_memory"] == math.floor((141e9 * 0.95 - 70e9) / (163_840 * 9216))  # 42
    assert b["by_memory"] == 42
    # bound: (50 ms x 4.32 TB/s - 70 GB) / (163840 x 8704 B) = 102.4, so memory binds at 42
    assert b["bound"]["latency"] == 102 and b["bound"]["batch"] == 42


def _planner_fill(page: Any, p: dict[str, float]) -> None:
    fill(page, {name: p[key] for name, key in PLANNER_INPUTS.items()})


@pytest.mark.parametrize("width", (390, 1280))
def test_capacity_planner_page(shipped_site: str, browser: Any, width: int) -> None:
    from .test_a11y import serious
    from .test_layout import problems

    context = browser.new_context(viewport={"width": width, "height": 900})
    tab = Tab(context)
    try:
        page = page_of(shipped_site, tab, "capacity-planner")
        state, text = output(page)
        assert state == "ok" and "sequences by memory" in text, text  # from the seeded values
        assert serious(page) == []  # axe-core: no serious or critical violation
        assert page.locator("p.source").count() == 5  # every seeded input names its figure
        assert_clean(page)
        for p in (PLANNER_8B, PLANNER_70B):
            _planner_fill(page, p)
            want = planner_by_hand(p)
            state, text = output(page)
            assert state == "ok", text
            assert f"{want['kv_token'] / 1024:.1f} KiB a token" in text
            assert f"{want['by_memory']} sequences by memory" in text
            for name in ("bound", "measured"):
                w = want[name]
                assert f"{w['batch']} sequences" in text and f"{w['tps']:.0f} tokens/s per GPU" in text
                assert f"step {w['step'] * 1e3:.2f} ms" in text
            rows = page.locator("[data-table=capacity-planner] tbody tr")
            firsts = [rows.nth(i).locator("th").inner_text() for i in range(rows.count())]
            assert str(want["bound"]["batch"]) in firsts and str(want["measured"]["batch"]) in firsts
            assert_clean(page)
            assert problems(page) == {}  # nothing scrolls the page sideways at this width
        fill(page, {"params": 200, "weight-bytes": 4})  # 800 GB of weights on a 141 GB GPU
        state, text = output(page)
        assert state == "ok" and "leave no room for the cache" in text, text
        assert page.locator("[data-table=capacity-planner]").count() == 0
        fill(page, {"params": 8.03, "weight-bytes": 2, "target": 0.1})
        state, text = output(page)
        assert state == "ok" and "no batch meets the target" in text, text
        assert_clean(page)
    finally:
        context.close()
    assert tab.errors == []


def test_capacity_planner_traced_shape_matches_the_trace() -> None:
    """TRACED in the script states the traced decoder's shape; it must be the trace file's."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    cfg = json.loads((root / "kernels/traces/decode_step.json").read_text(encoding="utf-8"))["config"]
    script = (root / "templates/static/js/experiments/capacity-planner.js").read_text(encoding="utf-8")
    assert f"weightBytes: {cfg['weight_bytes']}" in script
    kv = 2 * cfg["kv_heads"] * cfg["head_dim"] * 2 * cfg["context"]
    assert f"layers: {cfg['layers']}" in script and cfg["layers"] == TRACED_LAYERS
    assert f"2 * {cfg['layers']} * {cfg['kv_heads']} * {cfg['head_dim']} * 2 * {cfg['context']}" in script
    assert cfg["layers"] * kv == TRACED_KV and cfg["weight_bytes"] == TRACED_WEIGHTS
    assert max(cfg["batches"]) == 64 and "big: 64" in script


def test_capacity_planner_refuses_bad_values(shipped_site: str, tab: Tab) -> None:
    test_every_input_refuses_bad_values(shipped_site, tab, "capacity-planner")


# -- speculative decoding ------------------------------------------------------------------

SPEC_P = {"alpha": 0.8, "drafts": 3, "draftMs": 0.5, "targetMs": 4, "layers": 32,
          "verifyUs": [40, 42, 45, 80]}
SPEC_INPUTS = {"alpha": "alpha", "drafts": "drafts", "draft-ms": "draftMs", "target-ms": "targetMs",
               "layers": "layers"}


def spec_by_hand(p: dict[str, Any], drafts: int) -> dict[str, float]:
    """One step with `drafts` drafts, computed here: expected tokens, attention a layer, step ms."""
    k = drafts + 1
    points = list(zip((1, 2, 4, 8), p["verifyUs"], strict=True))
    attn = next(
        y0 + (k - x0) / (x1 - x0) * (y1 - y0)
        for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False)
        if x0 <= k <= x1
    )
    a = p["alpha"]
    tokens = 1.0 if drafts == 0 else sum(a**i for i in range(drafts + 1))
    ms = drafts * p["draftMs"] + p["targetMs"] + p["layers"] * attn / 1000
    return {"tokens": tokens, "attn": attn, "ms": ms, "tps": tokens * 1000 / ms}


def test_speculative_decoding_model(shipped_site: str, tab: Tab) -> None:
    page = page_of(shipped_site, tab, "speculative-decoding")
    js = str(SPEC_P).replace("'", '"')
    got = module(page, shipped_site, "speculative-decoding",
                 "[0.0, 0.5, 0.8, 1.0].map((a) => [1, 3, 7].map((d) => m.expectedTokens(a, d)))")
    for a, row in zip((0.0, 0.5, 0.8, 1.0), got, strict=True):
        for d, value in zip((1, 3, 7), row, strict=True):
            assert value == pytest.approx(sum(a**i for i in range(d + 1)))  # 1 + a + ... + a^d
    assert got[2][1] == pytest.approx((1 - 0.8**4) / (1 - 0.8))
    attn = module(page, shipped_site, "speculative-decoding",
                  f"[1, 2, 3, 4, 5, 6, 7, 8].map((k) => m.attentionUs({js}, k))")
    assert attn == pytest.approx([40, 42, 43.5, 45, 53.75, 62.5, 71.25, 80])
    for d in range(8):
        s = module(page, shipped_site, "speculative-decoding", f"m.step({js}, {d})")
        want = spec_by_hand(SPEC_P, d)
        assert s["tokens"] == pytest.approx(want["tokens"])
        assert s["ms"] == pytest.approx(want["ms"])
        assert s["tokensPerSecond"] == pytest.approx(want["tps"])
    r = module(page, shipped_site, "speculative-decoding", f"m.speculate({js})")
    best = max(range(1, 8), key=lambda d: spec_by_hand(SPEC_P, d)["tps"])
    assert r["best"]["drafts"] == best
    assert r["speedup"] == pytest.approx(spec_by_hand(SPEC_P, 3)["tps"] / spec_by_hand(SPEC_P, 0)["tps"])
    # 3 drafts at 0.8: 2.952 tokens for 1.5 + 4 + 32 x 45 us = 6.94 ms, against 1 token in 5.28 ms
    assert spec_by_hand(SPEC_P, 3)["tokens"] == pytest.approx(2.952)
    assert spec_by_hand(SPEC_P, 3)["ms"] == pytest.approx(6.94)
    assert spec_by_hand(SPEC_P, 0)["ms"] == pytest.approx(5.28)


def test_speculative_decoding_page(shipped_site: str, tab: Tab) -> None:
    page = page_of(shipped_site, tab, "speculative-decoding")
    state, text = output(page)
    assert state == "ok" and "tokens/s against" in text, text  # from the seeded values
    assert page.locator("p.source").count() == 4  # the four verify times name their figures
    fill(page, {name: SPEC_P[key] for name, key in SPEC_INPUTS.items()})
    fill(page, {f"verify-{k}": v for k, v in zip((1, 2, 4, 8), SPEC_P["verifyUs"], strict=True)})
    state, text = output(page)
    want, plain = spec_by_hand(SPEC_P, 3), spec_by_hand(SPEC_P, 0)
    assert state == "ok", text
    assert f"{want['tokens']:.2f} tokens expected (at most 4)" in text
    assert f"step {want['ms']:.2f} ms" in text
    assert f"{want['tps']:.0f} tokens/s against {plain['tps']:.0f} without drafts" in text
    rows = page.locator("[data-table=speculative-decoding] tbody tr")
    assert rows.count() == 8
    for d in (0, 3, 7):
        cells = rows.nth(d).locator("td")
        assert cells.nth(1).inner_text() == f"{spec_by_hand(SPEC_P, d)['tokens']:.2f}"
        assert cells.nth(4).inner_text() == f"{spec_by_hand(SPEC_P, d)['tps']:.0f}"
    fill(page, {"alpha": 0})  # drafts are never right: speculation costs, it does not pay
    state, text = output(page)
    assert state == "ok" and "1.00 tokens expected" in text, text
    speedup = float(re.search(r"without drafts: ([0-9.]+)x", text)[1])  # type: ignore[index]
    assert speedup < 1
    assert_clean(page)
    assert tab.errors == []


def test_speculative_decoding_refuses_bad_values(shipped_site: str, tab: Tab) -> None:
    test_every_input_refuses_bad_values(shipped_site, tab, "speculative-decoding")
