"""The summary: per problem and operator, which adapter/variant is fastest and by how much, honestly.

Cells compete when they compute the same thing on the same hardware: equal (problem, size, operator, device, dtype)
and the same machine fingerprint (cells timed on two machines are never ranked against each other).
Only `ok` cells are ranked — a wrong derivative (mismatch) is not a fast one. Ties are decided by stats.Bootstrap.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ..measurement import Measurement
from ..operators import OPERATORS
from ..status import Status
from . import sizes
from ..bootstrap import Bootstrap, Ratio


def entry(m: Measurement) -> str:
    """How an adapter/variant pair is named throughout the page."""
    return f"{m.cell.adapter} · {m.cell.variant}"


def operator_order(name: str) -> tuple[int, str]:
    order = list(OPERATORS)
    return (order.index(name) if name in order else len(order), name)


def timed(m: Measurement) -> bool:
    return m.status is Status.OK and m.timing is not None and len(m.timing.samples) > 0


@dataclass(frozen=True)
class Rival:
    measurement: Measurement
    ratio: Ratio | None  # vs the fastest; None: too few samples to compare


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
    not_ranked: tuple[Measurement, ...]  # ran but not ok, or no timing

    @property
    def tied(self) -> tuple[Rival, ...]:
        """Rivals indistinguishable from the fastest: interval contains 1, or too few samples to tell."""
        return tuple(r for r in self.rivals if r.ratio is None or not r.ratio.clear)

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
    groups: dict[tuple[str, str, str, str, str, str], list[Measurement]] = defaultdict(list)
    for m in measurements:
        c = m.cell
        groups[(c.problem, c.size, c.operator, c.device, c.dtype, m.machine)].append(m)
    verdicts: dict[str, list[Verdict]] = defaultdict(list)
    for key, members in groups.items():
        ranked = sorted((m for m in members if timed(m)), key=lambda m: (m.timing.median, entry(m)))
        if not ranked:
            continue
        best = ranked[0]
        rivals = tuple(Rival(m, bootstrap.ratio(best.cell.key, best.timing, m.cell.key, m.timing))
                       for m in ranked[1:])
        others = tuple(sorted((m for m in members if not timed(m)), key=entry))
        verdicts[key[0]].append(Verdict(*key, fastest=best, rivals=rivals, not_ranked=others))
    out = []
    for problem in sorted(verdicts):
        rows = sorted(verdicts[problem], key=lambda v: (operator_order(v.operator), v.device, v.dtype, v.machine,
                                                          sizes.sort_key(v.size)))
        largest: dict[tuple[str, str, str, str], Verdict] = {}
        for v in rows:  # sorted by size within an operator: the last one seen is the largest
            largest[(v.operator, v.device, v.dtype, v.machine)] = v
        out.append(ProblemSummary(problem, tuple(largest.values()), tuple(rows)))
    return out
