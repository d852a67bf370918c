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
