"""Running a plan to a time budget (`--max-time`): no family starves, and what is left is recorded, resumable.

A family (`Cell.family`) is the cells that differ by size only. The budget
is filled by rounds — every family's smallest size first, then every family's next size, and so on — in estimated
seconds (estimate.py), with a worker group's start-up counted when its first cell is chosen. Chosen cells then run
the same way (run/runner.py): round by round of sizes across every worker group, each round cheapest first, and the
runner corrects the estimate with every cell that finishes (estimate.LiveEstimate) and starts no cell whose
corrected estimate ends past the deadline, since the model can be wrong (on a GPU, by far).
Cells left out are recorded `skipped` with the reason and `details.resumable`, which `--resume` runs again.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from adcompare.model.cell import Cell
from adcompare.model.errors import UsageError
from adcompare.model.measurement import Measurement
from adcompare.model.status import Status
from adcompare.study.estimate import Estimate, LiveEstimate


def parse_duration(text: str) -> float:
    """Seconds in '90', '90s', '15m', '1.5h' or '1h30m'."""
    number = r"(\d+(?:\.\d+)?)"
    m = re.fullmatch(rf"(?:{number}h)?(?:{number}m)?(?:{number}s?)?", (text or "").strip().lower())
    seconds = sum(float(v) * k for v, k in zip(m.groups(), (3600, 60, 1)) if v) if m else 0.0
    if seconds <= 0:
        raise UsageError(f"--max-time {text!r} is not a positive duration; write e.g. 90s, 15m, 1h30m")
    return seconds


def size_ranks(cells: Sequence[Cell]) -> dict[str, int]:
    """Each cell's round of sizes: 0 for its family's smallest size, 1 for the next, … (the plan lists a family's
    sizes smallest first)."""
    rank: dict[str, int] = {}
    seen: dict[tuple[str, ...], int] = {}
    for c in cells:
        rank[c.key] = seen.get(c.family, 0)
        seen[c.family] = rank[c.key] + 1
    return rank


def size_rounds(cells: Sequence[Cell], estimate: LiveEstimate) -> list[list[Cell]]:
    """The cells in rounds of sizes — every family's smallest size first, then every family's next size, … —
    each round cheapest first by `estimate`: what a --max-time run runs, so that it measures as many cells as it
    can across every problem before the budget ends."""
    rank = size_ranks(cells)
    rounds: list[list[Cell]] = [[] for _ in range(max(rank.values(), default=-1) + 1)]
    for c in cells:
        rounds[rank[c.key]].append(c)
    return [sorted(r, key=estimate.seconds) for r in rounds]


def choose(cells: Sequence[Cell], estimate: Estimate, seconds: float) -> tuple[list[Cell], list[Cell]]:
    """(cells to run, in the plan's order; cells left out), filling `seconds` round by round of sizes."""
    rank = size_ranks(cells)
    order = sorted(range(len(cells)), key=lambda i: (rank[cells[i].key], i))
    spent, started, chosen = 0.0, set(), set()
    for i in order:
        c = cells[i]
        group = c.worker_group
        cost = estimate.cells[c.key] + (0.0 if group in started else estimate.startups.get(group, 0.0))
        if spent + cost > seconds:
            continue  # a cheaper cell of a later round may still fit
        spent += cost
        started.add(group)
        chosen.add(c.key)
    return [c for c in cells if c.key in chosen], [c for c in cells if c.key not in chosen]


def left_out(cell: Cell, budget: str, why: str) -> Measurement:
    return Measurement(cell, Status.SKIPPED, f"skipped: {why} within --max-time {budget}; run again with --resume "
                       f"(and a --max-time) to continue", details={"resumable": True})
