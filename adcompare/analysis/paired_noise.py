"""The A/B gate's noise model: how much one paired round of a run wanders, pooled over the run's cells.

In an A/B run (`run --env base=@PY --env new=@PY --rounds N`) round r of a cell's two sides was timed in lockstep
(run/lockstep.py), so the load that drifts between runs, and from one block to the next, cancels in the paired ratio
candidate_r ÷ baseline_r — but what differs between two fresh worker processes does not: the same cell in two
processes started at one moment runs a few per cent apart (its arrays', its compiled code's place in memory), and a
block preempted on one side only adds to it. On the shared 2-core machine at load 2–5 one paired round's log ratio
wandered by σ ≈ 0.06 in honest runs (the same code on both sides; ≈ 0.03 of it within a round, the rest between
process pairs), against σ ≈ 0.17–0.24 when the sides were timed one after the other, seconds apart. Three rounds of
one cell cannot estimate that spread; the run's other cells can. So it is pooled: every cell's log paired ratios
minus that cell's mean, as a robust standard deviation (1.4826 × the median absolute residual, scaled by √(n/(n−1))
for the mean taken out), over all cells of the comparison on one clock and over each class of cells (adapter and
variant); a cell is judged with the larger of the two, so a noisy class is not judged by the quiet ones (most cells
are unchanged, and a changed cell shifts its own mean, not its spread).

Cells of one class do not wander alike, though: on the quick suite at load 5–8 (issue 23, benchmarks/results/gate/
quick/) a few cells per run had one or two paired rounds 20–80 % off — a µs cell whose CPU time per call doubles
within a round — while their class's σ was 4–6 %, and those were the gate's false alarms. Three rounds cannot
show a cell's own spread, but its 30–50 paired blocks a round can: a cell is judged with its class's σ times its
block spread ÷ its class's median block spread, where that exceeds 1 (comparison.block_spread). The quiet half of
every class is judged exactly as before.

A cell's mean log ratio then has the standard error σ/√n, and the gate's bar is z standard errors, z from a
Bonferroni bound over the cells compared (5 % family-wise, two-sided, Gaussian): a cell is slower when its interval
exp(mean ± z·σ/√n) lies above 1, its ratio exp(mean) above 1 + threshold, and every paired round agrees in
direction (comparison.PairedDifference). The bar follows the load: a noisy run flags less and says the smallest
slowdown it could still have caught (`resolution`).

A first decision over hundreds of cells still flags a cell now and then whose noise that model underrates (a
round 80 % off at load 5–9). `run --confirm PCT` times the flagged cells again in as many fresh paired rounds,
and `compare` counts a cell changed only when those rounds, decided alone against the same noise, flag it too —
with the bar set by Bonferroni over the cells confirmed, not over all (`for_cells`): the first decision chose
them, the second tests only them.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

FAMILY_ALPHA = 0.05  # family-wise false-alarm rate the bar is set for, under the Gaussian model
MIN_POOLED_CELLS = 10  # fewer paired cells than this and the pooled spread would be a few cells' own: not pooled
MIN_CLASS_CELLS = 2  # a class of fewer cells is judged with the run's spread alone


def bar(cells: int) -> float:
    """Standard errors a cell's mean must clear when `cells` are decided at once: Bonferroni, two-sided, Gaussian."""
    return statistics.NormalDist().inv_cdf(1 - FAMILY_ALPHA / (2 * max(cells, 1)))


def spread(log_ratios: Sequence[Sequence[float]]) -> float:
    """Robust standard deviation of one round's log ratio around its cell's mean, over the cells given."""
    residuals = []
    for ratios in log_ratios:
        mean = statistics.fmean(ratios)
        scale = math.sqrt(len(ratios) / (len(ratios) - 1))  # the mean taken out shrinks the residuals
        residuals += [abs(r - mean) * scale for r in ratios]
    return 1.4826 * statistics.median(residuals)


@dataclass(frozen=True)
class PairedNoise:
    """The pooled spread of one paired round's log ratio on one clock, overall and per class, and the bar."""

    sigma: float  # robust standard deviation of one paired round's log ratio, over every cell
    cells: int  # cells pooled
    rounds: int  # paired rounds per cell (the most common count)
    z: float  # standard errors a cell's mean must clear
    clock: str
    classes: Mapping[str, float] = field(default_factory=dict)  # class → its spread (classes of ≥ 2 cells)
    # class → the median block spread of its cells (comparison.block_spread; classes of ≥ 2 cells with blocks)
    block_spreads: Mapping[str, float] = field(default_factory=dict)

    def for_cells(self, cells: int) -> "PairedNoise":
        """The same noise, with the bar for deciding `cells` cells at once (a confirmation's)."""
        return replace(self, z=bar(cells))

    def factor(self, cls: str, block_spread: float | None) -> float:
        """How much more than its class a cell's paired rounds are taken to wander: its block spread ÷ its class's
        median block spread, at least 1 (1 without blocks)."""
        typical = self.block_spreads.get(cls, 0.0)
        return max(1.0, block_spread / typical) if block_spread is not None and typical > 0 else 1.0

    def sigma_of(self, cls: str, block_spread: float | None = None) -> float:
        """The spread a cell of class `cls` is judged with: its class's or the run's, whichever is larger, times
        the cell's factor."""
        return max(self.sigma, self.classes.get(cls, 0.0)) * self.factor(cls, block_spread)

    def half_width(self, rounds: int, cls: str = "", block_spread: float | None = None) -> float:
        """z standard errors of the mean log ratio of `rounds` paired rounds of a cell of class `cls`."""
        return self.z * self.sigma_of(cls, block_spread) / math.sqrt(rounds)

    def resolution(self, threshold: float, cls: str = "", block_spread: float | None = None) -> float:
        """The smallest slowdown (fraction) a cell of class `cls` with the usual round count could be flagged at:
        its mean must clear both the threshold and z standard errors."""
        return max(1 + threshold, math.exp(self.half_width(self.rounds, cls, block_spread))) - 1

    def describe(self, threshold: float) -> str:
        by_class = ", ".join(f"{c} {s:.0%}" for c, s in sorted(self.classes.items(), key=lambda kv: kv[1]))
        worst = max([self.sigma, *self.classes.values()])
        worst_resolution = max(1 + threshold, math.exp(self.z * worst / math.sqrt(self.rounds))) - 1
        return (f"paired noise: one paired round wanders by {self.sigma:.1%} (log ratio, pooled over {self.cells} "
                f"cells, {self.clock}; by class {by_class}); a cell must clear {self.z:.2f} standard errors of its "
                f"{self.rounds}-round mean: slowdowns from {self.resolution(threshold):.0%} (the quietest cells) "
                f"to {worst_resolution:.0%} can be caught in this run (cells whose blocks wander more than their "
                f"class's: less)")

    def to_json(self) -> dict:
        return {"sigma": self.sigma, "cells": self.cells, "rounds": self.rounds, "z": self.z, "clock": self.clock,
                "classes": dict(self.classes), "block_spreads": dict(self.block_spreads)}


def pooled(log_ratios: Sequence[Sequence[float]], clock: str, classes: Sequence[str] = (),
           block_spreads: Sequence[float | None] = ()) -> PairedNoise | None:
    """The pooled noise of cells' log paired ratios (each cell's rounds; `classes`: each cell's class, e.g.
    "torch eager"; `block_spreads`: each cell's block spread or None), or None for fewer than MIN_POOLED_CELLS
    cells with 2 rounds or more."""
    labels = list(classes) or [""] * len(log_ratios)
    blocks = list(block_spreads) or [None] * len(log_ratios)
    usable = [(r, c, b) for r, c, b in zip(log_ratios, labels, blocks) if len(r) >= 2]
    if len(usable) < MIN_POOLED_CELLS:
        return None
    by_class: dict[str, list[Sequence[float]]] = {}
    spreads: dict[str, list[float]] = {}
    for ratios, cls, block in usable:
        by_class.setdefault(cls, []).append(ratios)
        if block is not None:
            spreads.setdefault(cls, []).append(block)
    z = bar(len(usable))
    rounds = statistics.mode(len(r) for r, _, _ in usable)
    return PairedNoise(spread([r for r, _, _ in usable]), len(usable), rounds, z, clock,
                       {c: spread(rs) for c, rs in by_class.items() if c and len(rs) >= MIN_CLASS_CELLS},
                       {c: statistics.median(bs) for c, bs in spreads.items() if len(bs) >= MIN_CLASS_CELLS})
