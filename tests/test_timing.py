"""timing.py's stopping rules: the early stop on a precise median, the ≥ 7-block floor, the median interval."""
from __future__ import annotations

import itertools
import time
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import binom

from adcompare.analysis.significance import ALPHA, best_p
from adcompare.model.timing_policy import (
    BUDGET_SLOW_SAMPLES,
    REPORT_MAX_TIME,
    REPORT_MIN_TIME,
    REPORT_SLOW_SAMPLES,
    REPORT_WARMUP_TIME,
    TimingPolicy,
    budget_policy,
    report_policy,
)
from adcompare.plugin.adapter import Prepared
from adcompare.run.timing import measure, median_interval, precise


def _work():
    return float(np.sum(np.arange(2000.0) ** 2))


@pytest.mark.parametrize("n", [7, 8, 10, 15, 20, 31, 50, 100])
def test_median_interval_ranks_cover_at_least_95_percent(n):
    low, high = median_interval(list(range(n)))
    assert low == n - 1 - high  # symmetric ranks
    assert binom.cdf(high, n, 0.5) - binom.cdf(low, n, 0.5) >= 0.95
    assert low + 1 > high - 1 or binom.cdf(high - 1, n, 0.5) - binom.cdf(low + 1, n, 0.5) < 0.95  # narrowest


@pytest.mark.parametrize("n", [101, 300, 1000, 5000])
def test_large_samples_use_a_normal_approximation_that_still_covers(n):
    low, high = median_interval(list(range(n)))
    assert 0.95 <= binom.cdf(high, n, 0.5) - binom.cdf(low, n, 0.5) < 0.98


def test_precise_needs_min_samples_and_a_tight_interval():
    policy = TimingPolicy(precision=0.02)
    assert not precise([1.0] * 6, policy)
    assert precise([1.0, 1.01, 0.99, 1.0, 1.005, 0.995, 1.0], policy)
    assert not precise([1.0, 1.2, 0.8, 1.0, 1.1, 0.9, 1.0], policy)


def test_a_precise_cell_stops_before_min_time_with_seven_blocks():
    policy = TimingPolicy(warmup_time=0.0, block_time=0.001, min_time=60.0, max_time=120.0, precision=1e6)
    timing = measure(Prepared(_work), lambda out: None, 0.0, compiled=False, policy=policy)
    assert len(timing.samples) == 7  # any interval is precise enough; the 7-block floor holds


def test_without_precision_the_floor_of_seven_blocks_outlasts_max_time():
    policy = TimingPolicy(warmup_time=0.0, block_time=0.0, min_time=0.0, max_time=0.0, precision=0.0)
    timing = measure(Prepared(_work), lambda out: None, 0.0, compiled=False, policy=policy)
    assert len(timing.samples) == 7


def test_a_paced_cell_times_a_block_per_go_and_says_when_its_own_rule_is_done():
    """Paced (lockstep.py): each block waits for a go; `done` turns true where the unpaced rule would stop (7 blocks
    here, precision met at once), and the cell goes on timing while told to, and stops when told to."""
    policy = TimingPolicy(warmup_time=0.0, block_time=0.001, min_time=60.0, max_time=120.0, precision=1e6)
    asked: list[tuple] = []

    def pace(done: bool, wall: float | None, cpu: float | None, spent: float) -> bool:
        asked.append((done, wall, cpu, spent))
        return len(asked) <= 10

    timing = measure(Prepared(_work), lambda out: None, 0.0, compiled=False, policy=policy, pace=pace)
    assert len(timing.samples) == len(timing.cpu_samples) == 10
    assert [a[0] for a in asked] == [False] * 7 + [True] * 4  # asked before each block, once more to hear "stop"
    # Each turn after the first reports the block just timed, and the seconds the blocks took so far.
    assert asked[0][1:] == (None, None, 0.0)
    assert [a[1] for a in asked[1:]] == list(timing.samples) and [a[2] for a in asked[1:]] == list(timing.cpu_samples)
    # Each block adds its whole time, at least its per-call sample (number ≥ 1, and number may change between
    # blocks); all of it within the time the measurement took.
    spent = [0.0] + [a[3] for a in asked[1:]]
    assert all(b - a >= sample for a, b, sample in zip(spent, spent[1:], timing.samples))
    assert spent[-1] <= timing.total_seconds


def test_a_paced_cell_stops_when_told_even_before_its_rule_is_done():
    policy = TimingPolicy(warmup_time=0.0, block_time=0.001, min_time=60.0, max_time=120.0, precision=0.0)
    answers = iter([True, True, True, False])
    timing = measure(Prepared(_work), lambda out: None, 0.0, compiled=False, policy=policy,
                     pace=lambda *turn: next(answers))
    assert len(timing.samples) == 3


def test_blocks_grow_to_their_length_when_the_warm_up_calls_were_slower_than_steady_state():
    """Warm-up calls of 20 ms calibrate one call a block; a cell that then runs in µs would be timed in blocks of
    one call (timer overhead and a cold start in every sample, thousands of blocks): `number` grows instead."""
    calls = itertools.count()

    def run():
        if next(calls) < 3:  # the two warm-up calls and the first timed one
            time.sleep(0.02)
        return _work()

    policy = TimingPolicy(warmup_time=0.0, block_time=0.01, min_time=0.2, max_time=1.0, precision=0.0)
    timing = measure(Prepared(run), lambda out: None, 0.0, compiled=False, policy=policy)
    assert timing.warmup_calls == 2 and timing.number > 10
    assert len(timing.samples) < 100  # blocks of about block_time, not of one call


def _sleeper(seconds: float):
    def run():
        time.sleep(seconds)
    return Prepared(run)


def test_a_slow_cell_is_timed_without_warm_up_one_call_per_block_until_its_deadline():
    """Rule 7: a first call and a second call over the block allotment make a slow cell: every call after the
    first is a sample (none a warm-up), each reported as it finishes, until the next would end past the deadline."""
    policy = TimingPolicy(max_time=0.07, min_samples=7)  # allots 10 ms to a block
    reported: list[tuple[float, float]] = []
    timing = measure(_sleeper(0.03), lambda out: None, 0.03, compiled=False, policy=policy,
                     deadline=time.perf_counter() + 0.1, on_call=lambda wall, cpu: reported.append((wall, cpu)))
    assert timing.warmup_calls == 0 and timing.number == 1 and timing.stopped == "deadline"
    assert 1 <= len(timing.samples) < 7 and list(timing.samples) == [wall for wall, _ in reported]
    assert all(s >= 0.03 for s in timing.samples)
    unbounded = measure(_sleeper(0.03), lambda out: None, 0.03, compiled=False, policy=policy)
    assert len(unbounded.samples) == 7 and unbounded.stopped == ""  # no deadline: min_samples (hard_limit 20 s)


def test_a_budgeted_run_times_a_slow_cell_with_three_calls_and_a_fast_one_as_before():
    """A --max-time run's policy (budget_policy) keeps three calls of a slow cell, not seven: not cut short, so no
    `stopped`; three samples still have an interval. Fast cells keep the rank test's seven blocks."""
    budget = replace(budget_policy(True), max_time=0.07)  # allots 10 ms to a block
    assert budget_policy(False) == TimingPolicy() and budget.slow_samples == BUDGET_SLOW_SAMPLES == 3
    slow = measure(_sleeper(0.03), lambda out: None, 0.03, compiled=False, policy=budget)
    assert len(slow.samples) == 3 and slow.stopped == "" and not slow.few_samples
    # the budget policy as a run gets it (0.29 s a block): a 1 ms call stays fast however busy the machine
    fast = measure(_sleeper(0.001), lambda out: None, 0.001, compiled=False, policy=budget_policy(True))
    assert len(fast.samples) >= 7 and fast.warmup_calls >= 1


def test_a_first_call_slow_only_because_it_compiled_leaves_the_cell_on_the_usual_rule():
    policy = TimingPolicy(warmup_time=0.0, block_time=0.001, min_time=0.0, max_time=0.07, precision=1e6)
    timing = measure(Prepared(_work), lambda out: None, 5.0, compiled=True, policy=policy)
    assert timing.warmup_calls >= 2 and timing.number > 1 and timing.stopped == ""
    assert timing.compile_method == "first call minus steady state"


def test_the_report_policy_times_a_fast_cell_with_the_blocks_the_rank_test_needs_and_a_slow_one_with_five_calls():
    """`adcompare report`'s own quick-suite run (report_policy): a fast call gets min_samples blocks of block_time
    (70 ms) after a 20 ms warm-up, not 0.2 s of blocks after 50 ms; a call over 50 ms is slow (rule 7) and gets five
    calls without a warm-up, enough for the rank test against a fast rival; its header says so in words
    (TimingPolicy.describe)."""
    quick = report_policy()
    assert quick == replace(TimingPolicy(), min_time=REPORT_MIN_TIME, warmup_time=REPORT_WARMUP_TIME,
                            max_time=REPORT_MAX_TIME, slow_samples=REPORT_SLOW_SAMPLES)
    assert REPORT_MIN_TIME == pytest.approx(quick.min_samples * quick.block_time) and REPORT_WARMUP_TIME == 0.02
    assert quick.block_allotment == pytest.approx(0.05) and REPORT_SLOW_SAMPLES == 5
    assert best_p(REPORT_SLOW_SAMPLES, quick.min_samples) < best_p(REPORT_SLOW_SAMPLES, REPORT_SLOW_SAMPLES) < ALPHA / 6
    timing = measure(_sleeper(0.0005), lambda out: None, 0.0005, compiled=False, policy=quick)
    assert len(timing.samples) >= quick.min_samples and timing.warmup_calls >= 2
    slow = measure(_sleeper(0.06), lambda out: None, 0.06, compiled=False, policy=quick)  # a sleep never ends early
    assert len(slow.samples) == 5 and slow.warmup_calls == 0 and slow.number == 1 and slow.stopped == ""
    assert "for at least 0.07 s and 7 blocks" in quick.describe() and "after a 0.02 s warm-up" in quick.describe()
    assert "a call over 0.05 s) is timed with 5 calls" in quick.describe()
    assert "for at least 0.2 s and 7 blocks" in TimingPolicy().describe()
    assert "timed with 3 calls" in budget_policy(True).describe() and "0.29 s" in budget_policy(True).describe()
