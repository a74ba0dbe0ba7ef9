"""Does `adcompare compare --fail-above PCT` hold on a shared machine? False alarms and power, on real runs.

    python benchmarks/gate_false_alarms.py --out /tmp/gate-bench            # the issue's selection, 4 runs, 3 rounds

What it does, with the same `adcompare run` command each time (every run loads benchmarks/gate_slowdown_plugin.py,
so honest and slowed runs run the same code path):
1. `--honest` runs one after the other, `--rounds N` each; every consecutive pair is compared with
   `adcompare compare A B --fail-above PCT` (the CLI, its exit code): any exit 1 is a false alarm.
   The same pairs are also decided by the within-run rule (the files with their rounds removed, as a file written
   without `--rounds` is compared), and `--single-round` pairs of plain runs (no --rounds) by the rule as it was.
2. one run per `--slowdowns` fraction with that slowdown injected into `--target` (through the plugin, in the
   worker: shipped adapters are untouched), compared with every honest run as the baseline: caught when the
   target cell is among the offending cells; any other offending cell is a false alarm too.
Prints a summary and writes summary.json with every pair's offending cells and each run's wall time.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from adcompare.analysis.comparison import compare, regressions
from adcompare.store.results import load

HERE = Path(__file__).resolve().parent
PLUGIN = HERE / "gate_slowdown_plugin.py"
SELECTION = ["--problem", "exp_dot_loss,f_r2_r3,tanh", "--adapter", "jax,torch"]  # issue 23's honest pair
TARGET = "exp_dot_loss/jacrev/jax/compiled/10000"  # the cell that cried wolf in issue 23
TARGET_KEY = "exp_dot_loss/n10000/jacrev/jax/compiled/cpu/float32"


def run(path: Path, rounds: int, slowdown: float, selection: list[str], target: str, reuse: bool = False) -> float:
    if reuse and path.exists():  # --reuse: summarise the runs already made (their wall times are in summary.json)
        return float("nan")
    env = {**os.environ, "ADCOMPARE_GATE_SLOWDOWN": str(slowdown), "ADCOMPARE_GATE_CELL": target}
    argv = [sys.executable, "-m", "adcompare", "run", *selection, "--plugin", str(PLUGIN), "--no-progress",
            "-o", str(path), "--overwrite", *(["--rounds", str(rounds)] if rounds > 1 else [])]
    began = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - began
    print(f"  {path.name}: exit {done.returncode}, {wall:.0f} s", flush=True)
    return wall


def passing_threshold(a: Path, b: Path) -> float:
    """The smallest --fail-above (percent) at which the between-rounds rule passes A → B: the largest slowdown
    that every round pairing shows, over all cells (0 when no cell is slower in every round)."""
    done = subprocess.run([sys.executable, "-m", "adcompare", "compare", str(a), str(b), "--json"],
                          capture_output=True, text=True)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return max([0.0, *((r["low"] - 1) * 100 for r in rows if r["noise_model"] == "between rounds")])


def gate(a: Path, b: Path, pct: float) -> tuple[int, list[str]]:
    """`adcompare compare A B --fail-above PCT --json`: exit code and offending cell keys."""
    done = subprocess.run([sys.executable, "-m", "adcompare", "compare", str(a), str(b), "--fail-above", str(pct),
                           "--json"], capture_output=True, text=True)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, [f"{r['key']} ×{r['ratio']:.3f} [{r['low']:.3f}–{r['high']:.3f}]"
                             for r in rows if r["regression"]]


def within_run(a: Path, b: Path, pct: float) -> list[str]:
    """The within-run rule on the same files: rounds removed, as a file written without --rounds reads."""
    def strip(path: Path):
        results = load([path])
        return dataclasses.replace(results, measurements=tuple(
            dataclasses.replace(m, timing=dataclasses.replace(m.timing, rounds=(), round_minima=()))
            if m.timing else m
            for m in results.measurements))
    return [f"{r.cell.key} ×{r.change:.3f}" for r in regressions(compare(strip(a), strip(b), pct / 100))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="folder for the results files and summary.json")
    p.add_argument("--honest", type=int, default=4, help="honest runs (consecutive pairs compared; default 4)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--fail-above", type=float, default=10.0, metavar="PCT")
    p.add_argument("--slowdowns", default="0.2,0.5", help="injected slowdown fractions, one run each")
    p.add_argument("--single-round", type=int, default=2, help="plain runs (no --rounds) compared pairwise")
    p.add_argument("--suite", action="store_true", help="the quick suite instead of the issue's selection")
    p.add_argument("--target", default=TARGET, help="problem/operator/adapter/variant/n of the cell to slow down")
    p.add_argument("--target-key", default=TARGET_KEY, help="that cell's key in the results (how compare names it)")
    p.add_argument("--reuse", action="store_true", help="keep results files already in --out; only summarise")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    selection = [] if args.suite else SELECTION
    target_key = args.target_key
    walls: dict[str, float] = {}

    print(f"honest runs (--rounds {args.rounds}):", flush=True)
    honest = [args.out / f"honest{k}.jsonl" for k in range(1, args.honest + 1)]
    for path in honest:
        walls[path.name] = run(path, args.rounds, 0.0, selection, args.target, args.reuse)
    slowed = {}
    for fraction in (float(f) for f in args.slowdowns.split(",") if f):
        path = args.out / f"slow{round(fraction * 100)}.jsonl"
        print(f"slowed run ({fraction:.0%} on {args.target}):", flush=True)
        walls[path.name] = run(path, args.rounds, fraction, selection, args.target, args.reuse)
        slowed[fraction] = path
    print("single-round runs (no --rounds):", flush=True)
    single = [args.out / f"single{k}.jsonl" for k in range(1, args.single_round + 1)]
    for path in single:
        walls[path.name] = run(path, 1, 0.0, selection, args.target, args.reuse)

    summary: dict = {"selection": selection or "quick suite", "rounds": args.rounds, "fail_above": args.fail_above,
                     "target": target_key or args.target, "walls": walls, "honest_pairs": [], "slowed_pairs": [],
                     "single_round_pairs": []}
    if args.reuse and (args.out / "summary.json").exists():
        walls = {k: v for k, v in json.loads((args.out / "summary.json").read_text())["walls"].items()
                 if v == v} | {k: v for k, v in walls.items() if v == v}
    for a, b in zip(honest, honest[1:]):
        code, offending = gate(a, b, args.fail_above)
        summary["honest_pairs"].append({"pair": [a.name, b.name], "exit": code, "offending": offending,
                                        "within_run_rule": within_run(a, b, args.fail_above),
                                        "passes_from_pct": round(passing_threshold(a, b), 1)})
    for a, b in zip(single, single[1:]):
        code, offending = gate(a, b, args.fail_above)
        summary["single_round_pairs"].append({"pair": [a.name, b.name], "exit": code, "offending": offending})
    for fraction, path in slowed.items():
        for base in honest:
            code, offending = gate(base, path, args.fail_above)
            caught = any(o.startswith(f"{target_key} ") for o in offending) if target_key else None
            others = [o for o in offending if not (target_key and o.startswith(f"{target_key} "))]
            summary["slowed_pairs"].append({"slowdown": fraction, "pair": [base.name, path.name], "exit": code,
                                            "caught": caught, "other_offending": others})
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))

    hp = summary["honest_pairs"]
    print(f"\nhonest pairs, compare --fail-above {args.fail_above:g} (rounds {args.rounds}): "
          f"{sum(h['exit'] == 1 for h in hp)} of {len(hp)} exit 1")
    for h in hp:
        print(f"  {h['pair']}: exit {h['exit']} {h['offending']}; passes from --fail-above {h['passes_from_pct']}; "
              f"within-run rule on the same files: "
              f"{len(h['within_run_rule'])} offending {h['within_run_rule'][:3]}")
    for h in summary["single_round_pairs"]:
        print(f"  single-round {h['pair']}: exit {h['exit']} {h['offending'][:3]}")
    for fraction in slowed:
        rows = [s for s in summary["slowed_pairs"] if s["slowdown"] == fraction]
        print(f"slowdown {fraction:.0%} of {args.target}: caught in {sum(bool(s['caught']) for s in rows)} of "
              f"{len(rows)} pairs; other offending cells: {sum(len(s['other_offending']) for s in rows)}")
    summary["walls"] = walls
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    rounded = [walls.get(p.name, float("nan")) for p in honest]
    plain = [walls.get(p.name, float("nan")) for p in single]
    print(f"wall time per run: --rounds {args.rounds} {min(rounded):.0f}–{max(rounded):.0f} s"
          + (f"; single round {min(plain):.0f}–{max(plain):.0f} s" if plain else ""))


if __name__ == "__main__":
    main()
