"""GradBench's view of a run: per eval, each adapter · variant's derivative at one size, and its J/O.

GradBench (gradbench/gradbench) publishes an eval × tool table; its readers look for the eval's derivative (its
`gradient` or `jacobian`: every operator of the eval's `gradbench` suite entry but `value`) compared across tools at
one size, and for the derivative ÷ primal ratio. The row's size is the one at which the most adapter · variant
pairs have a time (then the most ran at all, then the largest), so a budgeted run (`--max-time`), whose fast pairs
reach sizes the slow ones never do, still compares them; a pair without a time there keeps its measurement
(failed, skipped, …) for the glyph.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from adcompare.analysis import relative_cost, sizes
from adcompare.analysis.summary import entry, operator_order, timed
from adcompare.model.measurement import Measurement
from adcompare.model.status import NOT_RUN
from adcompare.study.suites import GRADBENCH_EVALS, gradbench_eval


@dataclass(frozen=True)
class EvalRow:
    """One eval's derivative operator at one size: each pair's measurement, and J/O where both were timed."""

    eval: str  # GradBench's name: gmm, ba, lstm, …
    problem: str
    operator: str
    size: str
    cells: dict[str, Measurement]  # adapter · variant → the derivative's measurement at `size`
    relative: dict[str, float]  # adapter · variant → derivative median ÷ value median (same cell but operator)

    @property
    def label(self) -> str:
        return f"{self.eval} · {self.operator} ({self.size})"


def derivative_operators(problem: str, present: Iterable[str]) -> list[str]:
    """The operators of `problem`'s GradBench eval that are its derivative, among those `present`."""
    declared = GRADBENCH_EVALS[problem].operators
    ops = {op for op in present if op != "value" and (declared is None or op in declared)}
    return sorted(ops, key=operator_order)


def _size(members: list[Measurement]) -> str:
    """The size with the most pairs timed, then the most that ran at all (a timeout says more than a skip), then
    the largest."""
    timed_at: dict[str, set[str]] = defaultdict(set)
    ran_at: dict[str, set[str]] = defaultdict(set)
    for m in members:
        timed_here, ran_here = timed_at[m.cell.size], ran_at[m.cell.size]  # every size gets its keys
        if timed(m):
            timed_here.add(entry(m))
        if m.status not in NOT_RUN:
            ran_here.add(entry(m))
    return max(timed_at, key=lambda s: (len(timed_at[s]), len(ran_at[s]), sizes.sort_key(s)))


def rows(measurements: Iterable[Measurement]) -> list[EvalRow]:
    """The eval rows of one (machine, device, dtype) group, in eval order then operator order; [] without evals."""
    ms = [m for m in measurements if gradbench_eval(m.cell.problem) is not None]
    ratios = relative_cost.ratios(ms)
    by_row: dict[tuple[str, str], list[Measurement]] = defaultdict(list)
    for m in ms:
        by_row[(m.cell.problem, m.cell.operator)].append(m)
    out = []
    for problem in sorted({p for p, _ in by_row}, key=lambda p: str(gradbench_eval(p))):
        for op in derivative_operators(problem, {o for p, o in by_row if p == problem}):
            members = by_row[(problem, op)]
            size = _size(members)
            cells = {entry(m): m for m in members if m.cell.size == size}
            relative = {name: ratios[m.merge_key] for name, m in cells.items() if m.merge_key in ratios}
            out.append(EvalRow(str(gradbench_eval(problem)), problem, op, size, cells, relative))
    return out
