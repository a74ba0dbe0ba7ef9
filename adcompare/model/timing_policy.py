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
    # Calls a slow cell (a call over `block_allotment`) is timed with, after its checked first call: min_samples for
    # the rank test, or BUDGET_SLOW_SAMPLES in a run with a time budget (three still give a median and an interval,
    # not a rank-test verdict between two such cells: significance.best_p(3, 3) = 0.1)
    slow_samples: int = 7

    @property
    def block_allotment(self) -> float:
        """Seconds a block may take for `min_samples` of them to fit in `max_time`: a cell whose call takes longer
        is slow (timing.py times it without a warm-up call, one call per block)."""
        return self.max_time / self.min_samples


# A `--max-time` run times a slow cell with this many calls, not min_samples: a budget buys more cells so. GradBench's
# own evals time a call until one run and one second have passed (--min-runs 1 --min-seconds 1), ADBench's until ten
# runs or its time limit; three calls keep a median, a minimum and an interval (measurement.FEW_SAMPLES).
BUDGET_SLOW_SAMPLES = 3


def budget_policy(budgeted: bool) -> TimingPolicy:
    """The timing policy of a run with a time budget (`--max-time`), or the default one."""
    return TimingPolicy(slow_samples=BUDGET_SLOW_SAMPLES) if budgeted else TimingPolicy()
