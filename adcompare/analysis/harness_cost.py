"""The harness's own cost: what a run spent outside the frameworks' calls, per cell and in all.

A cell's wall (`details.wall_seconds`, the runner's, its worker's start-up excluded) is the framework's seconds —
prepare (transforms, compilation: `details.prepare_seconds`), the first call, the timed calls
(`timing.call_seconds`), and the release of what prepare started beyond memory (torch's data-parallel helper
processes: `details.release_seconds`) — and the harness's: the worker's stages in `details.overhead_seconds`
(inputs, setup, reference, check, timing_loop, cleanup) and the rest ("other": the parent, the protocol,
the worker's loop).
A worker's start-up (`details.worker_start_seconds`, on the cell it was started for) is the harness's too, shared
by the cells of its worker group (`Cell.worker_group`; where one worker also ran other device counts' cells —
Registry.worker_key, torch — by the group of the cell it was started for, usually a 1-device one, as the runner
runs those first; a --max-time round or a restart may start it for another count's); for
workers started side by side (run/worker_handle.start_together), the part of the wall time their starts took
together. Likewise a float64 reference, differenced once per run by the first cell
that needs it and read back by the others (verify/shared_references.py), is shared by the cells that use it:
each is charged the group's reference seconds ÷ its cells, and its wall moves by the same amount, so the run's
totals are what was spent; so are a size's inputs, built once by a worker for its cells at that size. The goal
(issue 39): at most max(10 %, 1 s) of every cell's wall time.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from adcompare.model.measurement import CELL_TIMEOUT, UNFINISHED_CALL, Measurement
from adcompare.model.status import NOT_RUN
from adcompare.verify.reference import SHARED_REFERENCE

STAGES = ("worker_start", "inputs", "setup", "reference", "check", "timing_loop", "cleanup", "other")
GOAL = "at most max(10 %, 1 s) of each cell's wall time"


@dataclass(frozen=True)
class CellCost:
    measurement: Measurement
    wall: float  # the cell's seconds, its share of its worker's start-up included
    own: float  # of which the harness's
    stages: dict[str, float] = field(default_factory=dict)  # the harness's seconds by STAGES

    @property
    def over_goal(self) -> bool:
        return _over(self.own, self.wall)

    @property
    def over_goal_without_start(self) -> bool:
        """Over the goal once its share of a worker's start-up is out of both its wall and its harness seconds (a
        run of a few cells gives each start-up to few; a corpus run to hundreds)."""
        start = self.stages.get("worker_start", 0.0)
        return _over(self.own - start, self.wall - start)


def _over(own: float, wall: float) -> bool:
    """The goal (GOAL): at most max(10 %, 1 s) of the wall."""
    return own > max(0.1 * wall, 1.0)


@dataclass(frozen=True)
class HarnessCost:
    cells: tuple[CellCost, ...]  # every cell with the split, worst (most harness seconds) first

    @property
    def wall(self) -> float:
        return sum(c.wall for c in self.cells)

    @property
    def own(self) -> float:
        return sum(c.own for c in self.cells)

    @property
    def over_goal(self) -> tuple[CellCost, ...]:
        return tuple(c for c in self.cells if c.over_goal)

    def worst(self, n: int = 5) -> tuple[CellCost, ...]:
        return self.cells[:n]

    def __bool__(self) -> bool:
        return bool(self.cells)


def _framework_seconds(m: Measurement) -> float:
    # the call a timeout stopped ran the framework: after timed calls (UNFINISHED_CALL), or after the checked first
    # call of a cell that keeps none (lower_bound_seconds, on its `timeout` record)
    keys = ("prepare_seconds", "release_seconds", UNFINISHED_CALL, "lower_bound_seconds")
    seconds = sum(float(m.details.get(key, 0.0) or 0.0) for key in keys)
    if m.timing is not None:
        return seconds + m.timing.first_call + m.timing.call_seconds
    return seconds + float(m.details.get("first_call_seconds", 0.0) or 0.0)


def _reference_group(m: Measurement) -> tuple:
    """The cells of a run whose float64 reference is one (verify/shared_references.py): a reference is differenced
    once per run for a problem, size, dtype and what it is cached under (a size's jacfwd and jacrev share one
    Jacobian), then read back by every other cell that needs it. Workers of another --env environment difference
    their own; grouping them by environment as well shares each one's cost among its own cells."""
    c = m.cell
    return (m.machine, c.environment, c.problem, c.size, c.dtype, SHARED_REFERENCE.get(c.operator, c.operator))


def _inputs_group(m: Measurement) -> tuple:
    """The cells of a worker that read one size's inputs: a worker builds a size's arrays once and hands them to its
    next cells at that problem, size and dtype (verify/cell_inputs.py, `reuse`: BA's are seconds to build)."""
    c = m.cell
    return (m.machine, *c.worker_group, c.problem, c.size, c.dtype)


SHARED_STAGES = {"reference": _reference_group, "inputs": _inputs_group}  # stage → the cells that share its cost


def harness_cost(measurements: Sequence[Measurement]) -> HarnessCost:
    """The harness's cost of every cell that ran and recorded the split (records written before it are left out)."""
    ran = [m for m in measurements if m.status not in NOT_RUN
           and isinstance(m.details.get("wall_seconds"), (int, float))
           and isinstance(m.details.get("overhead_seconds"), dict)]
    starts: dict[tuple, float] = defaultdict(float)
    members: dict[tuple, int] = defaultdict(int)
    spent: dict[tuple, float] = defaultdict(float)  # (stage, *group) → the seconds its cells spent in that stage
    sharing: dict[tuple, int] = defaultdict(int)
    for m in ran:
        group = (m.machine, *m.cell.worker_group)
        starts[group] += float(m.details.get("worker_start_seconds", 0.0) or 0.0)
        members[group] += 1
        for stage, group_of in SHARED_STAGES.items():
            shared = (stage, *group_of(m))
            spent[shared] += float(m.details["overhead_seconds"].get(stage, 0.0) or 0.0)
            sharing[shared] += 1
    out = []
    for m in ran:
        group = (m.machine, *m.cell.worker_group)
        share = starts[group] / members[group]
        split = {k: float(v) for k, v in m.details["overhead_seconds"].items()}
        # a shared reference's or inputs' seconds charged to the cells that use them, like a worker's start-up
        keys = {stage: (stage, *group_of(m)) for stage, group_of in SHARED_STAGES.items()}
        shares = {stage: spent[key] / sharing[key] for stage, key in keys.items()}
        moved = sum(shares[stage] - split.get(stage, 0.0) for stage in shares)
        wall = float(m.details["wall_seconds"])
        own = max(0.0, wall - _framework_seconds(m))
        if m.timing is not None and m.timing.stopped == CELL_TIMEOUT and UNFINISHED_CALL not in m.details:
            own = min(own, sum(split.values()))  # recorded before UNFINISHED_CALL: the rest is that call's, wholly
        stages = {"worker_start": share, **{k: split.get(k, 0.0) for k in STAGES[1:-1]}, **shares,
                  "other": max(0.0, own - sum(split.values()))}
        out.append(CellCost(m, wall + share + moved, own + share + moved, stages))
    return HarnessCost(tuple(sorted(out, key=lambda c: -c.own)))
