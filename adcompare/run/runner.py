"""Runs a plan (plan.py) through one worker process per `Cell.worker_group` (adapter, dtype, device, environment,
device count) — one for every CPU device count of an adapter that sets its host devices up per cell
(Registry.worker_key).

Workers run one at a time (they share the cores), a group's cells known to end their worker last
(failures_last). After a timeout at one size, the larger sizes of the same `Cell.family` are `skipped`. Each
measurement is appended to the results file as it arrives, so a killed run resumes. With `RunOptions.rounds` > 1
every group runs once per round in fresh workers, and a timed cell is appended once, after its last round
(rounds.py). The same group in several environments (`--env`) runs with one
worker per environment, cell by cell, each cell's environments timed in lockstep — their timed blocks alternate
(lockstep.py) — so both sides of a cell see the same moments of the machine's load (the A/B gate,
comparison.py). The parent↔worker messages are in protocol.py.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from itertools import groupby
from pathlib import Path

from adcompare.model import units
from adcompare.model.cell import CURRENT, Cell
from adcompare.model.measurement import CELL_TIMEOUT, Measurement
from adcompare.model.observer import RunObserver
from adcompare.model.status import Status
from adcompare.model.timing_policy import TimingPolicy
from adcompare.plugin.registry import Registry
from adcompare.run.lockstep import run_in_lockstep
from adcompare.run.rounds import merge_rounds, timed
from adcompare.run.timing import FIRST_CALL_ONLY
from adcompare.run.worker_handle import WorkerProcess, start_together
from adcompare.study.budget import COST_ROUNDS, cost_rounds, left_out
from adcompare.study.estimate import Estimate, LiveEstimate
from adcompare.study.plan import Plan
from adcompare.verify.expectations import expected

# Worker groups whose workers start side by side (start_together), before any of their cells is timed: a fresh
# worker's interpreter and framework imports (TensorFlow's 3-5 s) keep one core busy, and the groups' workers
# started one by one were 20 of `adcompare report`'s 200 s here. Two (three where a group would otherwise start
# alone): a batch's idle workers hold their framework's memory (TensorFlow about 650 MB) while the first one's cells
# run. Counted in bundles (a group's workers in every --env environment); a batch with a GPU worker starts one at a
# time, so that no idle worker holds a device context while GPU cells are timed.
STARTED_TOGETHER = 2


def start_batches(adapters: Sequence[str]) -> list[range]:
    """Worker groups 0 … n − 1 (`adapters[i]`: group i's adapter) in the batches whose workers start together:
    pairs, and three where a group would otherwise start alone (a lone group only where it is the only one).

    A batch lasts as long as its slowest start, so one adapter's groups pair up first: in the report the quick
    suite's TensorFlow workers (1 and 4 devices, ~5 s each) started beside a JAX and a torch worker, in two batches
    of ~5 s, where together they take one. An adapter's odd group out pairs up with the next one left over."""
    batches: list[range] = []
    for _, run in groupby(range(len(adapters)), key=adapters.__getitem__):
        first, *rest = run
        count = len(rest) + 1
        batches += [range(i, min(i + STARTED_TOGETHER, first + count))
                    for i in range(first, first + count, STARTED_TOGETHER)]
    paired: list[range] = []
    for batch in batches:  # the groups left over, two in a row, start together
        if paired and len(batch) == 1 and len(paired[-1]) == 1:
            paired[-1] = range(paired[-1].start, batch.stop)
        else:
            paired.append(batch)
    joined: list[range] = []  # a group still alone joins the pair before it (the first, the pair after it)
    for i, batch in enumerate(paired):
        if len(batch) == 1 and joined and len(joined[-1]) > STARTED_TOGETHER:  # takes the last of a three
            last = joined[-1]
            joined[-1:] = [range(last.start, last.stop - 1), range(last.stop - 1, batch.stop)]
        elif len(batch) == 1 and joined:
            joined[-1] = range(joined[-1].start, batch.stop)
        elif len(batch) == 1 and i + 1 < len(paired):
            paired[i + 1] = range(batch.start, paired[i + 1].stop)
        else:
            joined.append(batch)
    return joined


def failures_last(registry: Registry, cells: Sequence[Cell]) -> list[Cell]:
    """One worker group's `cells` with those known (verify/expectations.py) to end its worker after the others,
    each part in its order: a crash or a timeout kills the worker, and a failure restarts it where its adapter
    cannot trust its state after one (Adapter.unusable_after_failure: torch, and any adapter on a GPU). After a
    group's last cell no worker is started: in the report's quick suite, torch's compiled control_loop (a graph
    break) cost its group a second torch worker, 1.4 s."""
    def ends_its_worker(c: Cell) -> bool:
        problem, adapter = registry.problems.get(c.problem), registry.adapters.get(c.adapter)
        known = expected(c, problem.compilable) if problem is not None else None
        if known is None:
            return False
        return known[0] in (Status.CRASHED, Status.TIMEOUT) or known[0] is Status.FAILED and (
            adapter is not None and adapter.unusable_after_failure(c.device) is not None)
    return sorted(cells, key=ends_its_worker)


def worker_queues(registry: Registry, cells: Sequence[Cell]) -> dict[tuple[str, ...], list[Cell]]:
    """Each worker's cells (Registry.worker_key) in the order it runs them outside --max-time and --rounds: the
    plan's (a size's cells together), fewest devices first, then failures that end a worker. A worker that runs
    several device counts' cells starts for its 1-device cells, which bear its start-up (analysis/harness_cost.py),
    and sets up the other counts as their cells come."""
    groups: dict[tuple[str, ...], list[Cell]] = defaultdict(list)
    for c in cells:
        groups[registry.worker_key(c)].append(c)
    return {group: failures_last(registry, sorted(cells, key=lambda c: c.devices)) for group, cells in groups.items()}


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
    # --confirm: given every cell's record after the last round, the keys of those to time in `rounds` more rounds
    confirm: Callable[[Sequence[Measurement]], Collection[str]] | None = None
    # The study's estimate of the cells (study/estimate.py). With a deadline, the cells run in rounds of cost
    # (study/budget.cost_rounds), the estimate corrected by each finished cell, and no cell starts whose corrected
    # estimate would end past the deadline.
    estimate: Estimate | None = None
    timeouts: Mapping[str, float] = field(default_factory=dict)  # cell key → its own timeout (Plan.timeouts)

    def cell_timeout(self, cell: Cell) -> float:
        """Seconds `cell` may run: its own timeout where the plan set one, else `timeout`."""
        return self.timeouts.get(cell.key, self.timeout)


def run(registry: Registry, p: Plan, options: RunOptions, *, observer: RunObserver = RunObserver(),
        skip_keys: frozenset[str] = frozenset()) -> list[Measurement]:
    """Run every planned cell, telling `observer` as it goes: each cell's measurement as it finishes (`on_cell`:
    append to results), each worker started, the progress, and with rounds each round's measurement (`on_round`:
    the round journal) and --confirm's choice (`on_confirm`).

    Returns the measurements as the worker made them; the run session (session.py) finishes them (cross-check,
    expectation labels) once the run ends.
    """
    measurements: list[Measurement] = []
    for m in p.decided:
        if m.cell.key not in skip_keys:
            observer.on_cell(m)
            measurements.append(m)
            observer.on_progress(None, m)
    cache_dir = Path(tempfile.mkdtemp(prefix="adcompare-cache-"))  # a per-run compiler cache, removed at the end
    groups = worker_queues(registry, [c for c in p.cells if c.key not in skip_keys])
    live = LiveEstimate(options.estimate) if options.estimate is not None and options.deadline is not None else None
    try:
        if options.rounds > 1:
            measured = _measure_in_rounds(registry, groups, options, cache_dir, observer)
        elif live is not None:
            measured = _measure_to_budget(registry, groups, options, cache_dir, observer, live)
        else:
            measured = _measure_groups(registry, groups, options, cache_dir, observer)
        for m in measured:
            observer.on_cell(m)
            measurements.append(m)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    return measurements


def _measure_to_budget(registry: Registry, groups: Mapping[tuple[str, ...], Sequence[Cell]],
                       options: RunOptions, cache_dir: Path, observer: RunObserver,
                       live: LiveEstimate) -> Iterator[Measurement]:
    """A --max-time run: every group's cells in rounds of cost (study/budget.cost_rounds: cheap cells first across
    every problem, each family smallest size first), a fresh worker per group and round, so that the budget
    measures as many cells as it can instead of spending itself on the first group's largest cells. Each round is
    chosen by the estimate as this run has corrected it so far, so a cell found cheaper than modelled runs in the
    next round. A timeout still skips its family's larger sizes in later rounds."""
    timed_out: dict[tuple[str, ...], dict[tuple[str, ...], TimedOut]] = defaultdict(dict)
    cells = [c for group in groups.values() for c in group]
    order = {c.key: i for i, c in enumerate(cells)}
    left = cells
    for number in range(len(COST_ROUNDS) + 1):
        this_round = [c for r in cost_rounds(left, live.seconds)[:number + 1] for c in r]
        ran = {c.key for c in this_round}
        by_group: dict[tuple[str, ...], list[Cell]] = defaultdict(list)
        for c in this_round:
            by_group[registry.worker_key(c)].append(c)
        deferred: list[Cell] = []
        bound = COST_ROUNDS[number] if number < len(COST_ROUNDS) else None
        yield from _measure_groups(registry, by_group, options, cache_dir, observer, live, timed_out,
                                   Deferral(bound, deferred) if bound is not None else None)
        left = sorted([*(c for c in left if c.key not in ran), *deferred], key=lambda c: order[c.key])


@dataclass(frozen=True)
class TimedOut:
    """A family's size that timed out or reached its timeout: the family's later sizes that its model prices at
    least as high are skipped, each would spend its whole timeout; cheaper ones still run (a suite's size list
    need not grow in cost: ADBench's GMM lists d64-K10 before d2-K100)."""

    cell: Cell
    why: str


@dataclass
class Deferral:
    """A --max-time round's bound on its cells' corrected estimates: a cell whose family's smaller size (or its
    adapter's cells) showed it dearer than the round's bound, and every larger size of its family after it, is
    put in `cells` for a later round instead of run now — else a model far too low (a GPU's) would put every cell
    in the first round and one worker group would run its largest sizes before the next group ran anything."""

    bound: float
    cells: list[Cell]
    families: set[tuple[str, ...]] = field(default_factory=set)

    def defers(self, cell: Cell, live: LiveEstimate) -> bool:
        if cell.family in self.families or live.seconds(cell) > self.bound:
            self.families.add(cell.family)
            self.cells.append(cell)
            return True
        return False


def _measure_groups(registry: Registry, groups: Mapping[tuple[str, ...], Sequence[Cell]],
                    options: RunOptions, cache_dir: Path, observer: RunObserver, live: LiveEstimate | None = None,
                    timed_out: Mapping[tuple[str, ...], dict[tuple[str, ...], TimedOut]] | None = None,
                    deferral: Deferral | None = None) -> Iterator[Measurement]:
    """Each worker group's cells in one fresh worker process, group after group; outside a run with a deadline the
    workers of two groups in a row (one adapter's first; start_batches) start together where all are CPU workers
    (start_together), before their cells. Groups that differ only by environment run together, one worker each,
    taking turns cell by cell in the groups' order (reversed groups, as in odd rounds, put the other environment
    first): a load that comes and goes then falls on both sides of a cell alike, which is what comparing
    environments needs."""
    bundles: dict[tuple[str, ...], list[Sequence[Cell]]] = defaultdict(list)
    for cells in groups.values():
        bundles[registry.worker_key(replace(cells[0], environment=CURRENT))].append(cells)
    order = list(bundles.values())
    with ExitStack() as stack:
        made: dict[int, list[WorkerProcess]] = {}

        def workers_of(i: int) -> list[WorkerProcess]:
            if i not in made:
                made[i] = [stack.enter_context(WorkerProcess(
                    cells[0].adapter, cells[0].dtype, cells[0].device, options.threads, registry.plugins, cache_dir,
                    interpreter=options.interpreters.get(cells[0].environment), inputs=registry.inputs,
                    seed=registry.seed, devices=min(c.devices for c in cells))) for cells in order[i]]
            return made[i]

        batches = {batch.start: batch for batch in start_batches([bundle[0][0].adapter for bundle in order])}
        for i, bundle in enumerate(order):
            if i in batches and options.deadline is None:  # a budget may leave a started worker unused
                together = [w for j in batches[i] for w in workers_of(j)]
                if len(together) > 1 and all(w.device == "cpu" for w in together):  # none idle during GPU cells
                    start_together(together)
            workers = workers_of(i)
            adapter = registry.adapters.get(bundle[0][0].adapter)
            group = registry.worker_key(bundle[0][0])
            measured = (_run_group(workers[0], bundle[0], options, observer, live,
                                   timed_out[group] if timed_out is not None else {}, deferral) if len(bundle) == 1
                        else _run_environments(workers, bundle, options, observer, live,
                                               [timed_out[registry.worker_key(cells[0])] for cells in bundle]
                                               if timed_out is not None else None))
            for m in measured:
                if adapter is not None:  # the variant's meaning as declared, recorded for the report
                    m = replace(m, compiles=adapter.compiled_from(m.cell.variant))
                yield m
            for worker in workers:
                worker.close()


def _measure_in_rounds(registry: Registry, groups: Mapping[tuple[str, ...], Sequence[Cell]],
                       options: RunOptions, cache_dir: Path, observer: RunObserver) -> Iterator[Measurement]:
    """Every group once per round, in fresh workers; odd rounds in reverse order; each round's measurement
    journalled (`observer.on_round`). A cell is yielded once: when round 1 did not time it (failed, unsupported, …),
    else merged after its last round (rounds.py) — with `options.confirm`, after the confirmation rounds of the
    cells it chose. Ctrl-C yields every timed cell merged from the rounds it finished (its details say how many
    of how many) before it goes on up: a long run interrupted in its last round keeps what it measured."""
    seen: dict[str, list[Measurement]] = defaultdict(list)
    yielded: set[str] = set()
    confirming: set[str] = set()
    n = options.rounds

    def record(key: str, planned: int | None = None) -> Measurement:
        yielded.add(key)
        extra = len(seen[key]) - n if key in confirming else 0
        return merge_rounds(seen[key], planned, confirmation=max(extra, 0))

    def rounds(numbers: range, keys: Collection[str] | None) -> Iterator[Measurement]:
        """The rounds `numbers` of the cells round 1 timed (of `keys` only, where given)."""
        for number in numbers:
            chosen = {g: [c for c in cells if (number == 0 or timed(seen[c.key][0]))
                          and (keys is None or c.key in keys)] for g, cells in groups.items()}
            if number % 2:
                chosen = {g: cells[::-1] for g, cells in reversed(list(chosen.items()))}
            for m in _measure_groups(registry, {g: c for g, c in chosen.items() if c}, options, cache_dir,
                                     observer):
                seen[m.cell.key].append(m)
                confirming_now = number >= n
                observer.on_round(m, 2 * n if confirming_now else n, confirming_now)
                yield m

    try:
        for m in rounds(range(n), None):
            if len(seen[m.cell.key]) == 1 and not timed(m):
                yield record(m.cell.key)
            elif len(seen[m.cell.key]) == n and options.confirm is None:
                yield record(m.cell.key)
        if options.confirm is not None:
            held = [key for key in seen if key not in yielded]
            confirming.update(options.confirm([merge_rounds(seen[key]) for key in held]))
            observer.on_confirm(confirming)
            for _ in rounds(range(n, 2 * n), confirming):
                pass
            for key in held:
                yield record(key)
    except KeyboardInterrupt:
        for key in list(seen):
            if key not in yielded:
                yield record(key, planned=n + (n if key in confirming else 0))
        raise


def _run_group(worker: WorkerProcess, cells: Sequence[Cell], options: RunOptions, observer: RunObserver,
               live: LiveEstimate | None, timed_out: dict[tuple[str, ...], TimedOut], deferral: Deferral | None = None):
    """One worker's cells in order, yielding each measurement; a timeout skips the larger sizes of its family; a
    cell the round's `deferral` defers is left for a later round."""
    for cell in cells:
        if deferral is not None and live is not None and _stopped_before(cell, timed_out, options) is None \
                and deferral.defers(cell, live):
            continue
        observer.on_progress(cell, None)
        m = _left_out(cell, timed_out, options, live)
        if m is None:
            started = worker.starts
            m = _recorded(worker, *_run_one(worker, cell, options), started, observer, timed_out, live)
        yield m
        observer.on_progress(cell, m)


def _run_environments(workers: Sequence[WorkerProcess], bundle: Sequence[Sequence[Cell]], options: RunOptions,
                      observer: RunObserver, live: LiveEstimate | None,
                      timed_out: list[dict[tuple[str, ...], TimedOut]] | None = None) -> Iterator[Measurement]:
    """One worker group in several environments (`bundle[i]`: its cells in `workers[i]`'s), cell by cell: each
    cell's environments timed in lockstep (lockstep.py), or one after the other when checking only. `timed_out`:
    each side's families that timed out (shared across a --max-time run's rounds)."""
    timed_out = timed_out if timed_out is not None else [{} for _ in workers]
    sides_of: dict[tuple, dict[int, Cell]] = defaultdict(dict)  # a cell across environments → side → its cell
    for side, cells in enumerate(bundle):
        for cell in cells:
            sides_of[cell.across_environments][side] = cell
    for sides in sides_of.values():
        results: dict[int, Measurement] = {}
        for side, cell in sides.items():
            observer.on_progress(cell, None)
            left = _left_out(cell, timed_out[side], options, live)
            if left is not None:
                results[side] = left
        ready = [side for side in sides if side not in results]
        started = {side: workers[side].starts for side in ready}
        if options.time_it and len(ready) > 1:
            timed = run_in_lockstep([workers[s] for s in ready], [sides[s] for s in ready],
                                    timeout=options.cell_timeout(sides[ready[0]]), policy=options.policy)
        else:
            timed = [_run_one(workers[side], sides[side], options) for side in ready]
        for side, (m, wall) in zip(ready, timed):
            results[side] = _recorded(workers[side], m, wall, started[side], observer, timed_out[side], live)
        for side in sorted(results):
            yield results[side]
            observer.on_progress(sides[side], results[side])


def _run_one(worker: WorkerProcess, cell: Cell, options: RunOptions) -> tuple[Measurement, float]:
    """One cell in its worker, unpaced, with the seconds it took (start-up included)."""
    began = time.perf_counter()
    try:
        m = worker.run(cell, timeout=options.cell_timeout(cell), time_it=options.time_it, policy=options.policy)
    except RuntimeError as exc:  # the worker failed to start
        m = Measurement(cell, Status.CRASHED, str(exc))
    return m, time.perf_counter() - began


def _stopped_before(cell: Cell, timed_out: Mapping[tuple[str, ...], TimedOut], options: RunOptions
                    ) -> TimedOut | None:
    """The size of `cell`'s family that timed out before it, if the model prices `cell` at least as high."""
    stopped = timed_out.get(cell.family)
    if stopped is not None and (options.estimate is None or options.estimate.dearer(cell, stopped.cell)):
        return stopped
    return None


def _left_out(cell: Cell, timed_out: Mapping[tuple[str, ...], TimedOut], options: RunOptions,
              live: LiveEstimate | None = None) -> Measurement | None:
    """The record of a cell that does not run: a smaller size of its family timed out or reached its timeout, the
    budget is spent, or its estimate (corrected by this run's cells) would end past the deadline."""
    stopped = _stopped_before(cell, timed_out, options)
    if stopped is not None:
        return Measurement(cell, Status.SKIPPED, f"skipped: the smaller size {stopped.why}")
    if options.deadline is None:
        return None
    left = options.deadline - time.monotonic()
    if left <= 0:
        return left_out(cell, options.budget, "the time budget was spent before this cell started")
    if live is not None and (expected := live.seconds(cell)) > left:
        return left_out(cell, options.budget, f"estimated at {units.whole_seconds(expected)} (corrected by this run's "
                                              f"cells), more than the {units.whole_seconds(left)} left")
    return None


def _recorded(worker: WorkerProcess, m: Measurement, wall: float, started: int, observer: RunObserver,
              timed_out: dict[tuple[str, ...], TimedOut], live: LiveEstimate | None = None) -> Measurement:
    """A cell's measurement as recorded: the worker's versions, and the cell's own wall time, worker start-up
    excluded (what estimate.py learns from on this machine, the start-up kept apart as `worker_start_seconds`, the
    harness's cost: analysis/harness_cost.py); a worker started for it is reported first, and a timeout — or a
    cell its timeout stopped with a few calls kept — is noted in `timed_out` (the larger sizes of its family are
    skipped: each would spend its whole timeout)."""
    started_here: dict[str, float] = {}
    if (worker.starts != started or worker.start_share is not None) and worker.info is not None:
        info = worker.info.to_json()
        environment = m.cell.environment
        observer.on_worker({**info, "environment": environment} if environment != CURRENT else info)
        start = worker.info.startup_seconds
        if worker.starts != started:  # it started within this cell's wall time
            wall -= start
        elif worker.start_share is not None:  # before it, beside other workers (start_together): its part of that
            start = worker.start_share
        worker.start_share = None
        started_here = {"worker_start_seconds": round(start, 4)}
    if worker.info is not None and not m.versions:
        m = replace(m, versions=dict(worker.info.versions))
    if m.status is Status.TIMEOUT:
        timed_out[m.cell.family] = TimedOut(m.cell, f"{m.cell.size} timed out")
    elif m.timing is not None and m.timing.stopped in (CELL_TIMEOUT, FIRST_CALL_ONLY):
        calls = len(m.timing.samples)  # measured, but a dearer size would spend its whole timeout
        timed_out[m.cell.family] = TimedOut(m.cell, f"{m.cell.size} reached its timeout ({calls} call"
                                                    f"{'s' * (calls != 1)} measured)")
    if live is not None:
        live.learn(m.cell, max(wall, 0.0), ran=m.status in (Status.OK, Status.MISMATCH, Status.NAN))
    return replace(m, details={**m.details, "wall_seconds": round(max(wall, 0.0), 4), **started_here})
