"""Timing one prepared cell: first call, compile time, then steady state in calibrated blocks.

Algorithm (modelled on torch.utils.benchmark's blocked_autorange):
1. first call: one `run(); sync(out)`, timed alone (includes JIT compilation where the framework compiles lazily);
2. warm-up: calls until `warmup_time` has passed (at least two, or one that took over `max_time` ÷ 8), so caches
   and allocators settle;
3. calibration: `number` calls per block so a block lasts about `block_time` — timer overhead (~0.1 µs) is then
   negligible even for µs-scale cells — taken from the fastest warm-up call (one preempted call would otherwise
   make every block a few calls long);
4. blocks until `min_time` has passed and at least `min_samples` blocks exist, or `max_time` is spent with at
   least `min_samples` blocks (the rank test needs them), or `hard_limit` is spent;
   each block yields one per-call sample (block time ÷ number); a block ten times longer than planned shrinks
   `number` for the rest, one shorter than a quarter of it grows `number`. The sync is inside every call.
5. early stop: once at least `min_samples` blocks exist and the median's distribution-free 95 % interval (order
   statistics of the samples, binomial ranks) lies within ±`precision` of the median, the cell stops before
   `min_time`: more blocks would not change what the report says, and the quick suite needs the time for sizes.
6. paced (`pace` given: the same cell timed in several environments at once, lockstep.py): before each block the
   worker asks `pace(done, wall, cpu, spent)` — `done` saying whether rule 4 or 5 would stop here, then the last
   block's seconds per call (wall and CPU; None before the first) and the seconds its blocks took so far — and
   times the block only when told to go; so it may time more blocks than its own rule asks (the pairing is not
   precise yet), and it stops when told to (the hard limit still stops it on its own). The first go also covers
   the warm-up, so a side is warm when its blocks start, not cooled by its partner's compile.
7. slow cells: when the checked first call already took longer than the policy allots to a block (`block_allotment`,
   max_time ÷ min_samples), the next call is timed as a sample, not as a warm-up; if it too exceeds the allotment, the
   cell is slow and is timed without warm-up, one call per block, each call reported (`on_call`) as it finishes, until
   `slow_samples` calls (`min_samples`; 3 in a `--max-time` run, 5 in the report's quick suite), the median's precision,
   or the next call (predicted at the slowest so far) would end past the `deadline` (the cell's timeout, where the
   caller gives one; else `hard_limit`). Warm-up effects are negligible against a call of a large fraction of a second,
   and calls are what a slow cell's timeout affords. Its samples are those calls; a timing with fewer than
   `slow_samples` says why in `stopped` ("deadline": the next call would not have fitted; the parent writes "cell
   timeout" when it kept the calls a killed worker had reported). Where not even a second call fits, the checked first
   call is the one sample ("first call only"), if it compiled nothing (the variant does not compile, or it compiled
   ahead of time); else the cell is a timeout whose first call is recorded. Like ADBench's runs, every finished call
   counts; we keep them all and report their median like any other cell's, the minimum beside it (ADBench keeps the
   minimum), so slow and fast cells are summarised alike. A compiled cell whose first call was slow only because it
   compiled is not slow: its second call, under the allotment, is its first warm-up call.
Each block also records the process's CPU time per call (`cpu_samples`, all its threads): time the process was
not scheduled is not in it, which is what lets `compare` gate CPU cells on a machine shared with other jobs.
Compile time is taken ahead of time when the adapter did so in `prepare`, else, for compiled variants, as
first call minus steady-state median ("first call minus steady state").
"""
from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable
from statistics import NormalDist
from typing import Any

from adcompare.model.measurement import Timing
from adcompare.model.timing_policy import TimingPolicy
from adcompare.plugin.adapter import Prepared

FIRST_CALL_MINUS_STEADY = "first call minus steady state"


@functools.lru_cache(maxsize=None)
def _median_ranks(n: int, level: float) -> int:
    """Largest k with P(k < B ≤ n − 1 − k) ≥ level for B ~ binomial(n, ½); exact up to n = 100, the normal
    approximation above (it runs after every block, so it must stay cheap)."""
    if n > 100:
        return max(0, math.floor(n / 2 - NormalDist().inv_cdf((1 + level) / 2) * math.sqrt(n) / 2) - 1)
    low, below = 0, math.comb(n, 0) / 2 ** n  # below = P(B ≤ low)
    while low + 1 <= (n - 1) // 2:
        nxt = below + math.comb(n, low + 1) / 2 ** n
        if 1 - 2 * nxt < level:  # coverage of the next narrower interval, by symmetry 1 − 2·P(B ≤ k)
            break
        low, below = low + 1, nxt
    return low


def median_interval(samples: list[float], level: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval for the median: order statistics x₍ₗ₎, x₍ᵤ₎ with binomial(n, ½) ranks, coverage
    ≥ `level` (for n = 7 that is the min and the max, 98 %)."""
    data = sorted(samples)
    low = _median_ranks(len(data), level)
    return data[low], data[len(data) - 1 - low]


def precise(samples: list[float], policy: TimingPolicy) -> bool:
    if len(samples) < policy.min_samples:
        return False
    data = sorted(samples)
    mid = data[len(data) // 2] if len(data) % 2 else (data[len(data) // 2 - 1] + data[len(data) // 2]) / 2
    low, high = median_interval(samples)
    return mid > 0 and high - mid <= policy.precision * mid and mid - low <= policy.precision * mid


def first_call(prepared: Prepared, sync: Callable[[Any], None]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = prepared.run()
    sync(out)
    return out, time.perf_counter() - start


# timing.measure's `pace` (rule 6): (done, last block's wall per call, its CPU per call, seconds spent) → go on?
Pace = Callable[[bool, float | None, float | None, float], bool]


def _calls_per_block(per_call: float, policy: TimingPolicy) -> int:
    return int(min(policy.max_number, max(1, math.ceil(policy.block_time / max(per_call, 1e-9)))))


# timing.measure's `on_call` (rule 7): (wall seconds, process CPU seconds) of one timed call of a slow cell
OnCall = Callable[[float, float], None]
DEADLINE = "deadline"  # Timing.stopped: a slow cell stopped before a call that would have ended past its deadline
# Timing.stopped: a slow cell whose checked first call is its one sample, since a second would have ended past its
# deadline (only where that call compiled nothing: the variant does not compile, or compiled ahead of time)
FIRST_CALL_ONLY = "first call only"


def first_call_is_a_sample(compiled: bool, compile_method: str) -> bool:
    """Whether a cell's checked first call was a plain call of its operator, so that it may stand as a timed
    sample when no other call fits in the cell's timeout: nothing was compiled in it."""
    return not compiled or compile_method.startswith("ahead of time")


def measure(prepared: Prepared, sync: Callable[[Any], None], first_call_seconds: float, *,
            compiled: bool, policy: TimingPolicy = TimingPolicy(),
            pace: Pace | None = None, deadline: float | None = None, on_call: OnCall | None = None) -> Timing:
    """Steady-state timing after a first call that the caller already made (and checked); `pace`: rule 6 above;
    `deadline` (a time.perf_counter() value) and `on_call`: rule 7."""
    run = prepared.run
    began = time.perf_counter()

    cpu_samples: list[float] = []
    in_calls = [0.0]  # wall seconds inside the calls, for the timing loop's own cost (Timing.call_seconds)

    def block(number: int) -> float:
        cpu, start = time.process_time(), time.perf_counter()
        for _ in range(number):
            sync(run())
        elapsed = time.perf_counter() - start
        cpu_samples.append((time.process_time() - cpu) / number)
        in_calls[0] += elapsed
        return elapsed

    # The first go covers the warm-up and the first block; none means the parent is gone: time unpaced.
    if pace is not None and not pace(False, None, None, 0.0):
        pace = None
    warm, calls, fastest = 0.0, 0, math.inf
    if pace is None and first_call_seconds > policy.block_allotment:  # rule 7: perhaps a slow cell
        if deadline is not None and began + first_call_seconds > deadline \
                and first_call_is_a_sample(compiled, prepared.compile_method):
            return finish(prepared, Timing(samples=(first_call_seconds,), number=1, first_call=first_call_seconds,
                                           warmup_calls=0, stopped=FIRST_CALL_ONLY), compiled=compiled)
        elapsed = block(1)
        if elapsed > policy.block_allotment:
            if on_call is not None:
                on_call(elapsed, cpu_samples[-1])
            slow = _slow(prepared, sync, first_call_seconds, elapsed, cpu_samples, policy=policy, compiled=compiled,
                         began=began, deadline=deadline, on_call=on_call, block=block)
            return dataclasses.replace(slow, call_seconds=in_calls[0])
        warm, calls, fastest = elapsed, 1, elapsed  # it compiled on its first call: this was a warm-up call
    while calls < 2 or warm < policy.warmup_time:
        elapsed = block(1)
        warm += elapsed
        calls += 1
        fastest = min(fastest, elapsed)
        if warm > policy.max_time / 4 or elapsed > policy.max_time / 8:
            break
    number = _calls_per_block(fastest, policy)

    samples: list[float] = []
    del cpu_samples[:]  # warm-up blocks are not samples
    spent, done = 0.0, False
    while True:
        if pace is not None and samples and not pace(done, samples[-1], cpu_samples[-1], spent):
            break
        elapsed = block(number)
        spent += elapsed
        samples.append(elapsed / number)
        if number > 1 and elapsed > 10 * policy.block_time:
            # Calibration came from one fast warm-up call; resize so the remaining blocks keep to their length.
            number = max(1, int(number * policy.block_time / elapsed))
        elif elapsed < policy.block_time / 4:  # warm-up calls slower than steady state: blocks too short to time
            number = max(number, _calls_per_block(elapsed / number, policy))
        enough = spent >= policy.min_time and len(samples) >= policy.min_samples
        full = len(samples) >= policy.min_samples
        done = enough or (spent >= policy.max_time and full) or precise(samples, policy)
        if spent >= policy.hard_limit or (done and pace is None):
            break
    return finish(prepared, Timing(samples=tuple(samples), number=number, first_call=first_call_seconds,
                                   warmup_calls=calls, total_seconds=time.perf_counter() - began,
                                   cpu_samples=tuple(cpu_samples), call_seconds=in_calls[0]), compiled=compiled)


def finish(prepared: Prepared, timing: Timing, *, compiled: bool) -> Timing:
    """The timing with its compile time: the adapter's, ahead of time, else first call minus the median."""
    compile_seconds, method = prepared.compile_seconds, prepared.compile_method
    if compile_seconds is None and compiled:
        compile_seconds = max(0.0, timing.first_call - timing.median)
        method = method or FIRST_CALL_MINUS_STEADY
    return dataclasses.replace(timing, compile=compile_seconds,
                               compile_method=method if compile_seconds is not None else "")


def _slow(prepared: Prepared, sync: Callable[[Any], None], first_call_seconds: float, second: float,
          cpu_samples: list[float], *, policy: TimingPolicy, compiled: bool, began: float, deadline: float | None,
          on_call: OnCall | None, block: Callable[[int], float]) -> Timing:
    """Rule 7: one call per block, no warm-up, each call reported; stops at slow_samples, at the precision, or
    before a call that would end past the deadline (without one, at hard_limit)."""
    samples, stopped = [second], ""
    while len(samples) < policy.slow_samples and not precise(samples, policy):
        now = time.perf_counter()
        if deadline is None:
            if now - began >= policy.hard_limit:
                break
        elif now + max(samples) > deadline:
            stopped = DEADLINE
            break
        samples.append(block(1))
        if on_call is not None:
            on_call(samples[-1], cpu_samples[-1])
    return finish(prepared, Timing(samples=tuple(samples), number=1, first_call=first_call_seconds,
                                   warmup_calls=0, total_seconds=time.perf_counter() - began,
                                   cpu_samples=tuple(cpu_samples), stopped=stopped), compiled=compiled)
