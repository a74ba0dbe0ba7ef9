"""The ratio of two cells' median times with a seeded bootstrap 95% interval, and whether it is beyond noise.

Method: resample each cell's per-call samples with replacement, take the ratio of the two medians, repeat; the
2.5th and 97.5th percentiles bound the ratio. An interval that contains 1 means "no clear winner".
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

METHOD = "bootstrap 95% interval of the ratio of medians (2,000 seeded resamples)"


@dataclass(frozen=True)
class Ratio:
    ratio: float  # median(b) / median(a)
    low: float
    high: float

    @property
    def clear(self) -> bool:
        """True when the interval excludes 1: one side is faster beyond the measured noise."""
        return self.low > 1.0 or self.high < 1.0


def median_ratio(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0) -> Ratio:
    a, b = np.asarray(a, float), np.asarray(b, float)
    rng = np.random.default_rng(seed)
    ma = np.median(a[rng.integers(0, len(a), (resamples, len(a)))], axis=1)
    mb = np.median(b[rng.integers(0, len(b), (resamples, len(b)))], axis=1)
    ratios = mb / ma
    low, high = np.percentile(ratios, [2.5, 97.5])
    return Ratio(float(np.median(b) / np.median(a)), float(low), float(high))
