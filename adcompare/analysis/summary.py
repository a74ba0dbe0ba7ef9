"""The summary: per problem and operator, which adapter/variant is fastest and by how much, honestly.

Cells compete when they compute the same thing on the same hardware: equal (problem, size, operator, device, dtype)
and the same machine fingerprint (cells timed on two machines are never ranked against each other).
Only `ok` cells are ranked — a wrong derivative (mismatch) is not a fast one. Ties are decided by significance.py
(bootstrap interval, rank test Holm-corrected over the rivals of one row, effect above the noise threshold).
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from adcompare.analysis import sizes
from adcompare.analysis.bootstrap import Bootstrap, Ratio
from adcompare.analysis.significance import Difference, judge
from adcompare.model.cell import CURRENT
from adcompare.model.measurement import Measurement
from adcompare.model.operators import OPERATORS
from adcompare.model.status import Status


def entry(m: Measurement) -> str:
    """How an adapter/variant pair is named throughout the page (`Cell.entry`)."""
    return m.cell.entry


def operator_order(name: str) -> tuple[int, str]:
    order = list(OPERATORS)
    return (order.index(name) if name in order else len(order), name)


def sample_key(m: Measurement) -> str:
    """The bootstrap's cache key for a cell's samples: the same cell timed on two machines has two sets."""
    return f"{m.machine}:{m.cell.key}"


def timed(m: Measurement) -> bool:
    """Rankable: an `ok` cell with a positive, finite median. A zero median (a timer coarser than the call) forms
    no ratio, so such a cell is listed as not ranked rather than divided by."""
    return m.status is Status.OK and m.timing is not None and len(m.timing.samples) > 0 \
        and 0 < m.timing.median < math.inf


@dataclass(frozen=True)
class Rival:
    measurement: Measurement
    ratio: Ratio | None  # vs the fastest; None: too few samples to compare
    difference: Difference  # the full test (significance.py)

    @property
    def significant(self) -> bool:
        return self.difference.significant


@dataclass(frozen=True)
class Verdict:
    problem: str
    size: str
    operator: str
    device: str
    dtype: str
    machine: str  # fingerprint id
    fastest: Measurement
    rivals: tuple[Rival, ...]  # slower by median, fastest first
    not_ranked: tuple[Measurement, ...]  # ran but not ok, no timing, or a zero median
    environment: str = CURRENT  # the rivals' environment (`run --env`); each is ranked apart

    @property
    def tied(self) -> tuple[Rival, ...]:
        """Rivals not significantly slower than the fastest (significance.py), or too few samples to tell."""
        return tuple(r for r in self.rivals if not r.significant)

    @property
    def text(self) -> str:
        if not self.rivals:
            return f"only {entry(self.fastest)} was timed"
        if self.tied:
            names = " ≈ ".join([entry(self.fastest), *(entry(r.measurement) for r in self.tied)])
            return f"no clear winner: {names}"
        return f"{entry(self.fastest)} is fastest"

    @property
    def clear(self) -> bool:
        return bool(self.rivals) and not self.tied


@dataclass(frozen=True)
class ProblemSummary:
    problem: str
    headline: tuple[Verdict, ...]  # per operator/device/dtype at the largest size timed
    every_size: tuple[Verdict, ...]


def summarize(measurements: Iterable[Measurement], bootstrap: Bootstrap) -> list[ProblemSummary]:
    groups: dict[tuple[str, ...], list[Measurement]] = defaultdict(list)
    for m in measurements:
        groups[m.ranking].append(m)
    verdicts: dict[str, list[Verdict]] = defaultdict(list)
    for members in groups.values():
        ranked = sorted((m for m in members if timed(m)), key=lambda m: (m.measured.median, entry(m)))
        if not ranked:
            continue
        best = ranked[0]
        ratios = [bootstrap.ratio(sample_key(best), best.measured, sample_key(m), m.measured) for m in ranked[1:]]
        tests = judge([(r, best.measured.samples, m.measured.samples) for r, m in zip(ratios, ranked[1:])])
        rivals = tuple(Rival(m, r, d) for m, r, d in zip(ranked[1:], ratios, tests))
        others = tuple(sorted((m for m in members if not timed(m)), key=entry))
        c = best.cell
        verdicts[c.problem].append(Verdict(c.problem, c.size, c.operator, c.device, c.dtype, best.machine,
                                           fastest=best, rivals=rivals, not_ranked=others,
                                           environment=c.environment))
    out = []
    for problem in sorted(verdicts):
        rows = sorted(verdicts[problem], key=lambda v: (operator_order(v.operator), v.device, v.dtype, v.machine,
                                                          v.environment, sizes.sort_key(v.size)))
        largest: dict[tuple[str, ...], Verdict] = {}
        for v in rows:  # sorted by size within an operator: the last one seen is the largest
            ranking = (v.machine, *v.fastest.cell.twin(size="").ranking)
            largest[ranking] = v
        out.append(ProblemSummary(problem, tuple(largest.values()), tuple(rows)))
    return out
