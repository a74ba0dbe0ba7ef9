"""The A/B gate's noise model: how much one paired round of a run wanders, pooled over the run's cells.

In an A/B run (`run --env base=@PY --env new=@PY --rounds N`) round r of a cell's two sides ran seconds apart, so
the load that drifts between runs cancels in the paired ratio candidate_r ÷ baseline_r — but the spread between
two worker processes at one moment does not: on the shared 2-core machine at load 5–6 one paired round's log
ratio wandered by σ ≈ 0.15–0.20 in an honest run (the same code on both sides), at load 1–2 by a few percent. Three
rounds of one cell cannot estimate that spread; the run's other cells can. So the spread is pooled: every cell's
log paired ratios minus that cell's mean, over all cells of the comparison on one clock (most cells are unchanged,
and a changed cell shifts its own mean, not its spread), as a robust standard deviation (1.4826 × the median
absolute residual, scaled by √(n/(n−1)) for the mean taken out).

A cell's mean log ratio then has the standard error σ/√n, and the gate's bar is z standard errors, z from a
Bonferroni bound over the cells compared (5 % family-wise, two-sided, Gaussian): a cell is slower when its interval
exp(mean ± z·σ/√n) lies above 1 + threshold, and every paired round agrees in direction. The bar follows the
load: a noisy run flags less and says the smallest slowdown it could still have caught (`resolution`).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

FAMILY_ALPHA = 0.05  # family-wise false-alarm rate the bar is set for, under the Gaussian model
MIN_POOLED_CELLS = 10  # fewer paired cells than this and the pooled spread would be a few cells' own: not pooled


@dataclass(frozen=True)
class PairedNoise:
    """The pooled spread of one paired round's log ratio on one clock, and the bar it sets."""

    sigma: float  # robust standard deviation of one paired round's log ratio
    cells: int  # cells pooled
    rounds: int  # paired rounds per cell (the most common count)
    z: float  # standard errors a cell's mean must clear
    clock: str

    def half_width(self, rounds: int) -> float:
        """z standard errors of the mean log ratio of `rounds` paired rounds."""
        return self.z * self.sigma / math.sqrt(rounds)

    def resolution(self, threshold: float) -> float:
        """The smallest slowdown (fraction) a cell with the usual round count could be flagged at."""
        return (1 + threshold) * math.exp(self.half_width(self.rounds)) - 1

    def describe(self, threshold: float) -> str:
        return (f"paired noise: one paired round wanders by {self.sigma:.1%} (log ratio, pooled over {self.cells} "
                f"cells, {self.clock}); a cell must clear {self.z:.2f} standard errors of its {self.rounds}-round "
                f"mean: slowdowns from {self.resolution(threshold):.0%} can be caught in this run")

    def to_json(self) -> dict:
        return {"sigma": self.sigma, "cells": self.cells, "rounds": self.rounds, "z": self.z, "clock": self.clock}


def pooled(log_ratios: Sequence[Sequence[float]], clock: str) -> PairedNoise | None:
    """The pooled noise of cells' log paired ratios (each cell's rounds), or None for fewer than MIN_POOLED_CELLS
    cells with 2 rounds or more."""
    usable = [r for r in log_ratios if len(r) >= 2]
    if len(usable) < MIN_POOLED_CELLS:
        return None
    residuals = []
    for ratios in usable:
        mean = statistics.fmean(ratios)
        scale = math.sqrt(len(ratios) / (len(ratios) - 1))  # the mean taken out shrinks the residuals
        residuals += [abs(r - mean) * scale for r in ratios]
    sigma = 1.4826 * statistics.median(residuals)
    z = statistics.NormalDist().inv_cdf(1 - FAMILY_ALPHA / (2 * len(usable)))
    rounds = statistics.mode(len(r) for r in usable)
    return PairedNoise(sigma, len(usable), rounds, z, clock)
