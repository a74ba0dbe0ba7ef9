"""Ranking timings without ranking noise: a seeded bootstrap confidence interval of the ratio of medians.

For two cells A (the faster median) and B we resample each one's per-block samples with replacement, take the
median of each resample, and form median(B*) / median(A*) for RESAMPLES pairs; the central 95 % of those ratios is
the interval. If it contains 1 the page says "no clear winner". Resampling is seeded from the cell key, so a
report is reproducible and does not depend on the order cells were read in.

Shortcut, exact rather than approximate: a resample's median lies between the sample's min and max, so when every
sample of A is below every sample of B each bootstrap ratio exceeds 1 and the interval cannot contain 1; such
pairs skip the resampling (which is what keeps a 10,000-cell report fast) and report the interval from the
extreme samples' ratios, which bound every bootstrap ratio.

No ratio is formed (None: "too few samples to tell") when a side has fewer than MIN_SAMPLES samples, or when the
reference cell (the denominator) has a block timed at zero — a timer coarser than the call, whose ratio is
unbounded. Ratios of extreme but finite times that exceed a float are capped at the largest float, never an
OverflowError. Large samples (pytest-benchmark keeps thousands of rounds) are resampled in chunks, so memory stays
bounded.
"""
from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from adcompare.model.measurement import FEW_SAMPLES, Timing

RESAMPLES = 2000
LEVEL = 0.95
SEED = 20240607
METHOD = (f"95 % percentile bootstrap interval of the ratio of medians ({RESAMPLES} resamples of the per-block "
          f"samples of each cell, seeded); \"no clear winner\" when the interval contains 1")
MIN_SAMPLES = FEW_SAMPLES  # a timing with fewer has a median and no interval (Timing.few_samples)
CHUNK_VALUES = 2_000_000  # resampled values held at once (16 MB)
FLOAT_MAX = float(np.finfo(float).max)


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
            # np.median adds the two middle values: beyond FLOAT_MAX / 2 that sum is inf, so such times are halved
            # before and doubled after (exact for normal floats; below, untouched as np.median's own)
            half = 2.0 if data.max() > FLOAT_MAX / 2 else 1.0
            rng = np.random.default_rng([SEED, zlib.crc32(key.encode())])
            rows = max(1, min(RESAMPLES, CHUNK_VALUES // data.size))
            parts = [np.median(data[rng.integers(0, data.size, size=(min(rows, RESAMPLES - done), data.size))] / half,
                               axis=1) for done in range(0, RESAMPLES, rows)]
            self._medians[key] = np.concatenate(parts) * half
        return self._medians[key]

    def ratio(self, fast_key: str, fast: Timing, slow_key: str, slow: Timing) -> Ratio | None:
        """slow ÷ fast (ratio of medians); None when either cell has too few samples to say anything, or the
        reference cell has a zero-time block (no ratio can be formed)."""
        if len(fast.samples) < MIN_SAMPLES or len(slow.samples) < MIN_SAMPLES or fast.min <= 0:
            return None
        point = _divide(slow.median, fast.median)
        fast_samples, slow_samples = fast.samples, slow.samples
        if max(fast_samples) < min(slow_samples):
            return Ratio(point, _divide(min(slow_samples), max(fast_samples)),
                         _divide(max(slow_samples), min(fast_samples)), resampled=False)
        with np.errstate(over="ignore"):
            ratios = np.minimum(self.medians(slow_key, slow_samples) / self.medians(fast_key, fast_samples),
                                FLOAT_MAX)
        tail = (1 - LEVEL) / 2 * 100
        low, high = np.percentile(ratios, [tail, 100 - tail])
        return Ratio(point, float(low), float(high), resampled=True)


def _divide(a: float, b: float) -> float:
    """a / b for b > 0, capped at the largest float (1e300 / 1e-12 would be inf)."""
    return min(a / b, FLOAT_MAX)
