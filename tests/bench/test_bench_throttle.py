"""Throttle-aware runs: a case measured under power or thermal throttling is measured again
once after a cool-down, and flagged in the results (and on the page) if it stays throttled."""

from __future__ import annotations

from pathlib import Path

from fakebench import FakeBackend, fake_root_fixture, options  # noqa: F401 (fixture)

from curriculum.bench.runner import SilentReporter, _Harness, run_bench
from curriculum.measure import _provenance
from curriculum.results import Clocks, read_results


class ThrottledFirst(FakeBackend):
    """Throttled for the first `reads` clock readings, clean after."""

    def __init__(self, reads: int, reasons: list[str]) -> None:
        super().__init__()
        self.left = reads
        self.reasons = reasons
        self.reads = 0

    def clocks(self) -> Clocks:
        self.reads += 1
        if self.left > 0:
            self.left -= 1
            return Clocks(sm_mhz=1500, mem_mhz=3201, throttle_reasons=list(self.reasons))
        return Clocks(sm_mhz=1980, mem_mhz=3201, throttle_reasons=[])


def test_throttled_case_is_measured_again_after_a_cool_down(
    root: Path, monkeypatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(_Harness, "__init__", _recording_init(slept))
    backend = ThrottledFirst(reads=1, reasons=["sw_power_cap"])
    s = run_bench(options(root, only="fake/01_*", cool_down_s=2.5), backend, SilentReporter())
    first = next(o for o in s.outcomes if o.status == "recorded")
    assert slept == [2.5]  # only the first case saw throttled clocks
    assert any("measured again after 2.5 s with clean clocks" in m for m in first.messages)
    results = read_results(s.results_path)
    again = [c for c in results.cases if c.remeasured]
    assert len(again) == 1 and not again[0].throttled and again[0].throttle_reasons == []
    assert again[0].clocks_before.sm_mhz == 1980  # the clocks of the measurement kept


def test_still_throttled_is_flagged_with_reasons_and_shown(root: Path) -> None:
    backend = FakeBackend(throttle=["hw_thermal_slowdown", "gpu_idle"])
    s = run_bench(options(root, only="fake/01_*"), backend, SilentReporter())
    case = read_results(s.results_path).cases[0]
    assert case.throttled and case.remeasured
    assert case.throttle_reasons == ["hw_thermal_slowdown"]  # idle is not a throttle
    text = _provenance(case, read_results(s.results_path).runs[case.run])
    assert "measured while throttled: hw_thermal_slowdown" in text


def test_clean_clocks_are_not_measured_again(root: Path) -> None:
    backend = FakeBackend(throttle=["gpu_idle"])
    s = run_bench(options(root, only="fake/01_*"), backend, SilentReporter())
    cases = read_results(s.results_path).cases
    assert not any(c.remeasured or c.throttled for c in cases)


def _recording_init(slept: list[float]):
    original = _Harness.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.sleep = slept.append

    return init
