"""Your GPU beside ours: a results file from `curriculum bench`, dropped on a page, shows its
numbers beside the site's figures and charts, stays in local storage until cleared, and a bad
or foreign file gets a clear message. With results for several GPUs in the repository, pages
offer a GPU selector."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from curriculum.measure import case_value, format_value
from curriculum.results import CaseResult

from .conftest import EPOCH, REPO, SAMPLE, TEMPLATES, Tab

CAPSULE = "public/courses/kernel-engineering/roofline/index.html"
CHART_PAGE = "public/courses/kernel-engineering/softmax-from-scratch/index.html"
NAME = "Test GPU X"


def slower(data: dict[str, Any], slug: str, name: str, factor: float) -> dict[str, Any]:
    """A results file as another, `factor` times slower GPU would write it."""
    out = copy.deepcopy(data)
    out["gpu_slug"] = slug

    def stat(s: dict[str, Any]) -> None:
        for k in ("median_ms", "p20_ms", "p80_ms", "min_ms", "max_ms"):
            s[k] *= factor
        s["raw_ms"] = [x * factor for x in s["raw_ms"]]

    for run in out["runs"].values():
        run["provenance"]["gpu_name"] = name
        run["provenance"]["gpu_slug"] = slug
        for ceil in run["ceilings"].values():
            stat(ceil["stat"])
            for k in ("gbps", "tflops"):
                if ceil.get(k):
                    ceil[k] /= factor
    for case in out["cases"]:
        stat(case["stat"])
        for k in ("gbps", "tflops"):
            case[k] /= factor
        if case.get("roofline_ms"):  # the floor moves with the ceilings: the ratio stays
            case["roofline_ms"] *= factor
        for b in case.get("baselines", []):
            stat(b["stat"])
            for k in ("gbps", "tflops"):
                if b.get(k):
                    b[k] /= factor
    return out


@pytest.fixture(scope="module")
def theirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    data = json.loads((REPO / "kernels" / "results" / "nvidia-h200.json").read_text())
    mine = slower(data, "test-gpu-x", NAME, 2.0)
    path = tmp_path_factory.mktemp("theirs") / "test-gpu-x.json"
    path.write_text(json.dumps(mine))
    return path, mine


def expected(mine: dict[str, Any], case_id: str, field: str, shape: str) -> str | None:
    runs = mine["runs"]
    if case_id.startswith("ceiling/"):
        ceil = runs[max(runs)]["ceilings"].get(case_id.split("/", 1)[1])
        if ceil is None:
            return None
        value = {"ms": ceil["stat"]["median_ms"], "gbps": ceil.get("gbps"),
                 "tbps": ceil["gbps"] / 1000 if ceil.get("gbps") else None,
                 "tflops": ceil.get("tflops")}.get(field)
        return None if value is None else format_value(field, value)
    for c in mine["cases"]:
        if c["id"] == case_id and (c["shape_label"] == shape if shape else c["headline"]):
            value = case_value(CaseResult.model_validate(c), field)
            return None if value is None else format_value(field, value)
    return None


def load(page: Any, path: Path) -> None:
    page.set_input_files("#gpu-compare-file", str(path))


def figures(page: Any) -> list[dict[str, str]]:
    return page.evaluate("""() => [...document.querySelectorAll('.fig[data-case]')].map(f => ({
        case: f.dataset.case, field: f.dataset.field, shape: f.dataset.shape || '',
        next: f.nextElementSibling && f.nextElementSibling.matches('.fig-compare')
              ? f.nextElementSibling.textContent : null}))""")


def test_a_dropped_file_shows_beside_every_figure(shipped_site: str, tab: Tab, theirs: Any) -> None:
    path, mine = theirs
    page = tab.goto(shipped_site + CAPSULE)
    assert page.locator(".gpu-compare").count() == 1
    assert page.locator(".fig-compare").count() == 0
    load(page, path)
    page.wait_for_selector(".fig-compare")
    figs = figures(page)
    assert len(figs) >= 3
    matched = 0
    for f in figs:
        want = expected(mine, f["case"], f["field"], f["shape"])
        assert f["next"] == f" ({NAME}: {want if want is not None else 'not in your file'})", f
        matched += want is not None
    assert matched >= 3
    status = page.inner_text("[data-compare-status]")
    assert f"Showing {NAME}" in status and f"{matched} of {len(figs)}" in status


def test_kept_until_cleared(shipped_site: str, tab: Tab, theirs: Any) -> None:
    path, _ = theirs
    page = tab.goto(shipped_site + CAPSULE)
    load(page, path)
    page.wait_for_selector(".fig-compare")
    page = tab.goto(shipped_site + CHART_PAGE)  # another page: read from local storage
    page.wait_for_selector(".fig-compare")
    assert page.locator("[data-compare-show]").input_value() == "file"
    page.reload()
    page.wait_for_selector(".fig-compare")
    page.click("[data-compare-clear]")
    assert page.locator(".fig-compare, .fig-compare-table").count() == 0
    assert "cleared" in page.inner_text("[data-compare-status]")
    page.reload()
    assert page.locator(".fig-compare").count() == 0
    assert page.evaluate("localStorage.getItem('curriculum.compare')") is None


def test_charts_get_a_table_of_the_dropped_cases(shipped_site: str, tab: Tab, theirs: Any) -> None:
    path, mine = theirs
    page = tab.goto(shipped_site + CHART_PAGE)
    load(page, path)
    page.wait_for_selector(".fig-compare-table")
    charts = page.locator("figure.chart[data-topic]")
    assert charts.count() >= 1
    assert page.locator(".fig-compare-table").count() == charts.count()
    first = charts.first
    topic, field = first.get_attribute("data-topic"), first.get_attribute("data-field")
    bench = first.get_attribute("data-benchmark")
    cases = [c for c in mine["cases"] if c["topic"] == topic and (not bench or c["benchmark"] == bench)
             and case_value(CaseResult.model_validate(c), field) is not None]
    rows = page.locator(".fig-compare-table").first.locator("tbody tr")
    assert rows.count() == len(cases) > 0
    cells = rows.first.locator("td").all_inner_texts()
    c = cases[0]
    assert cells == [c["id"], c["shape_label"],
                     format_value(field, case_value(CaseResult.model_validate(c), field))]


def test_drop_on_the_page(shipped_site: str, tab: Tab, theirs: Any) -> None:
    path, _ = theirs
    page = tab.goto(shipped_site + CAPSULE)
    page.evaluate("""(text) => {
        const dt = new DataTransfer();
        dt.items.add(new File([text], 'test-gpu-x.json', {type: 'application/json'}));
        document.querySelector('main p').dispatchEvent(
            new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));
    }""", path.read_text())
    page.wait_for_selector(".fig-compare")
    assert page.locator("[data-compare-details]").get_attribute("open") is not None


@pytest.mark.parametrize(("content", "says"), [
    ("not json at all", "it is not JSON"),
    ('{"version": 1, "done": {}}', "not a results file of `curriculum bench`"),
    ("[1, 2, 3]", "a results file is one JSON object"),
    ('{"schema_version": 9, "gpu_slug": "x", "runs": {}, "cases": []}', "schema_version is 9"),
    ('{"schema_version": 2, "gpu_slug": "x", "runs": {}, "cases": []}', "records no runs"),
    ('{"schema_version": 2, "gpu_slug": "x", "cases": [], "runs": {"r": {"provenance": {}}}}',
     "names no GPU"),
])
def test_bad_or_foreign_files_get_a_message(shipped_site: str, tab: Tab, tmp_path: Path,
                                            content: str, says: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    page = tab.goto(shipped_site + CAPSULE)
    load(page, bad)
    page.wait_for_function(
        "document.querySelector('[data-compare-status]').textContent.includes('was not read')")
    status = page.inner_text("[data-compare-status]")
    assert says in status and "bad.json was not read" in status, status
    assert page.locator(".fig-compare").count() == 0
    assert page.evaluate("localStorage.getItem('curriculum.compare')") is None


def test_a_bad_case_refuses_the_whole_file(shipped_site: str, tab: Tab, theirs: Any,
                                           tmp_path: Path) -> None:
    _, mine = theirs
    broken = copy.deepcopy(mine)
    broken["cases"][3]["stat"]["median_ms"] = -1
    bad = tmp_path / "broken.json"
    bad.write_text(json.dumps(broken))
    page = tab.goto(shipped_site + CAPSULE)
    load(page, bad)
    page.wait_for_function(
        "document.querySelector('[data-compare-status]').textContent.includes('was not read')")
    assert "has no positive median time" in page.inner_text("[data-compare-status]")
    assert page.locator(".fig-compare").count() == 0


# -- several GPUs in the repository ------------------------------------------------------


@pytest.fixture(scope="module")
def two_gpu_site(tmp_path_factory: pytest.TempPathFactory, serve: Any) -> str:
    from curriculum.build import build

    root = tmp_path_factory.mktemp("two-gpus") / "sample"
    shutil.copytree(SAMPLE, root)
    results = root / "kernels" / "results"
    data = json.loads((results / "test-gpu.json").read_text())
    (results / "other-gpu.json").write_text(json.dumps(slower(data, "other-gpu", "Other GPU", 4.0),
                                                       indent=1))
    out = tmp_path_factory.mktemp("two-gpu-site")
    mp = pytest.MonkeyPatch()
    mp.setenv("SOURCE_DATE_EPOCH", EPOCH)
    try:
        build(root, out_dir=out, templates=TEMPLATES, editions=["public"])
    finally:
        mp.undo()
    return serve(out)


def test_gpu_selector_with_several_results(two_gpu_site: str, tab: Tab) -> None:
    page = tab.goto(two_gpu_site + "public/courses/demo/bandwidth/index.html")
    select = page.locator("[data-compare-show]")
    assert select.is_visible()
    assert "Other GPU" in select.locator("option").all_inner_texts()
    select.select_option("other-gpu")
    mark = page.locator(".fig[data-case='ceiling/copy'] + .fig-compare")
    assert mark.inner_text().strip().startswith("(Other GPU: ") and "TB/s" in mark.inner_text()
    select.select_option("")
    assert page.locator(".fig-compare").count() == 0


def test_the_measurements_page_shows_the_dropped_cases(shipped_site: str, shipped_build: Path,
                                                       tab: Tab, theirs: Any) -> None:
    if not (shipped_build / "public" / "measurements" / "index.html").is_file():
        pytest.skip("this build has no measurements page")
    path, mine = theirs
    page = tab.goto(shipped_site + "public/measurements/index.html")
    load(page, path)
    page.wait_for_selector("table.measurements .fig-compare")
    row = page.locator("table.measurements tr[data-case]").first
    case_id, shape = row.get_attribute("data-case"), row.get_attribute("data-shape")
    want = expected(mine, case_id, "us", shape)
    assert row.locator("td.n").first.locator(".fig-compare").inner_text().strip() == f"({NAME}: {want})"
