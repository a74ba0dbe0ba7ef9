"""`adcompare compare`: per matching cell of two results files, the ratio of medians and whether it is noise.

Which cells match is decided in one place, `pairs` (extend it there to pair on more than the cell). Whether a
difference is real is significance.py's test (bootstrap interval, Holm-corrected rank test, effect threshold),
the same one the report ranks with; all matched cells of one compare form one family for Holm's correction.
`regressions` is the CI gate: cells significantly slower by more than a stated percentage.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .bootstrap import Bootstrap
from .cell import Cell
from .measurement import Measurement
from .results import Results
from .significance import NOISE, Difference, judge


@dataclass(frozen=True)
class ComparisonRow:
    cell: Cell
    baseline: float
    candidate: float
    difference: Difference  # candidate ÷ baseline

    @property
    def ratio(self):
        return self.difference.ratio

    @property
    def change(self) -> float:
        return self.candidate / self.baseline

    @property
    def verdict(self) -> str:
        d = self.difference
        if d.ratio is None:
            return "too few samples to tell"
        if not d.significant:
            return f"same ({d.reason})"
        return "slower" if d.ratio.ratio > 1 else "faster"

    def to_json(self) -> dict:
        r, d = self.ratio, self.difference
        return {"cell": self.cell.to_json(), "key": self.cell.key, "baseline_median": self.baseline,
                "candidate_median": self.candidate, "ratio": self.change,
                "low": r.low if r else None, "high": r.high if r else None, "p_value": d.p_value,
                "p_holm": d.p_holm, "threshold": d.threshold, "significant": d.significant, "verdict": self.verdict}


def pairs(baseline: Results, candidate: Results) -> Iterator[tuple[Measurement, Measurement]]:
    """(baseline, candidate) measurements of the same cell, both timed: the one place cells are matched."""
    before = {m.cell.key: m for m in baseline.measurements if m.timing and m.timing.samples}
    for m in candidate.measurements:
        a = before.get(m.cell.key)
        if a is not None and m.timing is not None and m.timing.samples:
            yield a, m


def compare(baseline: Results, candidate: Results, threshold: float = NOISE) -> list[ComparisonRow]:
    """One row per matching timed cell, sorted by cell; `threshold` is the effect (fraction) that counts."""
    boot = Bootstrap()
    matched = sorted(pairs(baseline, candidate), key=lambda p: p[1].cell)
    ratios = [(boot.ratio("baseline:" + b.cell.key, a.timing, "candidate:" + b.cell.key, b.timing),
               a.timing.samples, b.timing.samples) for a, b in matched]
    return [ComparisonRow(b.cell, a.timing.median, b.timing.median, d)
            for (a, b), d in zip(matched, judge(ratios, threshold))]


def regressions(rows: list[ComparisonRow]) -> list[ComparisonRow]:
    """Cells significantly slower by more than the rows' threshold, worst first."""
    slow = [r for r in rows if r.difference.significant and r.change > 1]
    return sorted(slow, key=lambda r: -r.change)
