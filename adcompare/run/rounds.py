"""Rounds: a cell timed several times, each time in a fresh worker process at another moment of the run.

Blocks timed back to back in one process share that process's memory layout, its compiled code and the load the
machine had during those seconds, so their spread is within-run noise only: two honest runs on a shared machine
differ by more than it (README, "A regression gate for CI"). With `run --rounds N` every timed cell is measured
in N rounds, asv's `rounds` idea: round r runs every worker group once more in a new process, interleaved with
all other cells, and odd rounds go through the cells in reverse order so that a drift across the run does not
always land on the same cells. One value per round is what `compare` decides on, and the spread of those N
values is its noise (comparison.py): for a CPU cell the round's median process CPU time per call, else the
round's fastest wall-clock block. On a machine shared with other jobs wall time moves with the load of each
second — two honest 3-round runs of issue 23's selection on this 2-core machine, load 4–5, differed 0.3–2.9× in
round medians and 0.4–1.7× in fastest blocks — while CPU time leaves out the time the process was not running.

A cell keeps one record in the results file: written when its last round finishes, with every round's blocks in
`timing.samples` (and `timing.cpu_samples`), each round's median, fastest block, median CPU time and block
count in `timing.rounds`, `timing.round_minima`, `timing.round_cpu` and `timing.round_blocks`, and first call,
compile time and the derivative check from round 1 (later rounds repeat the check; a later round that fails makes
the cell's record that failure). Ctrl-C (and SIGTERM, which `run` turns into it) records every timed cell from the
rounds it finished (`details.rounds` < `details.rounds_planned`), so a long run interrupted in its last round keeps
what it measured; `--resume` keeps those records as they are. A driver killed outright leaves its rounds in the
round journal beside the results file (store/round_journal.py), and `--resume` writes them so (`recovered`).

Confirmation (`run --confirm PCT`, an A/B run over environments): after the last round, the cells a `compare
RUN --fail-above PCT` of the rounds so far would flag (slower or faster) are timed in as many rounds again, and
their record says how many of its rounds came after that decision (`details.confirmation_rounds`, the last ones):
`compare` counts such a cell changed only when the fresh rounds, decided alone, say so too (comparison.py).
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import replace

from adcompare.model.measurement import Measurement, Timing
from adcompare.model.status import Status
from adcompare.store.round_journal import Journal, JournalledRound


def timed(m: Measurement) -> bool:
    """A measurement whose steady state was timed: only such cells are run again in later rounds."""
    return m.status is Status.OK and m.timing is not None and bool(m.timing.samples)


def merge_rounds(rounds: Sequence[Measurement], planned: int | None = None, confirmation: int = 0) -> Measurement:
    """One record from a cell's rounds, in round order (round 1 first); `planned`: the rounds asked for, when fewer
    finished (an interrupted run); `confirmation`: how many of the rounds given are confirmation rounds (the last
    ones)."""
    first = rounds[0]
    if not timed(first):
        return first
    total = planned or len(rounds)
    for number, m in enumerate(rounds[1:], start=2):
        if m.status.is_failure:  # a cell that fails in any round is not a cell that works
            return replace(m, message=f"round {number} of {total}: {m.message}")
    ok = [m for m in rounds if timed(m)]  # a round skipped for the time budget is left out, and counted
    timings = [m.measured for m in ok]
    t0 = timings[0]
    timing = Timing(samples=tuple(s for t in timings for s in t.samples), number=t0.number,
                    first_call=t0.first_call, compile=t0.compile, compile_method=t0.compile_method,
                    warmup_calls=t0.warmup_calls, total_seconds=sum(t.total_seconds for t in timings),
                    call_seconds=sum(t.call_seconds for t in timings),
                    stopped=next((t.stopped for t in timings if t.stopped), ""),
                    rounds=tuple(float(statistics.median(t.samples)) for t in timings),
                    round_minima=tuple(float(min(t.samples)) for t in timings),
                    cpu_samples=tuple(s for t in timings for s in t.cpu_samples),
                    round_cpu=tuple(float(statistics.median(t.cpu_samples)) for t in timings)
                    if all(t.cpu_samples for t in timings) else (),
                    round_blocks=tuple(len(t.samples) for t in timings))
    walls = [m.details.get("wall_seconds", 0.0) for m in ok]
    details = {**first.details, "rounds": len(ok), "rounds_planned": total,
               "wall_seconds_all_rounds": round(sum(walls), 4)}  # wall_seconds stays round 1's: one pass's cost
    confirmed = sum(timed(m) for m in rounds[len(rounds) - confirmation:]) if confirmation else 0
    if confirmed:
        details["confirmation_rounds"] = confirmed
    return replace(first, timing=timing, details=details)


def recovered(journal: Journal, done: Collection[str]) -> list[Measurement]:
    """The records a killed run would have written on Ctrl-C: each journalled cell not among the keys `done`
    (already in the results file), merged from the rounds it finished; a cell --confirm had chosen was to have
    twice its first rounds."""
    by_key: dict[str, list[JournalledRound]] = defaultdict(list)
    for r in journal.rounds:
        if r.measurement.cell.key not in done:
            by_key[r.measurement.cell.key].append(r)
    out = []
    for key, rs in by_key.items():
        first = max((r.planned for r in rs if not r.confirmation), default=max(r.planned for r in rs))
        planned = 2 * first if key in journal.confirming else first
        out.append(merge_rounds([r.measurement for r in rs], planned=planned,
                                confirmation=sum(r.confirmation for r in rs)))
    return out
