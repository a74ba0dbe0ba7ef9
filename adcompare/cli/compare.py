"""`adcompare compare`: the ratio of medians per matching cell of two results files, with its interval and the
run-wide shift — or, given one file run with several --env, each environment against the baseline one; a CI gate
with --fail-above and --fail-on-shift."""
from __future__ import annotations

import argparse
import json

from adcompare.analysis.comparison import (
    PAIRED_ROUNDS,
    WITHIN_RUN,
    WITHIN_RUN_CAVEAT,
    PairedDifference,
    compare,
    paired_noises,
    regressions,
    run_shifts,
)
from adcompare.analysis.environment_pairs import pair_environments
from adcompare.analysis.significance import NOISE
from adcompare.cli import tables
from adcompare.cli.tables import err, out
from adcompare.model.errors import UsageError
from adcompare.store.results import load


def command(args: argparse.Namespace) -> int:
    if args.fail_above is not None and not 0 <= args.fail_above < 1e6:
        raise UsageError(f"--fail-above {args.fail_above}: give a percentage >= 0, e.g. --fail-above 10")
    fail_on_shift = args.fail_on_shift
    if fail_on_shift is not None and not 0 <= fail_on_shift < 1e6:
        raise UsageError(f"--fail-on-shift {fail_on_shift}: give a percentage >= 0, e.g. --fail-on-shift 10")
    threshold = NOISE if args.fail_above is None else args.fail_above / 100
    if args.candidate is None:
        return _compare_environments(pair_environments(load([args.baseline]), args.baseline_environment,
                                                       threshold), args)
    rows = compare(load([args.baseline]), load([args.candidate]), threshold)
    if not rows:
        raise UsageError(f"{args.baseline} and {args.candidate} have no timed cell in common")
    offending = regressions(rows) if args.fail_above is not None else []
    rows = offending + [r for r in rows if r not in offending]
    shifts = run_shifts(rows)
    if args.json:
        for r in rows:
            print(json.dumps({**r.to_json(), "regression": r in offending}))
    else:
        tables.print_comparison(out, rows, offending, args.fail_above)
    _say_noise_model(rows)
    shifted = [s for s in shifts if fail_on_shift is not None and s.fails(fail_on_shift)]
    for shift in shifts:  # on stderr beside the noise model, so --json's stdout stays one object per cell
        tables.print_run_shift(err, shift, fail_on_shift, shift in shifted)
    return 1 if offending or shifted else 0


def _say_noise_model(rows) -> None:
    """Which noise model decided the rows: the within-run rule is the weaker one, and the gate says so."""
    within = sum(r.noise_model == WITHIN_RUN for r in rows)
    paired = sum(r.noise_model == PAIRED_ROUNDS for r in rows)
    if within:
        err.print(f"[yellow]{within} of {len(rows)} cells {WITHIN_RUN_CAVEAT}[/]", highlight=False)
    elif paired == len(rows):
        err.print(f"noise model: paired rounds, each cell's environments timed in lockstep ({len(rows)} cells)",
                  highlight=False)
    else:
        err.print(f"noise model: the spread between rounds ({len(rows)} cells"
                  + (f", {paired} of them paired" if paired else "") + ")", highlight=False)


def _say_confirmation(rows) -> None:
    """How many cells the run's first decision flagged and timed again (run --confirm), how many held, and how
    many flagged cells this comparison decides on their first rounds alone (none timed again: a lower
    --fail-above than the run's --confirm, another --baseline-environment, an interrupted confirmation)."""
    paired = [r.difference for r in rows if isinstance(r.difference, PairedDifference)]
    confirmed = [d for d in paired if d.confirmation is not None and d.flagged]
    if not confirmed:
        return
    held = sum(d.confirmed for d in confirmed)
    alone = sum(d.confirmation is None and d.flagged for d in paired)
    err.print(f"confirmation: {len(confirmed)} cell(s) flagged by the first rounds were timed again; {held} "
              f"confirmed, {len(confirmed) - held} not (verdict: same)"
              + (f"; {alone} flagged cell(s) had no confirmation rounds and are decided on their first rounds"
                 if alone else ""), highlight=False)


PAIRED_INTERVAL = ("interval on paired rounds: exp(mean log(candidate_r ÷ baseline_r) ± z·σ/√n), σ the run's "
                   "paired noise (printed below; with fewer than 10 cells: the range of the paired ratios)")


def _compare_environments(pairs, args: argparse.Namespace) -> int:
    """One results file over several environments: exit 1 when a derivative differs between releases, or, with
    --fail-above, when a cell is significantly slower than in the baseline environment by more than PCT."""
    if not pairs:
        raise UsageError(f"{args.baseline} holds one environment only; compare two files, or run with two --env")
    offending = regressions([p.timing for p in pairs if p.timing]) if args.fail_above is not None else []
    slower = [p for p in pairs if p.timing is not None and p.timing in offending]
    if args.json:
        for p in pairs:
            print(json.dumps({**p.to_json(), "regression": p in slower}))
    else:
        paired = all(p.timing.noise_model == PAIRED_ROUNDS for p in pairs if p.timing)
        tables.print_environment_pairs(out, pairs, PAIRED_INTERVAL) if paired \
            else tables.print_environment_pairs(out, pairs)
    timed = [p.timing for p in pairs if p.timing]
    _say_noise_model(timed)
    threshold = NOISE if args.fail_above is None else args.fail_above / 100
    for noise in paired_noises(timed):  # on stderr, so --json's stdout stays one object per cell
        err.print(noise.describe(threshold), highlight=False)
    _say_confirmation(timed)
    return 1 if slower or any(pair.values_agree is False for pair in pairs) else 0
