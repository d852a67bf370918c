"""Statistics and the stopping rule of the one timing function."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import numpy
import pytest

from curriculum.bench.timing import TimingPolicy, is_stable, percentile, summarize, time_call


class ScriptedTimer:
    """Returns scripted durations; the virtual clock advances by each one."""

    def __init__(self, durations: Iterator[float]) -> None:
        self.durations = durations
        self.now = 0.0
        self.flushes = 0
        self.calls = 0

    def clock(self) -> float:
        return self.now

    def flush_l2(self) -> None:
        self.flushes += 1

    def elapsed_ms(self, fn: Callable[[], None]) -> float:
        self.flush_l2()
        fn()
        self.calls += 1
        ms = next(self.durations)
        self.now += ms * 1e-3
        return ms


@pytest.mark.parametrize("q", [0, 10, 20, 50, 80, 99.5, 100])
def test_percentile_matches_numpy_linear(q: float) -> None:
    data = sorted(numpy.random.default_rng(3).random(37).tolist())
    assert percentile(data, q) == pytest.approx(float(numpy.percentile(data, q)))


def test_summarize_keeps_raw_order_and_spread() -> None:
    stat = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert stat.median_ms == 3.0
    assert stat.p20_ms == pytest.approx(1.8)
    assert stat.p80_ms == pytest.approx(4.2)
    assert (stat.min_ms, stat.max_ms, stat.samples) == (1.0, 5.0, 5)
    assert stat.raw_ms == [5.0, 1.0, 3.0, 2.0, 4.0]


def test_summarize_refuses_no_samples() -> None:
    with pytest.raises(ValueError):
        summarize([])


def test_is_stable_compares_median_before_and_after_last_batch() -> None:
    assert is_stable([1.0] * 30, batch=10, rel_tol=0.005)
    # one slow batch does not move a median of three batches: that is the point of it
    assert is_stable([1.0] * 20 + [2.0] * 10, batch=10, rel_tol=0.005)
    assert not is_stable([1.0] * 20 + [2.0] * 20, batch=20, rel_tol=0.005)
    assert not is_stable([1.0] * 20 + [1.01] * 20, batch=20, rel_tol=0.001)
    assert not is_stable([1.0] * 10, batch=10, rel_tol=0.005)


def test_constant_durations_stop_after_one_batch_past_minimum() -> None:
    policy = TimingPolicy(warmup_ms=1.0, warmup_launches=3, min_samples=20, batch=10)
    timer = ScriptedTimer(itertools.repeat(0.5))
    stat = time_call(lambda: None, timer, policy, clock=timer.clock)
    assert stat.samples == 30
    assert stat.median_ms == 0.5
    # warm-up: at least 3 launches and 1 ms -> 3 launches of 0.5 ms
    assert timer.calls == 30 + 3
    assert timer.flushes == timer.calls  # the L2 is flushed before every repetition


def test_warmup_runs_for_its_time() -> None:
    policy = TimingPolicy(warmup_ms=25.0, warmup_launches=3, min_samples=20, batch=10)
    timer = ScriptedTimer(itertools.repeat(1.0))
    stat = time_call(lambda: None, timer, policy, clock=timer.clock)
    assert timer.calls - stat.samples == 25


def test_drifting_durations_run_until_max_samples() -> None:
    policy = TimingPolicy(warmup_ms=0.0, min_samples=20, batch=10, max_samples=100)
    timer = ScriptedTimer(1.0 + 0.05 * i for i in itertools.count())
    stat = time_call(lambda: None, timer, policy, clock=timer.clock)
    assert stat.samples == 100


def test_time_cap_stops_and_keeps_what_was_measured() -> None:
    policy = TimingPolicy(warmup_ms=0.0, min_samples=20, batch=10, time_cap_s=1.0)
    timer = ScriptedTimer(100.0 + i for i in itertools.count())  # 100 ms each, drifting
    stat = time_call(lambda: None, timer, policy, clock=timer.clock)
    assert 5 <= stat.samples <= 10
    assert stat.raw_ms == sorted(stat.raw_ms)


def test_settles_once_noise_averages_out() -> None:
    rng = numpy.random.default_rng(0)
    policy = TimingPolicy(warmup_ms=0.0, min_samples=20, batch=10, rel_tol=0.005)
    timer = ScriptedTimer(iter((1.0 + 0.01 * rng.standard_normal(10_000)).tolist()))
    stat = time_call(lambda: None, timer, policy, clock=timer.clock)
    assert stat.samples < 1000
    assert stat.median_ms == pytest.approx(1.0, rel=0.01)
    assert stat.p20_ms <= stat.median_ms <= stat.p80_ms
