"""A study: the plan as one `adcompare run` will run it — its shard, what --resume keeps, what --max-time leaves
out — with the estimate behind each choice, and the `--dry-run` view of it (text, or JSON for scripts)."""
from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from adcompare.model.cell import Cell
from adcompare.model.errors import ResultsFileError
from adcompare.model.measurement import Measurement
from adcompare.model.timing_policy import budget_policy
from adcompare.plugin.registry import Registry
from adcompare.store.results import load
from adcompare.study import budget
from adcompare.study.estimate import Estimate, History, estimate
from adcompare.study.plan import Plan, Selection
from adcompare.study.plan import plan as make_plan
from adcompare.study.preflight import estimate_bytes
from adcompare.study.shards import ShardSpec, owns_decided, shard_cells


@dataclass(frozen=True)
class Study:
    plan: Plan  # this invocation's cells to run (shard applied, finished ones removed)
    estimate: Estimate  # of every cell of the shard still to run
    beyond: frozenset[str]  # the cells the estimate does not fit in --max-time
    done: frozenset[str]  # kept from --output by --resume
    total: int  # cells of the whole (unsharded) plan
    shard: ShardSpec | None = None
    max_time: str = ""

    @property
    def scheduled(self) -> tuple[Cell, ...]:
        """The cells the estimate fits in --max-time (all of them without one). A run is given the whole plan
        and decides as it goes, with the estimate its finished cells correct, which ones the deadline leaves out:
        a model too high (as on a GPU) would otherwise leave budget unspent."""
        return tuple(c for c in self.plan.cells if c.key not in self.beyond)

    @property
    def left_out(self) -> tuple[Measurement, ...]:
        """The cells beyond the budget, as `--dry-run` shows them: skipped, resumable."""
        return tuple(budget.left_out(c, self.max_time, "not scheduled: estimated not to fit")
                     for c in self.plan.cells if c.key in self.beyond)

    @property
    def seconds(self) -> float:
        return self.estimate.group_seconds(self.scheduled) if self.scheduled else 0.0

    def to_run(self, rounds: int = 1) -> tuple[Plan, tuple[Measurement, ...]]:
        """(the plan a run is given, the cells it records as left out before it starts). A one-round run is given
        every cell and its live estimate decides; a `--rounds` run repeats each timed cell in later rounds, which a
        check of each cell against the deadline cannot budget, so it runs the cells the estimate fits and records
        the rest as left out, as --dry-run shows."""
        if rounds > 1 and self.beyond:
            return replace(self.plan, cells=self.scheduled), self.left_out
        return self.plan, ()

    def deadline(self) -> float | None:
        return time.monotonic() + budget.parse_duration(self.max_time) if self.max_time else None


def history(paths: Sequence[str | Path], machine: str) -> History:
    """Measured times on `machine` from the results files that exist (others are ignored: nothing measured yet)."""
    existing = [p for p in paths if Path(p).is_file()]
    if not existing:
        return History(machine)
    try:
        return History.from_results(load(existing), machine)
    except ResultsFileError:
        return History(machine)


def prepare(registry: Registry, plan: Plan, *, done: frozenset[str] = frozenset(), past: History = History(),
            shard: ShardSpec | None = None, max_time: str = "", timeout: float = 300.0) -> Study:
    """Apply the shard (on the whole plan, so shards do not depend on progress), then resume, then the budget; the
    cells to run are modelled under the timing policy the run will use (a budget's times a slow cell with fewer
    calls)."""
    cells, decided = plan.cells, plan.decided
    policy = budget_policy(bool(max_time))
    if shard is not None:  # from the model alone under one policy: every job (on any node, at any progress, with
        whole = estimate(registry, cells, timeout=timeout)  # or without --max-time) splits alike
        cells = shard_cells(cells, whole, shard)
        decided = tuple(m for m in decided if owns_decided(m.cell.key, shard))
    todo = [c for c in cells if c.key not in done]
    est = estimate(registry, todo, past, timeout=timeout, policy=policy)
    beyond: frozenset[str] = frozenset()
    if max_time:
        beyond = frozenset(c.key for c in budget.choose(todo, est, budget.parse_duration(max_time))[1])
    decided = tuple(m for m in decided if m.cell.key not in done)
    return Study(Plan(tuple(todo), decided, plan.notes, plan.timeouts), est, beyond, frozenset(done), plan.total,
                 shard, max_time)


def summary(study: Study, output: str) -> str:
    measured = sum(1 for c in study.scheduled if c.key in study.estimate.measured)
    where = f"shard {study.shard}: " if study.shard else ""
    parts = [f"{where}{len(study.scheduled)} to run", f"{len(study.plan.decided)} decided without running "
             f"(unsupported/too large)"]
    if study.done:
        parts.append(f"{len(study.done)} already in {output}")
    if study.left_out:
        parts.append(f"{len(study.left_out)} left for a later --resume (beyond --max-time {study.max_time})")
    source = (f"{measured} from earlier results on this machine, {len(study.scheduled) - measured} modelled"
              if measured else "modelled, no earlier results on this machine")
    return f"{study.total} cells: " + ", ".join(parts) + f"; estimated {study.seconds / 60:.1f} min ({source})"


def cells_json(registry: Registry, study: Study) -> dict[str, Any]:
    """Every cell this invocation would record, with its planned status, estimated seconds and bytes."""
    rows = []
    for c in study.scheduled:
        problem = registry.problems[c.problem]
        rows.append({"key": c.key, "cell": c.to_json(), "status": "planned",
                     "seconds": round(study.estimate.cells[c.key], 3),
                     "source": "measured" if c.key in study.estimate.measured else "model",
                     "bytes": estimate_bytes(problem, problem.size(c.size), c.operator, c.dtype,
                                             registry.adapters[c.adapter], c.variant)})
    for m in (*study.plan.decided, *study.left_out):
        rows.append({"key": m.cell.key, "cell": m.cell.to_json(), "status": m.status.value, "message": m.message})
    return {"total_cells": study.total, "shard": str(study.shard) if study.shard else None,
            "estimated_seconds": round(study.seconds, 1),
            "startup_seconds": {"/".join(g): s for g, s in study.estimate.startups.items()}, "cells": rows}


BASELINES = Path(__file__).with_name("suite_baselines.json")  # written by benchmarks/suite_baseline.py


def published_baselines() -> dict[str, dict[str, Any]]:
    """Each suite's last published end-to-end measurement (cells, wall seconds, machine, date, results file)."""
    return json.loads(BASELINES.read_text(encoding="utf-8")) if BASELINES.is_file() else {}


@dataclass(frozen=True)
class SuiteCost:
    """A suite's size and cost on this machine: modelled, and measured where earlier results cover it."""

    suite: str
    cells: int
    to_run: int
    estimated_seconds: float
    measured_cells: int  # cells of the suite with a measured wall time on this machine
    measured_seconds: float  # their summed wall time (start-ups excluded)
    published: dict[str, Any] | None = None  # the project's last end-to-end run of the suite (suite_baselines.json)


def suite_costs(registry: Registry, suites: Sequence[str], past: History = History()) -> list[SuiteCost]:
    out, published = [], published_baselines()
    for name in suites:
        p = make_plan(registry, Selection(suite=name))
        model = estimate(registry, p.cells)
        measured = [past.cells[c.key] for c in p.cells if c.key in past.cells]
        out.append(SuiteCost(name, p.total, len(p.cells), model.total, len(measured), sum(measured),
                             published.get(name)))
    return out
