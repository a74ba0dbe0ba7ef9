"""One cell in several environments at once (the A/B gate, `run --env base=@PY --env new=@PY`), its timed blocks
alternating between the environments' workers.

Timed one after the other, the two sides of a cell are seconds apart (each prepares, compiles and warms up first),
and on a shared machine the load of one moment is not the load of the next: measured here at load 5–6, one paired
round's CPU-time ratio wandered by σ ≈ 0.15–0.30 between honest sides, so a 20 % slowdown hid in it. Paced
requests (protocol.py) make the worker ask before each timed block: each side prepares, makes its first call and
warms up on its own, in turn, then the parent hands out the blocks one side after the other — block i of every
side within a few block lengths (10 ms) of the others — so the load of a moment falls on both sides alike, and
`compare` pairs the blocks (comparison.paired_blocks). Blocks go on until every side's own timing rule is done
*and* the pairing is precise: the distribution-free 95 % interval of the median block ratio (each side against
the first; process CPU time on the CPU, wall time on a device) lies within ±PAIRED_PRECISION — or each side's
blocks have taken PAIRED_MAX_TIME. Measured here at load 4, one block ratio of an honest pair wanders by
σ ≈ 0.2 (a 10 ms block is preempted a few times, and what that costs in caches differs block to block), so the
sides' own rules (7–20 blocks) left a round's paired ratio uncertain by ±9 %; about a hundred blocks bring it to
±3 %. The sides time the same number of blocks; one that stops on its own (hard limit, failure) leaves the others
to finish on their own rules.

Each side's cell timeout counts only the time the parent waited on that side (its own work), which is also the
wall time it reports (estimate.py learns from it).
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from adcompare.model.cell import Cell
from adcompare.model.measurement import Measurement
from adcompare.model.status import Status
from adcompare.model.timing_policy import TimingPolicy
from adcompare.run.protocol import Request, Turn
from adcompare.run.timing import median_interval
from adcompare.run.worker_handle import WorkerProcess

LOCKSTEP_BLOCKS = "lockstep_blocks"  # a measurement's details key
PAIRED_PRECISION = 0.03  # half-width of the median block log ratio's 95 % interval at which the pairing is precise
PAIRED_MAX_TIME = 1.0  # seconds of blocks per side after which an imprecise pairing stops anyway


@dataclass
class _Side:
    worker: WorkerProcess
    cell: Cell
    timeout: float
    busy: float = 0.0  # seconds the parent waited on this side
    done: bool = False  # its own timing rule would stop
    blocks: int = 0  # blocks it was told to time
    per_call: list[float] = field(default_factory=list)  # each block's seconds per call, on the pairing's clock
    spent: float = 0.0  # seconds its blocks took
    result: Measurement | None = None

    def hear(self) -> None:
        """Wait for this side's next record: a turn (it waits for a go) or its measurement (it is finished)."""
        began = time.perf_counter()
        answer = self.worker.answer(self.cell, self.timeout - self.busy, self.timeout)
        self.busy += time.perf_counter() - began
        if isinstance(answer, Turn):
            self.done, self.spent = answer.done, answer.spent
            per_call = answer.cpu if self.cell.device == "cpu" else answer.wall
            if per_call is not None:
                self.per_call.append(per_call)
        else:
            self.result = answer


def run_in_lockstep(workers: Sequence[WorkerProcess], cells: Sequence[Cell], *, timeout: float,
                    policy: TimingPolicy = TimingPolicy()) -> list[tuple[Measurement, float]]:
    """Time `cells[i]` in `workers[i]` (the same cell in each side's environment), the sides' timed blocks in turn;
    each side's measurement (its details say how many blocks it timed in lockstep) with the seconds the parent
    waited on it (start-up included)."""
    sides = [_Side(w, c, timeout) for w, c in zip(workers, cells)]
    for side in sides:  # one at a time: a side's compile must not share the cores with another's blocks
        began = time.perf_counter()
        try:
            side.worker.submit(Request(side.cell, True, policy, paced=True))
        except RuntimeError as exc:  # the worker failed to start
            side.result = Measurement(side.cell, Status.CRASHED, str(exc))
        side.busy += time.perf_counter() - began
        if side.result is None:
            side.hear()
    while waiting := [s for s in sides if s.result is None]:
        go = not all(s.done for s in waiting) or not (_precise(waiting, policy)
                                                      or all(s.spent >= PAIRED_MAX_TIME for s in waiting))
        for side in waiting:
            side.worker.go(go)
            side.blocks += go
            side.hear()
            if not go and side.result is None:  # told to stop, it asked again
                side.worker.kill()
                side.result = Measurement(side.cell, Status.FAILED,
                                          "adcompare: the worker went on timing after it was told to stop")
    return [(_with_blocks(s.result, s.blocks), s.busy) for s in sides if s.result is not None]


def _precise(sides: Sequence[_Side], policy: TimingPolicy) -> bool:
    """Whether the median block ratio of every side against the first is known to ±PAIRED_PRECISION (a side
    timing alone is as precise as its own rule makes it)."""
    first, others = sides[0].per_call, sides[1:]
    for side in others:
        ratios = [math.log(b / a) for a, b in zip(first, side.per_call) if a > 0 and b > 0]
        if len(ratios) < policy.min_samples:
            return False
        low, high = median_interval(ratios)
        if high - low > 2 * PAIRED_PRECISION:
            return False
    return True


def _with_blocks(m: Measurement, blocks: int) -> Measurement:
    """The measurement with the number of its blocks timed in lockstep (`details["lockstep_blocks"]`): 0 for a
    side that never asked (an older worker, or a cell that failed before timing)."""
    return replace(m, details={**m.details, LOCKSTEP_BLOCKS: blocks})
