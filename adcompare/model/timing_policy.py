"""How long to time a cell: warm-up, block length, minimum and maximum time, the samples the rank test needs and
the precision at which timing stops early. run/timing.py applies it; the estimate (study/estimate.py) models it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TimingPolicy:
    warmup_time: float = 0.05
    block_time: float = 0.01
    min_time: float = 0.2
    max_time: float = 2.0
    min_samples: int = 7  # the rank test of significance.py needs ≥ 7 blocks a side to decide at 0.05
    max_number: int = 1_000_000
    precision: float = 0.02  # early stop once the median's 95 % interval is within ±2 %
    hard_limit: float = 20.0  # seconds: stop even with fewer than min_samples blocks (unless a deadline is known)
    # Calls a slow cell (a call over `block_allotment`) is timed with, after its checked first call: min_samples for the
    # rank test, REPORT_SLOW_SAMPLES in the report's own quick suite, or BUDGET_SLOW_SAMPLES in a run with a time budget
    # (three still give a median and an interval, not a rank-test verdict between two such cells:
    # significance.best_p(3, 3) = 0.1)
    slow_samples: int = 7

    @property
    def block_allotment(self) -> float:
        """Seconds a block may take for `min_samples` of them to fit in `max_time`: a cell whose call takes longer
        is slow (timing.py times it without a warm-up call, one call per block)."""
        return self.max_time / self.min_samples

    def describe(self) -> str:
        """The policy in words, as the results header records it (provenance `timing_policy`)."""
        return (f"steady state in {self.block_time * 1e3:g} ms blocks for at least {self.min_time:g} s and "
                f"{self.min_samples} blocks (early stop once the median is within ±{self.precision:.0%}; at most "
                f"{self.max_time:g} s), after a {self.warmup_time:g} s warm-up; a slow cell (a call over "
                f"{self.block_allotment:.2f} s) is timed with {self.slow_samples} calls")


# A `--max-time` run times a slow cell with this many calls, not min_samples: a budget buys more cells so. GradBench's
# own evals time a call until one run and one second have passed (--min-runs 1 --min-seconds 1), ADBench's until ten
# runs or its time limit; three calls keep a median, a minimum and an interval (measurement.FEW_SAMPLES).
BUDGET_SLOW_SAMPLES = 3


# `adcompare report` given no results times the quick suite as a first look at every finding, within about 150 s here: a
# fast cell gets the blocks the rank test needs (min_samples of block_time: 70 ms) after a 20 ms warm-up (at least two
# calls; one where a call takes over REPORT_MAX_TIME ÷ 8, 44 ms: rule 2), not 0.2 s of blocks after 50 ms
# (torch.utils.benchmark's blocked_autorange runs 0.2 s; Google Benchmark warms up for 0 s by default). 313 of the quick
# suite's 348 timed cells are fast cells, which stop there: 0.25 s of timing each became 0.09 s. A call over 50 ms
# (REPORT_MAX_TIME ÷ min_samples) makes a slow cell, timed with five calls and no warm-up (rule 7 of run/timing.py), not
# two warm-up calls and seven blocks: the quick suite's ~22 such cells spent 13-15 s of the report's ~155 s on the calls
# this drops (2026-11-28, recomputed from four reports' records). Five calls still rank against seven
# (significance.best_p(5, 7) = 0.0025) and against five (0.008, where the two cells' calls do not overlap at all: Holm
# then decides among up to six rivals; one call overlapping gives 0.016, enough among up to three); a budgeted run's
# three (BUDGET_SLOW_SAMPLES) would have saved 7 s more and left two slow rivals unranked (best_p(3, 3) = 0.1).
# `adcompare run --suite quick` keeps the default.
REPORT_MIN_TIME = 0.07
REPORT_WARMUP_TIME = 0.02
REPORT_MAX_TIME = 0.35
REPORT_SLOW_SAMPLES = 5


def report_policy() -> TimingPolicy:
    """The timing policy of the quick suite that `adcompare report` runs when given no results."""
    return TimingPolicy(min_time=REPORT_MIN_TIME, warmup_time=REPORT_WARMUP_TIME, max_time=REPORT_MAX_TIME,
                        slow_samples=REPORT_SLOW_SAMPLES)


def budget_policy(budgeted: bool) -> TimingPolicy:
    """The timing policy of a run with a time budget (`--max-time`), or the default one."""
    return TimingPolicy(slow_samples=BUDGET_SLOW_SAMPLES) if budgeted else TimingPolicy()
