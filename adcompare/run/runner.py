"""Runs a plan (plan.py) through one worker process per `Cell.worker_group` (adapter, dtype, device, environment,
device count).

Workers run one at a time (they share the cores). After a timeout at one size, the larger sizes of the same
`Cell.family` are `skipped`. Each measurement is appended to the results file as it arrives, so a killed run
resumes. With `RunOptions.rounds` > 1 every group runs once per round in fresh workers, and a timed cell is
appended once, after its last round (rounds.py). The same group in several environments (`--env`) runs with one
worker per environment, cell by cell in turn, so each cell's environments are timed seconds apart under one load
(the A/B gate, comparison.py). The parent↔worker messages are in protocol.py.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

from adcompare.model.cell import CURRENT, Cell
from adcompare.model.measurement import Measurement
from adcompare.model.status import Status
from adcompare.model.timing_policy import TimingPolicy
from adcompare.plugin.registry import Registry
from adcompare.run.rounds import merge_rounds, timed
from adcompare.run.worker_handle import WorkerProcess
from adcompare.study.budget import left_out
from adcompare.study.plan import Plan
from adcompare.verify.check import cross_check


@dataclass(frozen=True)
class RunOptions:
    timeout: float = 300.0
    threads: int = 1
    time_it: bool = True
    policy: TimingPolicy = field(default_factory=TimingPolicy)
    interpreters: dict[str, str] = field(default_factory=dict)  # environment name → its Python (not `current`)
    deadline: float | None = None  # time.monotonic() after which no cell starts (--max-time)
    budget: str = ""  # the --max-time as typed, for the skipped cells' message
    rounds: int = 1  # --rounds: each timed cell measured this many times, each in fresh workers (rounds.py)


def run(registry: Registry, p: Plan, options: RunOptions, *,
        record: Callable[[Measurement], None] = lambda m: None,
        on_worker: Callable[[dict], None] = lambda info: None,
        progress: Callable[[Cell | None, Measurement | None], None] = lambda c, m: None,
        skip_keys: frozenset[str] = frozenset()) -> list[Measurement]:
    """Run every planned cell; `record` is called with each measurement as it finishes (append to results).

    Returns the measurements after cross-checking (pairwise agreement, adjoint identity) across adapters.
    """
    measurements: list[Measurement] = []
    for m in p.decided:
        if m.cell.key not in skip_keys:
            record(m)
            measurements.append(m)
            progress(None, m)
    cache_dir = Path(tempfile.mkdtemp(prefix="adcompare-cache-"))  # a per-run compiler cache, removed at the end
    groups: dict[tuple[str, ...], list[Cell]] = defaultdict(list)
    for c in p.cells:
        if c.key not in skip_keys:
            groups[c.worker_group].append(c)
    try:
        measure = _measure_groups if options.rounds <= 1 else _measure_in_rounds
        for m in measure(registry, groups, options, cache_dir, on_worker, progress):
            record(m)
            measurements.append(m)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    # Pairwise and adjoint agreement are derived from the recorded projections, here and again on load,
    # so the file keeps exactly one record per cell.
    return cross_check(measurements)


def _measure_groups(registry: Registry, groups: Mapping[tuple[str, ...], Sequence[Cell]],
                    options: RunOptions, cache_dir: Path, on_worker: Callable[[dict], None],
                    progress: Callable[[Cell | None, Measurement | None], None]) -> Iterator[Measurement]:
    """Each worker group's cells in one fresh worker process, group after group. Groups that differ only by
    environment run together, one worker each, taking turns cell by cell in the groups' order (reversed groups,
    as in odd rounds, put the other environment first): a load that comes and goes then falls on both sides of a
    cell alike, which is what comparing environments needs."""
    bundles: dict[tuple[str, ...], list[Sequence[Cell]]] = defaultdict(list)
    for cells in groups.values():
        bundles[replace(cells[0], environment=CURRENT).worker_group].append(cells)
    for bundle in bundles.values():
        with ExitStack() as workers:
            runs = []
            for cells in bundle:
                first = cells[0]
                worker = workers.enter_context(WorkerProcess(
                    first.adapter, first.dtype, first.device, options.threads, registry.plugins, cache_dir,
                    interpreter=options.interpreters.get(first.environment), inputs=registry.inputs,
                    seed=registry.seed, devices=first.devices))
                runs.append(_run_group(worker, cells, options, on_worker, progress))
            adapter = registry.adapters.get(bundle[0][0].adapter)
            for m in _in_turn(runs):
                if adapter is not None:  # the variant's meaning as declared, recorded for the report
                    m = replace(m, compiles=adapter.compiled_from(m.cell.variant))
                yield m


def _in_turn(runs: Sequence[Iterator[Measurement]]) -> Iterable[Measurement]:
    """One measurement from each run in turn until all are done (a single run: its measurements in order)."""
    active = list(runs)
    while active:
        for run_ in list(active):
            m = next(run_, None)
            if m is None:
                active.remove(run_)
            else:
                yield m


def _measure_in_rounds(registry: Registry, groups: Mapping[tuple[str, ...], Sequence[Cell]],
                       options: RunOptions, cache_dir: Path, on_worker: Callable[[dict], None],
                       progress: Callable[[Cell | None, Measurement | None], None]) -> Iterator[Measurement]:
    """Every group once per round, in fresh workers; odd rounds in reverse order. A cell is yielded once: when
    round 1 did not time it (failed, unsupported, …), else merged after its last round (rounds.py)."""
    seen: dict[str, list[Measurement]] = defaultdict(list)
    for number in range(options.rounds):
        chosen = {g: [c for c in cells if number == 0 or timed(seen[c.key][0])] for g, cells in groups.items()}
        if number % 2:
            chosen = {g: cells[::-1] for g, cells in reversed(list(chosen.items()))}
        last = number == options.rounds - 1
        for m in _measure_groups(registry, {g: c for g, c in chosen.items() if c}, options, cache_dir,
                                 on_worker, progress):
            seen[m.cell.key].append(m)
            if number == 0 and not timed(m):
                yield m
            elif last:
                yield merge_rounds(seen[m.cell.key])


def _run_group(worker: WorkerProcess, cells: Sequence[Cell], options: RunOptions,
               on_worker: Callable[[dict], None], progress: Callable[[Cell | None, Measurement | None], None]):
    """One worker's cells in order, yielding each measurement; a timeout skips the larger sizes of its family."""
    timed_out: dict[tuple[str, ...], str] = {}
    for cell in cells:
        progress(cell, None)
        if cell.family in timed_out:
            m = Measurement(cell, Status.SKIPPED, f"skipped: the smaller size {timed_out[cell.family]} timed out")
        elif options.deadline is not None and time.monotonic() >= options.deadline:
            m = left_out(cell, options.budget, "the time budget was spent before this cell started")
        else:
            started, began = worker.starts, time.perf_counter()
            try:
                m = worker.run(cell, timeout=options.timeout, time_it=options.time_it, policy=options.policy)
            except RuntimeError as exc:  # the worker failed to start
                m = Measurement(cell, Status.CRASHED, str(exc))
            wall = time.perf_counter() - began
            if worker.starts != started and worker.info is not None:
                info = worker.info.to_json()
                on_worker({**info, "environment": cell.environment} if cell.environment != CURRENT else info)
                wall -= worker.info.startup_seconds
            if worker.info is not None and not m.versions:
                m = replace(m, versions=dict(worker.info.versions))
            # The cell's own wall time, worker start-up excluded: what estimate.py learns from on this machine.
            m = replace(m, details={**m.details, "wall_seconds": round(max(wall, 0.0), 4)})
            if m.status is Status.TIMEOUT:
                timed_out[cell.family] = cell.size
        yield m
        progress(cell, m)
