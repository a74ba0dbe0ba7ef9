"""`adcompare compare`: per matching cell of two results files, the ratio of medians and whether it is noise; or,
given one file from a run over several environments, each cell in one environment against the same cell in
the baseline environment, with whether their derivative values agree.

The interval is bootstrap.py's (the report's "no clear winner" uses the same one).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from .bootstrap import Bootstrap, Ratio
from .cell import CURRENT, Cell
from .check import scaled_error
from .errors import UsageError
from .measurement import Measurement
from .results import Results
from .status import Status

NOT_RUN = {Status.UNSUPPORTED, Status.TOO_LARGE, Status.SKIPPED}  # decided without running: nothing to compare


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


# ---------------------------------------------------------------------------------------------------------------
# Across environments (one run with several `--env`): the same cell under two framework releases


@dataclass(frozen=True)
class EnvironmentPair:
    """One cell run in the baseline environment and in another: timing ratio and derivative agreement."""

    baseline: Measurement
    candidate: Measurement
    timing: ComparisonRow | None  # None when a side was not timed (failed, unsupported, check only)

    @property
    def cell(self) -> Cell:
        """The cell both sides ran, named without an environment."""
        return replace(self.baseline.cell, environment=CURRENT)

    @property
    def projection_error(self) -> float | None:
        """Scaled difference of the two cells' seeded projections (check.py); None when a side has none."""
        a, b = self.baseline.check, self.candidate.check
        if a is None or b is None or a.projection is None or b.projection is None:
            return None
        return scaled_error(a.projection, b.projection)

    @property
    def values_agree(self) -> bool | None:
        error = self.projection_error
        if error is None:
            return None
        return error <= max(self.baseline.check.tolerance, self.candidate.check.tolerance)

    @property
    def verdict(self) -> str:
        return self.timing.verdict if self.timing else "not timed in both"

    @property
    def changed_versions(self) -> tuple[dict[str, str], dict[str, str]]:
        """The framework versions that differ between the two sides (what the comparison is about)."""
        b, c = self.baseline.versions, self.candidate.versions
        names = sorted(n for n in {*b, *c} if b.get(n) != c.get(n))
        return {n: b.get(n, "absent") for n in names}, {n: c.get(n, "absent") for n in names}

    def to_json(self) -> dict:
        b, c = self.baseline, self.candidate
        timing = self.timing.to_json() if self.timing else {}
        timing.pop("cell", None)
        timing.pop("key", None)
        return {"cell": self.cell.to_json(), "baseline_environment": b.cell.environment,
                "candidate_environment": c.cell.environment, "baseline_versions": b.versions,
                "candidate_versions": c.versions, "baseline_status": b.status.value,
                "candidate_status": c.status.value, **timing, "verdict": self.verdict,
                "projection_error": self.projection_error, "values_agree": self.values_agree}


def environment_order(results: Results) -> list[str]:
    """Environments in the order the run named them (`--env`), then any others in order of appearance."""
    named = [n for prov in results.provenance for n in (prov.get("environments") or {})]
    return list(dict.fromkeys([*named, *(m.cell.environment for m in results.measurements)]))


def pair_environments(results: Results, baseline: str | None = None) -> list[EnvironmentPair]:
    """Every cell of the baseline environment (default: the first) paired with the same cell — same problem,
    size, operator, adapter, variant, device and dtype — in each other environment, on one results set."""
    order = environment_order(results)
    if baseline is not None and baseline not in order:
        raise UsageError(f"--baseline-environment {baseline!r} is not in the results; environments: "
                         f"{', '.join(order)}")
    baseline = baseline or (order[0] if order else None)
    groups: dict[tuple, dict[str, Measurement]] = defaultdict(dict)
    for m in results.measurements:
        groups[m.cell.across_environments][m.cell.environment] = m
    boot = Bootstrap()
    pairs = []
    for group in groups.values():
        base = group.get(baseline)
        for name, other in group.items():
            if base is None or name == baseline or {base.status, other.status} <= NOT_RUN:
                continue
            timing = None
            if base.timing and other.timing:
                ratio = boot.ratio("baseline:" + base.cell.key, base.timing, "candidate:" + other.cell.key,
                                   other.timing)
                timing = ComparisonRow(other.cell, base.timing.median, other.timing.median, ratio)
            pairs.append(EnvironmentPair(base, other, timing))
    return sorted(pairs, key=lambda p: (order.index(p.candidate.cell.environment), p.candidate.cell))
