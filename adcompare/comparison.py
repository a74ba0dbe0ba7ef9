"""`adcompare compare`: per matching cell of two results files, the ratio of medians and whether it is noise."""
from __future__ import annotations

from dataclasses import dataclass

from .cell import Cell
from .ratio import Ratio, median_ratio
from .results import Results


@dataclass(frozen=True)
class ComparisonRow:
    cell: Cell
    baseline: float
    candidate: float
    ratio: Ratio

    @property
    def verdict(self) -> str:
        if not self.ratio.clear:
            return "same (within noise)"
        return "slower" if self.ratio.ratio > 1 else "faster"

    def to_json(self) -> dict:
        return {"cell": self.cell.to_json(), "key": self.cell.key, "baseline_median": self.baseline,
                "candidate_median": self.candidate, "ratio": self.ratio.ratio, "low": self.ratio.low,
                "high": self.ratio.high, "verdict": self.verdict}


def compare(baseline: Results, candidate: Results) -> list[ComparisonRow]:
    before = {m.cell.key: m for m in baseline.measurements if m.timing}
    rows = []
    for m in candidate.measurements:
        a = before.get(m.cell.key)
        if a is None or m.timing is None:
            continue
        rows.append(ComparisonRow(m.cell, a.timing.median, m.timing.median,
                                  median_ratio(a.timing.samples, m.timing.samples)))
    return sorted(rows, key=lambda r: r.cell)
