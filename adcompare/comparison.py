"""`adcompare compare`: per matching cell of two results files, the ratio of medians and whether it is noise.

The interval is bootstrap.py's (the report's "no clear winner" uses the same one).
"""
from __future__ import annotations

from dataclasses import dataclass

from .bootstrap import Bootstrap, Ratio
from .cell import Cell
from .results import Results


@dataclass(frozen=True)
class ComparisonRow:
    cell: Cell
    baseline: float
    candidate: float
    ratio: Ratio | None  # candidate ÷ baseline; None when a side has too few samples for an interval

    @property
    def verdict(self) -> str:
        if self.ratio is None:
            return "too few samples to tell"
        if not self.ratio.clear:
            return "same (within noise)"
        return "slower" if self.ratio.ratio > 1 else "faster"

    def to_json(self) -> dict:
        r = self.ratio
        return {"cell": self.cell.to_json(), "key": self.cell.key, "baseline_median": self.baseline,
                "candidate_median": self.candidate, "ratio": self.candidate / self.baseline,
                "low": r.low if r else None, "high": r.high if r else None, "verdict": self.verdict}


def compare(baseline: Results, candidate: Results) -> list[ComparisonRow]:
    before = {m.cell.key: m for m in baseline.measurements if m.timing}
    boot = Bootstrap()
    rows = []
    for m in candidate.measurements:
        a = before.get(m.cell.key)
        if a is None or m.timing is None:
            continue
        ratio = boot.ratio("baseline:" + m.cell.key, a.timing, "candidate:" + m.cell.key, m.timing)
        rows.append(ComparisonRow(m.cell, a.timing.median, m.timing.median, ratio))
    return sorted(rows, key=lambda r: r.cell)
