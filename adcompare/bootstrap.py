"""Ranking timings without ranking noise: a seeded bootstrap confidence interval of the ratio of medians.

For two cells A (the faster median) and B we resample each one's per-block samples with replacement, take the
median of each resample, and form median(B*) / median(A*) for RESAMPLES pairs; the central 95 % of those ratios is
the interval. If it contains 1 the page says "no clear winner". Resampling is seeded from the cell key, so a
report is reproducible and does not depend on the order cells were read in.

Shortcut, exact rather than approximate: a resample's median lies between the sample's min and max, so when every
sample of A is below every sample of B each bootstrap ratio exceeds 1 and the interval cannot contain 1; such
pairs skip the resampling (which is what keeps a 10,000-cell report fast) and report the interval from the
extreme samples' ratios, which bound every bootstrap ratio.
"""
from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .measurement import Timing

RESAMPLES = 2000
LEVEL = 0.95
SEED = 20240607
METHOD = (f"95 % percentile bootstrap interval of the ratio of medians ({RESAMPLES} resamples of the per-block "
          f"samples of each cell, seeded); \"no clear winner\" when the interval contains 1")
MIN_SAMPLES = 3


@dataclass(frozen=True)
class Ratio:
    """How many times slower `other` is than the reference cell, with its confidence interval."""

    ratio: float
    low: float
    high: float
    resampled: bool  # False: the samples did not overlap, so the bounds are min/max ratios (see module doc)

    @property
    def clear(self) -> bool:
        return not (self.low <= 1.0 <= self.high)


class Bootstrap:
    """Bootstrap medians per cell, computed once and reused for every pair the cell takes part in."""

    def __init__(self) -> None:
        self._medians: dict[str, np.ndarray] = {}

    def medians(self, key: str, samples: Sequence[float]) -> np.ndarray:
        if key not in self._medians:
            data = np.asarray(samples, dtype=float)
            rng = np.random.default_rng([SEED, zlib.crc32(key.encode())])
            draws = data[rng.integers(0, data.size, size=(RESAMPLES, data.size))]
            self._medians[key] = np.median(draws, axis=1)
        return self._medians[key]

    def ratio(self, fast_key: str, fast: Timing, slow_key: str, slow: Timing) -> Ratio | None:
        """slow ÷ fast (ratio of medians); None when either cell has too few samples to say anything."""
        point = slow.median / fast.median
        fast, slow = fast.samples, slow.samples
        if len(fast) < MIN_SAMPLES or len(slow) < MIN_SAMPLES:
            return None
        if max(fast) < min(slow):
            return Ratio(point, min(slow) / max(fast), max(slow) / min(fast), resampled=False)
        ratios = self.medians(slow_key, slow) / self.medians(fast_key, fast)
        tail = (1 - LEVEL) / 2 * 100
        low, high = np.percentile(ratios, [tail, 100 - tail])
        return Ratio(point, float(low), float(high), resampled=True)
