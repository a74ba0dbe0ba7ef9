"""`adcompare compare`: per matching cell of two results files, the ratio of medians and whether it is noise; or,
given one file from a run over several environments, each cell in one environment against the same cell in
the baseline environment, with whether their derivative values agree.

Which cells match is decided in one place, `pairs` (extend it there to pair on more than the cell). Whether a
difference is real depends on what the files hold (`differences`):

- both sides timed in rounds (`run --rounds N`, N ≥ 2; rounds.py): each round, a fresh worker process at another
  moment of the run, gives one value — for a CPU cell its median process CPU time per call (time the process was
  not running is not in it), else (a GPU cell, or files without CPU times) its fastest wall-clock block — and the
  noise model is the spread of those values between rounds. The ratio is median(candidate rounds) ÷
  median(baseline rounds); its interval runs from the low end of the candidate's round interval over the high
  end of the baseline's to the reverse (each side's distribution-free 95 % interval of its median round,
  timing.median_interval: the range of the rounds for fewer than 6). The difference counts when that whole
  interval is beyond 1 ± threshold: every round of one side is slower than every round of the other by more
  than the threshold. No Holm correction: with a few rounds the bar is the effect clearing the spread, not a
  p-value, and it is the same bar for one cell as for a thousand.
  **Against the run-wide shift** (`RunShift`): a run made while the shared machine was busier is slower in every
  cell, CPU time included (measured here: 3–17 %), which no per-cell spread between rounds covers. So the cells
  decided between rounds (per clock, ≥ MIN_SHIFT_CELLS of them) estimate the shift of the whole run — the median
  over cells of candidate ÷ baseline, with the distribution-free interval of that median over cells — and each
  cell is judged against it: a regression when every candidate round is slower than every baseline round *times
  the shift* by more than the threshold. One slowed cell barely moves a median over dozens; a change that slows
  every cell moves the shift instead, which `compare` prints on its own line and `--fail-on-shift PCT` gates.
  Multiplying every candidate cell by a constant changes the shift, never a verdict.
- across the environments of one run (`pair_environments`; the A/B gate, `run --env base=@PYTHON --env current
  --rounds N`): the runner times each cell's environments in lockstep (lockstep.py: their timed blocks alternate,
  milliseconds apart), so round r of both sides saw the same moments of the machine's load. The noise model is
  then the spread of the *paired* ratios candidate_r ÷ baseline_r (`PairedDifference`) — each the median over the
  round's blocks of candidate block ÷ baseline block (`paired_blocks`; files without `round_blocks`: the ratio of
  the round values) — in which the load that drifts from minute to minute, or from one block to the next,
  cancels: the between-run variation two separate runs cannot remove (10–20 % in small eager cells here). What
  pairing cannot remove is what differs between the two processes at one moment (a block preempted on one side
  only, each process's own memory layout); it is pooled over the run's cells and over each class (adapter and
  variant; paired_noise.py) and sets the bar: a cell is slower when the interval exp(mean log ratio ± z·σ/√n)
  lies above 1 (σ: the larger of its class's and the run's, times the cell's own block noise where it exceeds
  its class's: `block_spread`; z: Bonferroni over the cells compared), its ratio
  exp(mean) is beyond 1 + threshold, and every paired round is slower — asv's rule for `--factor`: the noise
  model says whether it changed, the threshold whether by enough to matter. (The rules above, without a noise
  model, ask the whole interval to clear the threshold.) A noisy run flags less and says the smallest slowdown
  it could have caught.
  Below MIN_POOLED_CELLS paired cells nothing is pooled, and every paired round must be slower by more than the
  threshold. Nothing is excused by a shift: both sides ran under one load, so a change that slows every cell
  is the change.
- otherwise (files written without rounds, e.g. before `--rounds` existed): significance.py's test on the
  per-block samples of one process (bootstrap interval, Holm-corrected rank test, effect threshold), the test
  the report ranks with; those cells form one family for Holm's correction. It sees within-run noise only, so
  two honest runs on a shared machine can fail it; rows say which model decided them (`noise_model`).

`regressions` is the CI gate: cells significantly slower by more than a stated percentage.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, replace

from adcompare.analysis.bootstrap import Bootstrap, Ratio
from adcompare.analysis.paired_noise import PairedNoise, pooled
from adcompare.analysis.significance import NOISE, Difference, judge
from adcompare.model.cell import Cell
from adcompare.model.measurement import Measurement, Timing
from adcompare.run.timing import median_interval
from adcompare.store.results import Results

MIN_ROUNDS = 2  # rounds a side needs before its spread between rounds is the noise model
MIN_SHIFT_CELLS = 10  # fewer cells than this and the shift would be a few cells' own ratios: not estimated
BETWEEN_ROUNDS = "between rounds"
PAIRED_ROUNDS = "paired rounds"
CPU_CLOCK = "process CPU time"
WALL_CLOCK = "wall, fastest block"
WITHIN_RUN = "within run"
WITHIN_RUN_CAVEAT = ("compared on the blocks of one process per file (no `run --rounds`): this sees within-run "
                     "noise only, and two honest runs on a shared machine can differ by more; time both files "
                     "with `adcompare run --rounds 3` for a gate that holds there")


@dataclass(frozen=True)
class RunShift:
    """How much slower the candidate run is than the baseline as a whole, on one clock: the median over cells of
    candidate ÷ baseline (each cell's ratio of median rounds) with the distribution-free 95 % interval of that
    median over the cells (timing.median_interval). Cells are judged against `ratio` when `applied`."""

    ratio: float
    low: float
    high: float
    cells: int
    clock: str

    @property
    def applied(self) -> bool:
        return self.cells >= MIN_SHIFT_CELLS

    def describe(self) -> str:
        if not self.applied:
            return (f"run-wide shift not estimated: {self.cells} cell(s) on {self.clock} between rounds, fewer "
                    f"than {MIN_SHIFT_CELLS}; cells are judged against the baseline alone")
        return (f"the candidate run as a whole is ×{self.ratio:.3f} [{self.low:.3f}–{self.high:.3f}] the baseline "
                f"over {self.cells} cells ({self.clock}): the machine's load or a change that slows every cell; "
                f"cells are judged against it")

    def fails(self, pct: float) -> bool:
        """--fail-on-shift PCT: the whole run is slower by more than PCT, the interval clear of it."""
        return self.applied and self.low > 1 + pct / 100

    def to_json(self) -> dict:
        return {"ratio": self.ratio, "low": self.low, "high": self.high, "cells": self.cells, "clock": self.clock,
                "applied": self.applied}


def run_shift(ratios: list[float], clock: str) -> RunShift:
    """The shift of a run from its cells' candidate ÷ baseline ratios (see RunShift)."""
    low, high = median_interval(ratios)
    return RunShift(statistics.median(ratios), low, high, len(ratios), clock)


@dataclass(frozen=True)
class RoundDifference:
    """One comparison `candidate ÷ baseline` decided on the spread between rounds (see the module doc); the same
    attributes as significance.Difference, so rows read alike whichever model decided them."""

    ratio: Ratio  # point: ratio of the median rounds; low/high: the sides' round intervals against each other
    threshold: float
    rounds: tuple[int, int]  # rounds of the baseline and of the candidate
    clock: str = WALL_CLOCK  # which value per round: CPU_CLOCK or WALL_CLOCK
    p_value: None = None  # no rank test: the rule is an effect clear of the spread
    p_holm: None = None
    noise_model: str = BETWEEN_ROUNDS
    shift: RunShift | None = None  # the candidate run's shift on this clock; judged against it when applied

    @property
    def against(self) -> float:
        """What the cell's ratio is judged against: the run's shift where one was estimated, else 1."""
        return self.shift.ratio if self.shift is not None and self.shift.applied else 1.0

    @property
    def significant(self) -> bool:
        r, s = self.ratio, self.against
        return r.low / s > 1 + self.threshold or r.high / s < 1 / (1 + self.threshold)

    @property
    def reason(self) -> str:
        """Why a difference is not called significant (empty when it is)."""
        if self.significant:
            return ""
        r, s = self.ratio, self.against
        if not (r.low / s <= 1.0 <= r.high / s):
            return f"spread between rounds reaches within {self.threshold:.0%} of the run's shift" if s != 1.0 \
                else f"spread between rounds reaches within {self.threshold:.0%}"
        if r.clear:
            return f"as the whole run (×{s:.3f})"
        return "rounds overlap"


@dataclass(frozen=True)
class PairedDifference(RoundDifference):
    """candidate ÷ baseline of one cell timed in two environments in lockstep (see the module doc). With the run's
    pooled noise: `ratio` is exp(mean log paired ratio) with the interval exp(mean ± z·σ/√n); without: the
    median paired ratio with the range of the paired ratios."""

    noise_model: str = PAIRED_ROUNDS
    log_ratios: tuple[float, ...] = ()  # log(candidate_r ÷ baseline_r), one per round
    noise: PairedNoise | None = None
    noise_class: str = ""  # the class whose spread the cell is judged with (paired_noise.py)
    block_spread: float | None = None  # how much one paired block's log ratio wanders within a round (block_spread)
    # run --confirm: the same cell's rounds timed after this decision flagged it, decided alone (`confirmed`)
    confirmation: "PairedDifference | None" = None

    @property
    def against(self) -> float:
        return 1.0  # both sides ran under one load: no run-wide shift is excused

    @property
    def agree(self) -> bool:
        """Every paired round on one side of 1."""
        return all(r > 0 for r in self.log_ratios) or all(r < 0 for r in self.log_ratios)

    @property
    def flagged(self) -> bool:
        """What the rounds before any confirmation say: changed, beyond the noise and the threshold."""
        if not self.agree:
            return False
        if self.noise is None:  # no noise model: every paired round beyond the threshold
            return super().significant
        r, effect = self.ratio, 1 + self.threshold
        return (r.low > 1 and r.ratio > effect) or (r.high < 1 and r.ratio < 1 / effect)

    @property
    def confirmed(self) -> bool:
        """No confirmation rounds, or they, decided alone, flag a change in the same direction."""
        c = self.confirmation
        return c is None or (c.flagged and (c.ratio.ratio > 1) == (self.ratio.ratio > 1))

    @property
    def significant(self) -> bool:
        return self.flagged and self.confirmed

    @property
    def reason(self) -> str:
        if self.significant:
            return ""
        if self.flagged and self.confirmation is not None:
            c = self.confirmation
            return (f"not confirmed: {len(c.log_ratios)} more paired rounds gave ×{c.ratio.ratio:.3f} "
                    f"[{c.ratio.low:.3f}–{c.ratio.high:.3f}], {c.reason or 'the other way'}")
        if not self.agree:
            return "paired rounds disagree in direction"
        if self.noise is not None:
            if self.ratio.low > 1 or self.ratio.high < 1:
                return f"a change within {self.threshold:.0%}"
            caught = self.noise.resolution(self.threshold, self.noise_class, self.block_spread)
            return f"within the run's paired noise (from {caught:.0%} caught)"
        return f"a paired round within {self.threshold:.0%}"

    def with_noise(self, noise: PairedNoise, noise_class: str, confirming: int = 0) -> "PairedDifference":
        """Judged against the run's pooled noise for its class (paired_noise.py); its confirmation too, with the
        same spread as the first rounds (their block spread: the confirmation's own blocks come from workers that
        time one or two cells each, not dozens, and wandered 1.6–2.4× more than the same cells' first rounds in
        issue 23's measurement) and the bar set for the `confirming` pairs confirmed (PairedNoise.for_cells)."""
        mean = statistics.fmean(self.log_ratios)
        half = noise.half_width(len(self.log_ratios), noise_class, self.block_spread)
        ratio = Ratio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), resampled=False)
        confirmation = self.confirmation
        if confirmation is not None:
            confirmation = replace(confirmation, block_spread=self.block_spread).with_noise(
                noise.for_cells(confirming), noise_class)
        return replace(self, ratio=ratio, noise=noise, noise_class=noise_class, confirmation=confirmation)


def noise_class(cell: Cell) -> str:
    """Cells whose paired rounds wander alike (measured: torch eager 0.16, JAX jit 0.29 at load 5–6)."""
    return f"{cell.adapter} {cell.variant}"


def paired_rounds(baseline: Timing, candidate: Timing, threshold: float, cpu: bool = True,
                  confirmation: int = 0) -> RoundDifference:
    """candidate ÷ baseline round by round, for the two sides of an environment pair timed in lockstep; sides with
    different round counts (a round skipped for the time budget) cannot be paired and are decided unpaired. The
    last `confirmation` rounds (run --confirm, both sides) are decided apart, as the row's `confirmation`."""
    if confirmation and len(baseline.rounds) == len(candidate.rounds) > confirmation:
        first = paired_rounds(rounds_between(baseline, 0, -confirmation),
                              rounds_between(candidate, 0, -confirmation), threshold, cpu)
        then = paired_rounds(rounds_between(baseline, -confirmation, None),
                             rounds_between(candidate, -confirmation, None), threshold, cpu)
        if isinstance(first, PairedDifference) and isinstance(then, PairedDifference) and first.clock == then.clock:
            return replace(first, confirmation=then)
    base, cand, clock = round_values(baseline, candidate, cpu)
    if len(base) != len(cand):
        return between_rounds(baseline, candidate, threshold, cpu)
    blocks = paired_blocks(baseline, candidate, clock)
    ratios = [statistics.median(r) for r in blocks] if blocks else [c / b for b, c in zip(base, cand)]
    return PairedDifference(Ratio(statistics.median(ratios), min(ratios), max(ratios), resampled=False), threshold,
                            (len(base), len(cand)), clock, log_ratios=tuple(math.log(r) for r in ratios),
                            block_spread=block_spread(blocks) if blocks else None)


def rounds_between(timing: Timing, start: int, stop: int | None) -> Timing:
    """The timing of rounds [start:stop] alone (as a slice), blocks included where `round_blocks` says which."""
    counts = timing.round_blocks
    samples, cpu = timing.samples, timing.cpu_samples
    if counts:
        first, last = sum(counts[:start]), sum(counts[:stop]) if stop is not None else len(samples)
        samples, cpu = samples[first:last], cpu[first:last]
    return replace(timing, samples=samples, cpu_samples=cpu, rounds=timing.rounds[start:stop],
                   round_minima=timing.round_minima[start:stop], round_cpu=timing.round_cpu[start:stop],
                   round_blocks=counts[start:stop])


def paired_sides(baseline: Measurement, candidate: Measurement) -> tuple[Timing, Timing, int]:
    """Both sides' timings and how many of their last rounds are confirmation rounds (run --confirm). A
    confirmation that did not finish on both sides (interrupted: fewer rounds than planned, or counts that differ)
    takes no part: the pair is decided on its first rounds alone."""
    ka, kb = (int(m.details.get("confirmation_rounds") or 0) for m in (baseline, candidate))
    a, b = baseline.measured, candidate.measured
    finished = all(m.details.get("rounds", 0) >= m.details.get("rounds_planned", 0) for m in (baseline, candidate))
    if ka == kb and (ka == 0 or finished):
        return a, b, ka
    return (rounds_between(a, 0, -ka) if ka else a), (rounds_between(b, 0, -kb) if kb else b), 0


def paired_blocks(baseline: Timing, candidate: Timing, clock: str) -> list[list[float]] | None:
    """Per round, candidate block ÷ baseline block for each of its blocks, where the two sides were timed in
    lockstep (lockstep.py: the same number of blocks each round, block i of both within milliseconds): the load
    of each moment cancels block by block, not only round by round. None where the blocks cannot be paired (files
    without `round_blocks`, or sides that timed different numbers of blocks)."""
    counts = baseline.round_blocks
    if not counts or counts != candidate.round_blocks:
        return None
    a, b = (baseline.cpu_samples, candidate.cpu_samples) if clock == CPU_CLOCK else \
        (baseline.samples, candidate.samples)
    if len(a) != sum(counts) or len(b) != sum(counts) or min(a) <= 0 or min(b) <= 0:
        return None
    rounds, start = [], 0
    for count in counts:
        rounds.append([y / x for x, y in zip(a[start:start + count], b[start:start + count])])
        start += count
    return rounds


def block_spread(blocks: list[list[float]]) -> float:
    """How much one paired block's log ratio wanders around its round's median: 1.4826 × the median absolute
    deviation, pooled over the rounds. A cell whose blocks wander more than its class's usually has paired rounds
    that do too (issue 23's quick-suite runs: of the cells at over 1.5× their class's block spread, 29 % had a
    paired round more than 15 % from its mean, against 2 % of those below their class's median), which
    paired_noise.py charges it."""
    deviations = []
    for ratios in blocks:
        logs = [math.log(r) for r in ratios]
        middle = statistics.median(logs)
        deviations += [abs(x - middle) for x in logs]
    return 1.4826 * statistics.median(deviations)


def round_values(baseline: Timing, candidate: Timing, cpu: bool) -> tuple[tuple[float, ...], tuple[float, ...], str]:
    """Each side's one value per round and the clock they come from: median CPU time per call where `cpu` (a CPU
    cell) and both sides recorded it, else the fastest wall-clock block."""
    if cpu and _usable(baseline.round_cpu) and _usable(candidate.round_cpu):
        return baseline.round_cpu, candidate.round_cpu, CPU_CLOCK
    return baseline.round_minima, candidate.round_minima, WALL_CLOCK


def between_rounds(baseline: Timing, candidate: Timing, threshold: float, cpu: bool = True) -> RoundDifference:
    """candidate ÷ baseline from each side's per-round values (round_values)."""
    base, cand, clock = round_values(baseline, candidate, cpu)
    b_low, b_high = median_interval(list(base))
    c_low, c_high = median_interval(list(cand))
    ratio = Ratio(statistics.median(cand) / statistics.median(base), c_low / b_high, c_high / b_low, resampled=False)
    return RoundDifference(ratio, threshold, (len(base), len(cand)), clock)


def _usable(values: tuple[float, ...]) -> bool:
    return len(values) >= MIN_ROUNDS and min(values) > 0


def has_rounds(timing: Timing) -> bool:
    return _usable(timing.round_minima)


def differences(matched: list[tuple[Measurement, Measurement]], threshold: float,
                against_shift: bool = True, paired: bool = False) -> list[Difference | RoundDifference]:
    """How each (baseline, candidate) pair differs: between rounds where both sides have rounds — round by round
    when `paired` (two environments of one run, timed in lockstep), else judged against the run-wide shift of its
    clock when `against_shift` — else the within-run test, Holm-corrected over the pairs that use it."""
    by_rounds = [has_rounds(a.measured) and has_rounds(b.measured) for a, b in matched]
    within = [(a, b) for (a, b), r in zip(matched, by_rounds) if not r]
    boot = Bootstrap()
    judged = iter(judge([(boot.ratio("baseline:" + a.cell.key, a.measured, "candidate:" + b.cell.key, b.measured),
                          a.measured.samples, b.measured.samples) for a, b in within], threshold))
    if paired:
        rounds: list[RoundDifference | None] = []
        for (a, b), r in zip(matched, by_rounds):
            base, cand, extra = paired_sides(a, b) if r else (a.measured, b.measured, 0)
            rounds.append(paired_rounds(base, cand, threshold, b.cell.device == "cpu", extra) if r else None)
        by_clock: dict[str, list[tuple[PairedDifference, str]]] = defaultdict(list)
        for (_, b), d in zip(matched, rounds):
            if isinstance(d, PairedDifference):
                by_clock[d.clock].append((d, noise_class(b.cell)))
        noises = {clock: pooled([d.log_ratios for d, _ in ds], clock, [c for _, c in ds],
                                [d.block_spread for d, _ in ds])
                  for clock, ds in by_clock.items()}
        confirming = {clock: sum(d.confirmation is not None for d, _ in ds) for clock, ds in by_clock.items()}
        rounds = [d.with_noise(noise, noise_class(b.cell), confirming[d.clock])
                  if isinstance(d, PairedDifference) and (noise := noises[d.clock]) else d
                  for (_, b), d in zip(matched, rounds)]
    else:
        rounds = [between_rounds(a.measured, b.measured, threshold, cpu=b.cell.device == "cpu") if r else None
                  for (a, b), r in zip(matched, by_rounds)]
    if not paired and against_shift:
        ratios: dict[str, list[float]] = defaultdict(list)
        for d in rounds:
            if d is not None:
                ratios[d.clock].append(d.ratio.ratio)
        shifts = {clock: run_shift(values, clock) for clock, values in ratios.items()}
        rounds = [replace(d, shift=shifts[d.clock]) if d is not None else None for d in rounds]
    return [d if d is not None else next(judged) for d in rounds]


def paired_noises(rows: list[ComparisonRow]) -> list[PairedNoise]:
    """The pooled paired noise the rows were judged against, one per clock (none without paired rounds)."""
    found = {r.difference.noise.clock: r.difference.noise for r in rows
             if isinstance(r.difference, PairedDifference) and r.difference.noise is not None}
    return [found[clock] for clock in sorted(found)]


def run_shifts(rows: list[ComparisonRow]) -> list[RunShift]:
    """The run-wide shifts the rows were judged against, one per clock (none for files without rounds)."""
    found = {r.difference.shift.clock: r.difference.shift for r in rows
             if isinstance(r.difference, RoundDifference) and r.difference.shift is not None}
    return [found[clock] for clock in sorted(found)]


@dataclass(frozen=True)
class ComparisonRow:
    cell: Cell
    baseline: float
    candidate: float
    difference: Difference | RoundDifference  # candidate ÷ baseline

    @property
    def noise_model(self) -> str:
        """"between rounds" (run --rounds on both sides) or "within run" (the weaker rule, blocks of one process)."""
        return getattr(self.difference, "noise_model", WITHIN_RUN)

    @property
    def ratio(self):
        return self.difference.ratio

    @property
    def change(self) -> float:
        """candidate ÷ baseline as the verdict decided it: between rounds, the ratio of the rounds' values on the
        row's clock (paired: exp of the mean log paired ratio), so the interval printed beside it is its own;
        within run, the ratio of the medians."""
        d = self.difference
        if isinstance(d, RoundDifference) and d.ratio is not None:
            return d.ratio.ratio
        return self.candidate / self.baseline

    @property
    def against(self) -> float:
        """The run-wide shift this row was judged against (1 where none: within run, or too few cells)."""
        return self.difference.against if isinstance(self.difference, RoundDifference) else 1.0

    @property
    def relative_change(self) -> float:
        """change ÷ the run's shift: how much slower this cell is than the run as a whole."""
        return self.change / self.against

    @property
    def verdict(self) -> str:
        d = self.difference
        if d.ratio is None:
            return "too few samples to tell"
        if not d.significant:
            return f"same ({d.reason})"
        return "slower" if d.ratio.ratio > self.against else "faster"

    def to_json(self) -> dict:
        """One row for `compare --json`: `ratio`/`low`/`high` as decided (on `clock`); the medians are wall-clock,
        for reading, and need not give `ratio`."""
        r, d = self.ratio, self.difference
        return {"cell": self.cell.to_json(), "key": self.cell.key, "baseline_median": self.baseline,
                "candidate_median": self.candidate, "ratio": self.change,
                "low": r.low if r else None, "high": r.high if r else None, "p_value": d.p_value,
                "p_holm": d.p_holm, "threshold": d.threshold, "significant": d.significant, "verdict": self.verdict,
                "noise_model": self.noise_model,
                "rounds": list(d.rounds) if isinstance(d, RoundDifference) else None,
                "clock": d.clock if isinstance(d, RoundDifference) else "wall",
                "shift": d.shift.to_json() if isinstance(d, RoundDifference) and d.shift else None,
                "ratio_to_shift": self.relative_change,
                "confirmation": _confirmation_json(d.confirmation) if isinstance(d, PairedDifference) else None}


def _confirmation_json(c: PairedDifference | None) -> dict | None:
    """The confirmation rounds' own decision (run --confirm), as `compare --json` gives it."""
    if c is None:
        return None
    return {"ratio": c.ratio.ratio, "low": c.ratio.low, "high": c.ratio.high, "rounds": len(c.log_ratios),
            "flagged": c.flagged, "z": c.noise.z if c.noise else None}


def pairs(baseline: Results, candidate: Results) -> Iterator[tuple[Measurement, Measurement]]:
    """(baseline, candidate) measurements of the same cell, both timed: the one place cells are matched."""
    before = {m.cell.key: m for m in baseline.measurements if m.timing and m.timing.samples}
    for m in candidate.measurements:
        a = before.get(m.cell.key)
        if a is not None and m.timing is not None and m.timing.samples:
            yield a, m


def compare(baseline: Results, candidate: Results, threshold: float = NOISE,
            against_shift: bool = True) -> list[ComparisonRow]:
    """One row per matching timed cell, sorted by cell; `threshold` is the effect (fraction) that counts; cells
    timed in rounds are judged against the candidate run's shift unless `against_shift` is False (the rule before
    the shift, kept for measuring the gate against it)."""
    matched = sorted(pairs(baseline, candidate), key=lambda p: p[1].cell)
    return [ComparisonRow(b.cell, *medians(a, b), d)
            for (a, b), d in zip(matched, differences(matched, threshold, against_shift))]


def medians(baseline: Measurement, candidate: Measurement) -> tuple[float, float]:
    """What a row shows: the median of the per-round values where both sides have rounds (what the decision is
    made on, round_values), else the median of the samples."""
    a, b = baseline.measured, candidate.measured
    if has_rounds(a) and has_rounds(b):
        base, cand, _ = round_values(a, b, cpu=candidate.cell.device == "cpu")
        return statistics.median(base), statistics.median(cand)
    return a.median, b.median


def regressions(rows: list[ComparisonRow]) -> list[ComparisonRow]:
    """Cells significantly slower by more than the rows' threshold (than the run's shift, where judged against
    it), worst first."""
    slow = [r for r in rows if r.difference.significant and r.relative_change > 1]
    return sorted(slow, key=lambda r: -r.relative_change)
