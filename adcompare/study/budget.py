"""Running a plan to a time budget (`--max-time`): cheap cells first across every problem, each family smallest
size first, and what is left is recorded, resumable.

A family (`Cell.family`) is the cells that differ by size only. The budget is filled, and the cells run, in rounds
of cost (COST_ROUNDS): first every cell estimated under half a second, then under 2 s, 8 s, 32 s, 128 s, then the
rest — a cell never in an earlier round than its family's smaller size, since a timeout there skips it — each
round in size order, cheapest first. Cheap cells first measure the most cells a budget can buy: rounds of sizes
alone (every family's smallest size first, whatever it costs) spent a 150-minute GradBench budget on its
nested and per-example cells' 60 s timeouts and measured about half as many cells (benchmarks/budget_order.py).
The estimate is in seconds (estimate.py), a worker's start-up counted when its first cell is chosen. The
runner (run/runner.py) runs each round with a fresh worker per group, corrects the estimate with every cell that
finishes (estimate.LiveEstimate: a cell may move to an earlier round) and starts no cell whose corrected estimate
ends past the deadline, since the model can be wrong (on a GPU, by far).
Cells left out are recorded `skipped` with the reason and `details.resumable`, which `--resume` runs again.
"""
from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence

from adcompare.model.cell import Cell
from adcompare.model.errors import UsageError
from adcompare.model.measurement import Measurement
from adcompare.model.status import Status
from adcompare.study.estimate import Estimate


def parse_duration(text: str) -> float:
    """Seconds in '90', '90s', '15m', '1.5h' or '1h30m'."""
    number = r"(\d+(?:\.\d+)?)"
    m = re.fullmatch(rf"(?:{number}h)?(?:{number}m)?(?:{number}s?)?", (text or "").strip().lower())
    seconds = sum(float(v) * k for v, k in zip(m.groups(), (3600, 60, 1)) if v) if m else 0.0
    if seconds <= 0:
        raise UsageError(f"--max-time {text!r} is not a positive duration; write e.g. 90s, 15m, 1h30m")
    return seconds


def size_ranks(cells: Sequence[Cell]) -> dict[str, int]:
    """Each cell's rank among its family's sizes: 0 for the smallest, 1 for the next, … (the plan lists a family's
    sizes smallest first)."""
    rank: dict[str, int] = {}
    seen: dict[tuple[str, ...], int] = {}
    for c in cells:
        rank[c.key] = seen.get(c.family, 0)
        seen[c.family] = rank[c.key] + 1
    return rank


COST_ROUNDS = (0.5, 2.0, 8.0, 32.0, 128.0)  # seconds: each round's cells are estimated under its bound; then the rest


def cost_rounds(cells: Sequence[Cell], seconds: Callable[[Cell], float]) -> list[list[Cell]]:
    """The cells in rounds of cost (COST_ROUNDS, and one round for the rest): a cell's round is the first whose
    bound its estimate is under (the dearest of its sides where it runs in several --env environments, which are
    timed together), and never earlier than its family's smaller size's (the plan lists a family's sizes smallest
    first); each round in size order, cheapest first: what a --max-time run runs, so that it measures as many
    cells as it can across every problem before the budget ends."""
    rank = size_ranks(cells)
    estimated = {c.key: seconds(c) for c in cells}  # once: a live estimate takes a median per call
    dearest: dict[tuple[str, ...], int] = {}
    for c in cells:
        number = bisect.bisect_left(COST_ROUNDS, estimated[c.key])
        dearest[c.across_environments] = max(number, dearest.get(c.across_environments, 0))
    rounds: list[list[Cell]] = [[] for _ in range(len(COST_ROUNDS) + 1)]
    reached: dict[tuple[str, ...], int] = {}
    for c in cells:
        number = max(dearest[c.across_environments], reached.get(c.family, 0))
        reached[c.family] = number
        rounds[number].append(c)
    return [sorted(r, key=lambda c: (rank[c.key], estimated[c.key])) for r in rounds]


def choose(cells: Sequence[Cell], estimate: Estimate, seconds: float) -> tuple[list[Cell], list[Cell]]:
    """(cells to run, in the plan's order; cells left out), filling `seconds` in the order a --max-time run runs
    them (cost_rounds), a worker's start-up counted in each round it runs in (the run starts a fresh worker
    per group and round, torch's CPU device counts in one: Estimate.worker); a family stops at its first size
    that does not fit."""
    spent, started, chosen, stopped = 0.0, set(), set(), set()
    for number, this_round in enumerate(cost_rounds(cells, lambda c: estimate.cells[c.key])):
        for c in this_round:
            worker = estimate.worker(c)
            group = (number, worker)
            cost = estimate.cells[c.key] + (0.0 if group in started else estimate.startups.get(worker, 0.0))
            if c.family in stopped or spent + cost > seconds:
                stopped.add(c.family)
                continue  # a cheaper cell of another family may still fit
            spent += cost
            started.add(group)
            chosen.add(c.key)
    return [c for c in cells if c.key in chosen], [c for c in cells if c.key not in chosen]


def left_out(cell: Cell, budget: str, why: str) -> Measurement:
    return Measurement(cell, Status.SKIPPED, f"skipped: {why} within --max-time {budget}; run again with --resume "
                       f"(and a --max-time) to continue", details={"resumable": True})
