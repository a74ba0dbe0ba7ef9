"""GradBench's view of a run: per eval, each adapter · variant's derivative at one size, and its J/O.

GradBench (gradbench/gradbench) publishes an eval × tool table; its readers look for the eval's derivative (its
`gradient` or `jacobian`: every operator of the eval's `gradbench` suite entry but `value`) compared across tools at
one size, and for the derivative ÷ primal ratio. The row's size is the one at which the most adapter · variant
pairs have a time (then the most ran at all, then the largest), so a budgeted run (`--max-time`), whose fast pairs
reach sizes the slow ones never do, still compares them; a pair without a time there keeps its measurement
(failed, skipped, …) for the glyph.

The nested evals (saddle, particle) have four functions, one per nesting order (ff, fr, rf, rr: outer mode, then
inner; the operators nested_ff …): `nesting_tables` puts the four side by side per adapter · variant, as GradBench's
readers compare them, at the size chosen as for the eval rows; a median of few samples (a call of seconds to
minutes, timed from what the cell's timeout afforded) says how many, and a timeout gives its first call or lower
bound, so no cell that ran is a blank.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from adcompare.analysis import relative_cost, sizes
from adcompare.analysis.summary import entry, operator_order, timed
from adcompare.model.measurement import Measurement
from adcompare.model.nesting import ORDERS
from adcompare.model.nesting import operator_order as nesting_of
from adcompare.model.status import NOT_RUN, Status
from adcompare.model.units import seconds
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


@dataclass(frozen=True)
class NestingTable:
    """A nested eval's four nesting orders side by side: per adapter · variant, each order's measurement."""

    eval: str
    problem: str
    size: str
    orders: tuple[str, ...]  # GradBench's function names, in its order: ff, fr, rf, rr
    pairs: dict[str, dict[str, Measurement]]  # adapter · variant → order → the measurement at `size`
    timeout: float | None = None  # the eval's cells' own timeout (its suite entry's) unless --timeout was given

    def median(self, pair: str, order: str) -> float | None:
        """The steady-state median of `pair` in `order`, None where it has no time."""
        m = self.pairs.get(pair, {}).get(order)
        return m.timing.median if m is not None and timed(m) and m.timing is not None else None

    def note(self, pair: str, order: str) -> str:
        """What qualifies the cell's entry: a median of few samples says how many (no interval: a slow call timed
        from what its timeout afforded, run/timing.py rule 7); a timeout gives its checked first call, or how long
        its prepare and first call ran at least; "" otherwise."""
        m = self.pairs.get(pair, {}).get(order)
        if m is None:
            return ""
        if timed(m) and m.timing is not None:
            n = len(m.timing.samples)
            return f"{n} sample{'s' * (n != 1)}" if m.timing.few_samples else ""
        first, bound = m.details.get("first_call_seconds"), m.details.get("lower_bound_seconds")
        if m.status is Status.TIMEOUT and isinstance(first, (int, float)):
            return f"first call {seconds(first)}"
        if m.status is Status.TIMEOUT and isinstance(bound, (int, float)):
            return f"≥ {seconds(bound)}"
        return ""


def nesting_tables(measurements: Iterable[Measurement]) -> list[NestingTable]:
    """Per nested GradBench eval of one (machine, device, dtype) group, its orders side by side; [] without one."""
    by_problem: dict[str, list[Measurement]] = defaultdict(list)
    for m in measurements:
        if gradbench_eval(m.cell.problem) is not None and nesting_of(m.cell.operator) is not None:
            by_problem[m.cell.problem].append(m)
    out = []
    for problem in sorted(by_problem, key=lambda p: str(gradbench_eval(p))):
        members = by_problem[problem]
        size = _size(members)
        pairs: dict[str, dict[str, Measurement]] = defaultdict(dict)
        for m in members:
            if m.cell.size == size:
                pairs[entry(m)][str(nesting_of(m.cell.operator))] = m
        out.append(NestingTable(str(gradbench_eval(problem)), problem, size, tuple(ORDERS),
                                dict(sorted(pairs.items())), GRADBENCH_EVALS[problem].timeout))
    return out
