"""lockstep.py: one cell in several workers, their timed blocks handed out in turn (the A/B gate's pairing)."""
from __future__ import annotations

import math
from dataclasses import replace

from adcompare.model.cell import Cell
from adcompare.model.status import Status
from adcompare.model.timing_policy import TimingPolicy
from adcompare.run.lockstep import LOCKSTEP_BLOCKS, PAIRED_MAX_TIME, PAIRED_PRECISION, run_in_lockstep
from adcompare.run.timing import median_interval
from adcompare.run.worker_handle import WorkerProcess

QUICK = TimingPolicy(warmup_time=0.01, block_time=0.002, min_time=0.03, max_time=0.3, hard_limit=5.0)
CELL = Cell("exp_dot_loss", "n10", "grad", "torch", "eager", "cpu", "float32")


def test_two_workers_time_one_cell_block_for_block_and_a_side_that_cannot_run_leaves_the_other_alone():
    with WorkerProcess("torch", "float32", "cpu", 1) as a, WorkerProcess("torch", "float32", "cpu", 1) as b:
        (first, busy_a), (second, busy_b) = run_in_lockstep([a, b], [CELL, CELL], timeout=300, policy=QUICK)
        assert first.status is second.status is Status.OK
        blocks = first.details[LOCKSTEP_BLOCKS]
        # Handed out until both sides' own rules were done: the same count of blocks each, at least the 7 a side
        # needs, and no block timed without a go.
        assert blocks == second.details[LOCKSTEP_BLOCKS] >= QUICK.min_samples
        assert len(first.measured.samples) == len(second.measured.samples) == blocks
        assert 0 < busy_a < 300 and 0 < busy_b < 300
        # They stopped once the median block ratio was known to ±3 % (95 %), or a side's blocks took a second.
        ratios = [math.log(b / a) for a, b in zip(first.measured.cpu_samples, second.measured.cpu_samples)]
        low, high = median_interval(ratios)
        measuring = [m.measured.total_seconds for m in (first, second)]  # each side's blocks took no more
        assert high - low <= 2 * PAIRED_PRECISION or min(measuring) >= PAIRED_MAX_TIME
        # One side refused before any block (torch's classic autograd declares no nested AD): the other times
        # alone, as many blocks as its own rule asks, and the workers stay usable.
        refused = replace(CELL, problem="saddle", size="n2", operator="nested_rr", variant="eager-autograd")
        (alone, _), (no, _) = run_in_lockstep([a, b], [CELL, refused], timeout=300, policy=QUICK)
        assert no.status is Status.UNSUPPORTED and no.details.get(LOCKSTEP_BLOCKS, 0) == 0
        assert alone.status is Status.OK and len(alone.measured.samples) == alone.details[LOCKSTEP_BLOCKS] >= 7
        assert a.alive and b.alive
