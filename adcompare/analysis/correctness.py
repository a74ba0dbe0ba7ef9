"""Are the derivatives right: the worst error per problem/operator/adapter/variant, and what failed.

Each matrix entry is the worst over sizes and devices of three measures (check.py defines them): error vs the
float64 reference, pairwise disagreement with the other frameworks, and the adjoint identity — each beside the
dtype's tolerance, coloured by the worst measure ÷ tolerance.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from adcompare.analysis import sizes
from adcompare.analysis.summary import entry, operator_order
from adcompare.model.measurement import Measurement
from adcompare.model.status import NOT_RUN, Status
from adcompare.verify.expectations import expected_reason


def _worst(values: Iterable[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    if not found:
        return None
    return math.nan if any(math.isnan(v) for v in found) else max(found)


@dataclass(frozen=True)
class Entry:
    error: float | None
    pairwise: float | None
    adjoint: float | None
    tolerance: float | None
    cells: int
    failures: tuple[tuple[str, int], ...]  # (status, count) of cells that failed: a timeout is not an error value

    @property
    def worst_ratio(self) -> float | None:
        worst = _worst([self.error, self.pairwise, self.adjoint])
        if worst is None or not self.tolerance:
            return None
        return math.inf if math.isnan(worst) else worst / self.tolerance

    @property
    def grade(self) -> str:
        """CSS class: good (≤ 10 % of tolerance), near (≤ tolerance), bad (beyond), none (nothing compared)."""
        if self.failures:
            return "bad"
        r = self.worst_ratio
        if r is None:
            return "none"
        return "good" if r <= 0.1 else "near" if r <= 1 else "bad"


@dataclass(frozen=True)
class Matrix:
    dtype: str
    columns: tuple[str, ...]  # adapter · variant
    rows: tuple[tuple[str, str], ...]  # (problem, operator)
    entries: dict[tuple[str, str, str], Entry]  # (problem, operator, column)


def matrices(measurements: Iterable[Measurement]) -> list[Matrix]:
    by: dict[str, dict[tuple[str, str, str], list[Measurement]]] = defaultdict(lambda: defaultdict(list))
    for m in measurements:
        if m.status in NOT_RUN:
            continue
        by[m.cell.dtype][(m.cell.problem, m.cell.operator, entry(m))].append(m)
    out = []
    for dtype in sorted(by):
        groups = by[dtype]
        entries = {}
        for key, ms in groups.items():
            checks = [m.check for m in ms if m.check is not None]
            entries[key] = Entry(
                error=_worst(c.error for c in checks),
                pairwise=_worst(c.pairwise_error for c in checks),
                adjoint=_worst(c.adjoint_error for c in checks),
                tolerance=max((c.tolerance for c in checks), default=None),
                cells=len(ms),
                failures=tuple(sorted(Counter(m.status.value + (" (expected)" if expected_reason(m) else "")
                                              for m in ms if m.status.is_failure).items())),
            )
        columns = tuple(sorted({k[2] for k in groups}))
        rows = tuple(sorted({k[:2] for k in groups}, key=lambda r: (r[0], operator_order(r[1]))))
        out.append(Matrix(dtype, columns, rows, entries))
    return out


def failures(measurements: Iterable[Measurement]) -> list[Measurement]:
    return sorted((m for m in measurements if m.status.is_failure),
                  key=lambda m: (m.cell.problem, operator_order(m.cell.operator), sizes.sort_key(m.cell.size),
                                 m.cell.adapter, m.cell.variant, m.cell.device, m.cell.dtype))


@dataclass(frozen=True)
class NotRun:
    """Cells not run for one reason, folded together: unsupported operators repeat across every size."""

    status: Status
    adapter: str
    variant: str
    operator: str
    message: str
    cells: tuple[Measurement, ...]

    @property
    def where(self) -> str:
        return ", ".join(sorted({m.cell.problem for m in self.cells}))


def not_run(measurements: Iterable[Measurement]) -> list[NotRun]:
    groups: dict[tuple, list[Measurement]] = defaultdict(list)
    for m in measurements:
        if m.status in NOT_RUN:
            c = m.cell
            groups[(m.status.value, c.adapter, c.variant, operator_order(c.operator), m.message)].append(m)
    return [NotRun(Status(k[0]), k[1], k[2], ms[0].cell.operator, k[4], tuple(ms)) for k, ms in sorted(groups.items())]
