"""How many cells a --max-time budget measures, by the order a run takes its cells: replayed from a whole run.

Issue 39: a budget should measure as many cells as it can. This replays a suite's plan against an earlier results
file of the same suite on this machine (every cell's recorded wall seconds are its cost; a recorded timeout
skips its family's larger sizes, as the runner does) in two orders, for the budgets given:
- rounds of sizes (the order before issue 39's item 5): every family's smallest size first, whatever it costs,
  each round cheapest first;
- rounds of cost (study/budget.cost_rounds, what `run --max-time` does now): cells estimated under 0.5 s, 2 s,
  8 s, 32 s, 128 s, then the rest, a family's sizes smallest first.
Each order is filled as the runner fills it: a worker group's start-up once per group and round, and a cell that
does not fit what is left is passed over. The estimate is the same file's times (perfect foresight), so the
figures say what each order buys, not how good the model is.
Run: python benchmarks/budget_order.py gradbench benchmarks/results/gradbench/gradbench.jsonl --timeout 60 --budget 150m
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence

from adcompare.cli.pipeline import load_registry, machine
from adcompare.model.cell import Cell
from adcompare.model.status import Status
from adcompare.store.results import load
from adcompare.study.budget import cost_rounds, parse_duration, size_ranks
from adcompare.study.estimate import Estimate, History, estimate
from adcompare.study.plan import Selection
from adcompare.study.plan import plan as make_plan


def size_rounds(cells: Sequence[Cell], est: Estimate) -> list[list[Cell]]:
    rank = size_ranks(cells)
    rounds: list[list[Cell]] = [[] for _ in range(max(rank.values(), default=-1) + 1)]
    for c in cells:
        rounds[rank[c.key]].append(c)
    return [sorted(r, key=lambda c: est.cells[c.key]) for r in rounds]


def replay(rounds: list[list[Cell]], est: Estimate, status: dict[str, Status], budget: float) -> tuple[int, float]:
    """(cells recorded ok, seconds spent) within `budget`."""
    spent, ok, timed_out = 0.0, 0, set()
    for this_round in rounds:
        started = set()
        for c in this_round:
            if c.family in timed_out:
                continue
            start = 0.0 if c.worker_group in started else est.startups.get(c.worker_group, 0.0)
            if spent + start + est.cells[c.key] > budget:
                continue
            spent += start + est.cells[c.key]
            started.add(c.worker_group)
            if status.get(c.key) is Status.TIMEOUT:
                timed_out.add(c.family)
            ok += status.get(c.key) is Status.OK
    return ok, spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("results", help="an earlier whole run of the suite on this machine")
    parser.add_argument("--timeout", type=float, default=60.0, help="the run's --timeout (default 60)")
    parser.add_argument("--budget", action="append", help="--max-time budgets (default 30m, 1h, 150m)")
    args = parser.parse_args()
    registry = load_registry(())
    plan = make_plan(registry, Selection(suite=args.suite))
    results = load([args.results])
    est = estimate(registry, plan.cells, History.from_results(results, machine(registry).id), timeout=args.timeout)
    status = {m.cell.key: m.status for m in results.measurements}
    whole = sum(1 for c in plan.cells if status.get(c.key) is Status.OK)
    orders = {"rounds of sizes": size_rounds(plan.cells, est),
              "rounds of cost": cost_rounds(plan.cells, lambda c: est.cells[c.key])}
    print(f"{args.suite}: {len(plan.cells)} cells to run, {whole} ok in {args.results}; "
          f"{sum(1 for c in plan.cells if c.key in est.measured)} with measured seconds on this machine")
    for text in args.budget or ["30m", "1h", "150m"]:
        budget = parse_duration(text)
        line = ", ".join(f"{name}: {ok} ok in {spent / 60:.0f} min"
                         for name, (ok, spent) in ((n, replay(r, est, status, budget)) for n, r in orders.items()))
        print(f"--max-time {text}: {line}")


if __name__ == "__main__":
    main()
