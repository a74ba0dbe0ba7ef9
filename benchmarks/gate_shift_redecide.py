"""Re-decide the gate's run files offline, with the run-wide shift (comparison.RunShift) and without it.

    python benchmarks/gate_shift_redecide.py --honest DIR/honest{1..4}.jsonl \\
        --slowed jax=exp_dot_loss/n10000/jacrev/jax/compiled/cpu/float32:DIR/slow20.jsonl,... --out summary.json

No run is made: the files benchmarks/gate_false_alarms.py wrote are compared in-process at `--fail-above PCT`.
- every pair of honest runs, in both orders (a later run as baseline too: load can fall as well as rise): any
  offending cell is a false alarm;
- every slowed run against every honest baseline: caught when the target cell offends; any other offending cell
  is a false alarm;
- every slowed run as the *baseline* of every honest run, its target cell left out: a heavier-loaded baseline
  (shift < 1) must not make innocent cells offend either.
Each pair is decided by the rule with the shift (what `compare` does now) and without it (the rule before).
"""
from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

from adcompare.analysis.comparison import compare, regressions, run_shifts
from adcompare.store.results import Results, load


def decide(base: Results, cand: Results, pct: float, against_shift: bool) -> tuple[list[str], dict | None]:
    rows = compare(base, cand, pct / 100, against_shift=against_shift)
    shifts = run_shifts(compare(base, cand, pct / 100)) if against_shift else []
    return ([r.cell.key for r in regressions(rows)],
            shifts[0].to_json() if shifts else None)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--honest", nargs="+", type=Path, required=True)
    p.add_argument("--slowed", nargs="*", default=[], metavar="LABEL=TARGET_KEY:FILE",
                   help="a slowed run: a label (e.g. jax20), its target cell's key and its file")
    p.add_argument("--fail-above", type=float, default=10.0, metavar="PCT")
    p.add_argument("--out", type=Path, required=True, help="summary JSON")
    args = p.parse_args()
    honest = {path: load([path]) for path in args.honest}
    slowed = []
    for spec in args.slowed:
        label, rest = spec.split("=", 1)
        key, path = rest.rsplit(":", 1)
        slowed.append((label, key, Path(path), load([Path(path)])))
    name = lambda path: f"{path.parent.name}/{path.name}"  # noqa: E731
    summary: dict = {"fail_above": args.fail_above, "honest_pairs": [], "slowed_pairs": [], "reverse_pairs": []}
    for a, b in itertools.permutations(honest, 2):
        new, shift = decide(honest[a], honest[b], args.fail_above, True)
        old, _ = decide(honest[a], honest[b], args.fail_above, False)
        summary["honest_pairs"].append({"pair": [name(a), name(b)], "shift": shift, "new": new, "old": old})
    for label, key, path, run in slowed:
        for base, results in honest.items():
            new, shift = decide(results, run, args.fail_above, True)
            old, _ = decide(results, run, args.fail_above, False)
            summary["slowed_pairs"].append({"label": label, "pair": [name(base), name(path)], "shift": shift,
                                            "caught_new": key in new, "caught_old": key in old,
                                            "others_new": [k for k in new if k != key],
                                            "others_old": [k for k in old if k != key]})
            new, shift = decide(run, results, args.fail_above, True)
            old, _ = decide(run, results, args.fail_above, False)
            summary["reverse_pairs"].append({"label": label, "pair": [name(path), name(base)], "shift": shift,
                                             "others_new": [k for k in new if k != key],
                                             "others_old": [k for k in old if k != key]})
    args.out.write_text(json.dumps(summary, indent=1))

    def alarms(rows, field):
        return f"{sum(bool(r[field]) for r in rows)} of {len(rows)} pairs, {sum(len(r[field]) for r in rows)} cells"

    hp, sp, rp = summary["honest_pairs"], summary["slowed_pairs"], summary["reverse_pairs"]
    print(f"--fail-above {args.fail_above:g}; false alarms (pairs with any innocent cell offending, cells):")
    print(f"  honest pairs, both orders: with shift {alarms(hp, 'new')}; without {alarms(hp, 'old')}")
    print(f"  slowed run vs honest base: with shift {alarms(sp, 'others_new')}; without {alarms(sp, 'others_old')}")
    print(f"  slowed run as base:        with shift {alarms(rp, 'others_new')}; without {alarms(rp, 'others_old')}")
    print("detection (target caught, of honest baselines): label  with shift  without")
    for label in dict.fromkeys(s["label"] for s in sp):
        rows = [s for s in sp if s["label"] == label]
        shifts = [s["shift"]["ratio"] for s in rows if s["shift"]]
        print(f"  {label:8} {sum(s['caught_new'] for s in rows)}/{len(rows)}  {sum(s['caught_old'] for s in rows)}/"
              f"{len(rows)}   run shift ×{min(shifts):.3f}–×{max(shifts):.3f}")
    shifts = [h["shift"]["ratio"] for h in hp if h["shift"]]
    print(f"honest pairs' run shift: ×{min(shifts):.3f}–×{max(shifts):.3f}")


if __name__ == "__main__":
    main()
