"""Does the A/B gate hold on a shared machine? False alarms and power of `compare RUN --fail-above PCT` on one run
that times a baseline and a candidate environment in turn (`run --env base=@PY --env new=@PY --rounds N`).

    python benchmarks/gate_ab.py --out DIR                  # issue 23's selection: 3 honest + 3 slowed A/B runs
    python benchmarks/gate_ab.py --out DIR --suite          # the quick suite (benchmarks/results/gate/quick/)
    python benchmarks/gate_ab.py --out DIR --reuse          # re-decide the runs already in DIR (no run is made)
    python benchmarks/gate_ab.py --out DIR --suite --confirm 10   # runs with `run --confirm 10`

Both environments are this interpreter behind a small wrapper script written into DIR (`base.sh`, `new.sh`, and
`slow.sh`, which sets ADCOMPARE_GATE_SLOWDOWN / ADCOMPARE_GATE_CELL for benchmarks/gate_slowdown_plugin.py, loaded
by every run, so all sides run the same code path):
1. `--honest` A/B runs with identical sides: every offending cell of `compare RUN --fail-above PCT` (the CLI, its
   exit code) is a false alarm;
2. `--slowed` A/B runs whose candidate slows every `--targets` cell by `--slowdown` (in CPU time, the clock the
   gate decides on): each target is caught when it offends; any other offending cell is a false alarm.
Every run's wall time and the machine's load (`uptime`) before and after it go into summary.json beside the
verdicts; the same pairs are also decided unpaired (between rounds, the two-file rule without the run's shift)
to show what the pairing buys; and each honest run's record is decided again with every cell's candidate times
multiplied by ×1.1…×1.5 (`injected`): how many cells a slowdown of that size would have been caught in, on the
noise the run really had. With `--confirm PCT` the runs confirm what their rounds flag (`run --confirm PCT`), and
each run's `first_decision` (the verdicts on the rounds before the confirmation, the rule without it) and the
cells confirmed go into summary.json beside the final verdicts.
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

from adcompare.analysis.comparison import between_rounds, regressions, rounds_between
from adcompare.analysis.environment_pairs import pair_environments
from adcompare.model.measurement import Timing
from adcompare.store.results import Results, load

HERE = Path(__file__).resolve().parent
PLUGIN = HERE / "gate_slowdown_plugin.py"
SELECTION = ["--problem", "exp_dot_loss,f_r2_r3,tanh", "--adapter", "jax,torch"]  # issue 23's honest pair
# A µs-scale eager cell (torch eager grad, n = 100), a torch.compile one (grad, n = 100) and the cell that cried
# wolf in issue 23 (JAX jit jacrev, n = 10⁴), as the plugin names them (problem/operator/adapter/variant/n).
TARGETS = ("exp_dot_loss/grad/torch/eager/100", "exp_dot_loss/grad/torch/compiled/100",
           "exp_dot_loss/jacrev/jax/compiled/10000")


def target_key(target: str) -> str:
    """The key `compare` prints for a plugin target: exp_dot_loss/grad/torch/eager/100 →
    exp_dot_loss/n100/grad/torch/eager/cpu/float32."""
    problem, operator, adapter, variant, n = target.split("/")
    return f"{problem}/n{n}/{operator}/{adapter}/{variant}/cpu/float32"


def wrapper(path: Path, env: dict[str, str], write: bool = True) -> str:
    """An interpreter for `--env NAME=@PATH`: this Python with `env` set (and the slowdown unset otherwise);
    written unless `write` is False (--reuse runs nothing)."""
    sets = " ".join(f"{k}={v}" for k, v in env.items()) or "-u ADCOMPARE_GATE_SLOWDOWN"
    if write:
        path.write_text(f"#!/bin/sh\nexec env {sets} {sys.executable} \"$@\"\n")
        path.chmod(0o755)
    return str(path)


def load_average() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip().split("load average:")[-1]


def ab_run(path: Path, base: str, new: str, rounds: int, selection: list[str], confirm: float | None) -> dict:
    argv = [sys.executable, "-m", "adcompare", "run", *selection, "--plugin", str(PLUGIN), "--no-progress",
            "--env", f"base=@{base}", "--env", f"new=@{new}", "--rounds", str(rounds), "-o", str(path),
            "--overwrite", *(["--confirm", f"{confirm:g}"] if confirm else [])]
    before, began = load_average(), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "ADCOMPARE_GATE_SLOWDOWN": ""})
    wall = time.perf_counter() - began
    print(f"  {path.name}: exit {done.returncode}, {wall:.0f} s, load {before} → {load_average()}", flush=True)
    if done.returncode not in (0, 1):
        print(done.stderr[-2000:], file=sys.stderr)
    return {"wall_s": round(wall, 1), "load_before": before, "load_after": load_average(),
            "command": " ".join(argv[1:])}


def gate(path: Path, pct: float) -> tuple[int, list[str]]:
    """`adcompare compare RUN --fail-above PCT --json`: exit code and offending cell keys (with their ratios)."""
    done = subprocess.run([sys.executable, "-m", "adcompare", "compare", str(path), "--fail-above", str(pct),
                           "--json"], capture_output=True, text=True)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, [f"{r['cell']['problem']}/{r['cell']['size']}/{r['cell']['operator']}/"
                             f"{r['cell']['adapter']}/{r['cell']['variant']}/{r['cell']['device']}/"
                             f"{r['cell']['dtype']} ×{r['ratio']:.3f} [{r['low']:.3f}–{r['high']:.3f}]"
                             for r in rows if r["regression"]]


def noise_line(path: Path, pct: float) -> str:
    """What `compare RUN` says of the run's paired noise (its stderr line)."""
    done = subprocess.run([sys.executable, "-m", "adcompare", "compare", str(path), "--fail-above", str(pct),
                           "--json"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"})
    return " ".join(line for line in done.stderr.splitlines() if line.startswith("paired noise"))


def unpaired(path: Path, pct: float) -> list[str]:
    """The same environment pairs decided between rounds without pairing: what two separate runs would give."""
    rows = []
    for p in pair_environments(load([path]), threshold=pct / 100):
        if p.timing is not None and p.timing.noise_model != "within run":
            d = between_rounds(p.baseline.measured, p.candidate.measured, pct / 100)
            rows.append(dataclasses.replace(p.timing, difference=d))
    return [f"{r.cell.key} ×{r.change:.3f}" for r in regressions(rows)]


def screening(results: Results) -> Results:
    """The records as the run's first decision saw them: the confirmation rounds (run --confirm) taken off."""
    ms = tuple(dataclasses.replace(m, timing=rounds_between(m.timing, 0, -k), details={})
               if m.timing is not None and (k := m.details.get("confirmation_rounds")) else m
               for m in results.measurements)
    return dataclasses.replace(results, measurements=ms)


def decide(results: Results, pct: float) -> list:
    return [p.timing for p in pair_environments(results, threshold=pct / 100) if p.timing is not None]


def first_decision(path: Path, pct: float) -> tuple[list[str], list[str]]:
    """The cells confirmed (run --confirm), and the offending cells of the decision on the rounds before the
    confirmation: what the gate said without it."""
    results = load([path])
    confirmed = sorted({dataclasses.replace(m.cell, environment="current").key for m in results.measurements
                        if m.details.get("confirmation_rounds")})
    return confirmed, [f"{r.cell.key} ×{r.change:.3f}" for r in regressions(decide(screening(results), pct))]


def joined(a: Timing, b: Timing) -> Timing:
    """a's rounds, then b's: one record of both."""
    return dataclasses.replace(a, samples=a.samples + b.samples, cpu_samples=a.cpu_samples + b.cpu_samples,
                               rounds=a.rounds + b.rounds, round_minima=a.round_minima + b.round_minima,
                               round_cpu=a.round_cpu + b.round_cpu, round_blocks=a.round_blocks + b.round_blocks)


def confirmed_by(results: Results, partner: Results, pct: float) -> Results:
    """`results` as if it had confirmed what its first decision flags with `partner`'s rounds of those cells (the
    same cells timed in another run: fresh process pairs at another moment, as confirmation rounds are)."""
    first = screening(results)
    flagged = {dataclasses.replace(r.cell, environment="current").key for r in regressions(decide(first, pct))}
    rounds = {m.cell.key: m.timing for m in screening(partner).measurements if m.timing is not None}
    ms = []
    for m in first.measurements:
        key = dataclasses.replace(m.cell, environment="current").key
        other = rounds.get(m.cell.key)
        if key in flagged and m.timing is not None and other is not None:
            m = dataclasses.replace(m, timing=joined(m.timing, other),
                                    details={"confirmation_rounds": len(other.rounds)})
        ms.append(m)
    return dataclasses.replace(first, measurements=tuple(ms))


INJECTED = (1.1, 1.15, 1.2, 1.3, 1.5)  # slowdowns injected into every cell of an honest run's recorded candidate


def scaled(timing: Timing, factor: float) -> Timing:
    """The timing with every time multiplied by `factor`: what a slowdown by it would have recorded."""
    return dataclasses.replace(timing, samples=tuple(x * factor for x in timing.samples),
                               cpu_samples=tuple(x * factor for x in timing.cpu_samples),
                               rounds=tuple(x * factor for x in timing.rounds),
                               round_minima=tuple(x * factor for x in timing.round_minima),
                               round_cpu=tuple(x * factor for x in timing.round_cpu))


def injected(path: Path, pct: float, partner: Path | None = None) -> dict[str, str]:
    """Power over every cell, on the noise an honest run really had: each cell's candidate times multiplied by
    each INJECTED factor (all cells at once: the pooled noise is each cell's spread around its own mean, which a
    factor does not move), decided as `compare RUN --fail-above PCT` decides on the run's first rounds;
    "caught/cells" per factor. With a `partner` (another honest run, scaled alike), also what confirming each
    flagged cell with the partner's rounds of it catches (`…+confirmed`)."""
    results = screening(load([path]))
    other = screening(load([partner])) if partner else None
    out = {}
    for factor in INJECTED:
        def slowed(r: Results) -> Results:
            return dataclasses.replace(r, measurements=tuple(
                dataclasses.replace(m, timing=scaled(m.timing, factor))
                if m.cell.environment != "base" and m.timing is not None else m for m in r.measurements))
        rows = decide(slowed(results), pct)
        out[f"{factor:g}"] = f"{len(regressions(rows))}/{len(rows)}"
        if other is not None:
            both = decide(confirmed_by(slowed(results), slowed(other), pct), pct)
            out[f"{factor:g}+confirmed"] = f"{len(regressions(both))}/{len(both)}"
    return out


def cross_confirmed(path: Path, partner: Path, pct: float) -> list[str]:
    """The offending cells of `path` with its first decision's flags confirmed by `partner`'s rounds."""
    rows = decide(confirmed_by(load([path]), load([partner]), pct), pct)
    return [f"{r.cell.key} ×{r.change:.3f}" for r in regressions(rows)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="folder for the run files, wrappers and summary.json")
    p.add_argument("--honest", type=int, default=3, help="A/B runs with identical sides (default 3)")
    p.add_argument("--slowed", type=int, default=3, help="A/B runs with the targets slowed (default 3)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--fail-above", type=float, default=10.0, metavar="PCT")
    p.add_argument("--slowdown", type=float, default=0.2, help="fraction the targets are slowed by (default 0.2)")
    p.add_argument("--suite", action="store_true", help="the quick suite instead of issue 23's selection")
    p.add_argument("--select", help="another selection, as run's options in one string (e.g. \"--problem "
                                    "exp_dot_loss --operator grad\"); it must hold the targets")
    p.add_argument("--confirm", type=float, metavar="PCT", help="make the runs with run --confirm PCT")
    p.add_argument("--reuse", action="store_true", help="make no run: decide the run files already in --out")
    p.add_argument("--targets", default=",".join(TARGETS),
                   help="cells to slow down, as problem/operator/adapter/variant/n, comma-separated")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    selection = [] if args.suite else args.select.split() if args.select else SELECTION
    write = not args.reuse
    base = wrapper(args.out / "base.sh", {}, write)
    new = wrapper(args.out / "new.sh", {}, write)
    slow = wrapper(args.out / "slow.sh", {"ADCOMPARE_GATE_SLOWDOWN": str(args.slowdown),
                                          "ADCOMPARE_GATE_CELL": args.targets}, write)
    targets = [target_key(t) for t in args.targets.split(",")]
    summary_path = args.out / "summary.json"
    runs: dict = json.loads(summary_path.read_text())["runs"] if summary_path.exists() else {}
    plan = [(args.out / f"honest{k}.jsonl", new) for k in range(1, args.honest + 1)]
    plan += [(args.out / f"slow{k}.jsonl", slow) for k in range(1, args.slowed + 1)]
    if args.reuse:  # committed run files are gzipped (benchmarks/results/gate/ab/)
        plan = [(p if p.exists() else p.with_suffix(".jsonl.gz"), c) for p, c in plan]
    for path, candidate in plan:
        if not args.reuse:
            runs[path.name] = ab_run(path, base, candidate, args.rounds, selection, args.confirm)
            summary_path.write_text(json.dumps({"runs": runs}, indent=1))

    summary: dict = {"selection": selection or "quick suite", "rounds": args.rounds, "fail_above": args.fail_above,
                     "confirm": args.confirm, "slowdown": args.slowdown, "targets": targets, "runs": runs,
                     "honest": [], "slowed": []}
    honest_paths = [path for path, candidate in plan if candidate != slow]
    slowed_paths = [path for path, candidate in plan if candidate == slow]

    def partner(path: Path) -> Path | None:
        """The next run of the same kind (cyclic): whose rounds confirm this one's flags in `cross_confirmed`."""
        same = slowed_paths if path in slowed_paths else honest_paths
        return same[(same.index(path) + 1) % len(same)] if len(same) > 1 else None

    for path, candidate in plan:
        code, offending = gate(path, args.fail_above)
        caught = {key: any(o.startswith(f"{key} ") for o in offending) for key in targets}
        others = [o for o in offending if not any(o.startswith(f"{key} ") for key in targets)]
        confirmed, first = first_decision(path, args.fail_above)
        row = {"run": path.name.removesuffix(".gz"), "exit": code, "false_alarms": others,
               "unpaired_rule": unpaired(path, args.fail_above), "noise": noise_line(path, args.fail_above),
               "confirmed_cells": confirmed, "first_decision": first}
        other = partner(path)
        if other is not None:
            row["cross_confirmed"] = {"partner": other.name.removesuffix(".gz"),
                                      "offending": cross_confirmed(path, other, args.fail_above)}
        if candidate == slow:
            summary["slowed"].append({**row, "caught": caught, "offending": offending})
        else:
            summary["honest"].append({**row, "false_alarms": offending,
                                      "injected": injected(path, args.fail_above, other)})
    summary_path.write_text(json.dumps(summary, indent=1))

    honest, slowed = summary["honest"], summary["slowed"]
    print(f"A/B runs, --rounds {args.rounds}, compare --fail-above {args.fail_above:g}:")
    print(f"  honest: {sum(bool(h['false_alarms']) for h in honest)} of {len(honest)} runs with a false alarm "
          f"({sum(len(h['false_alarms']) for h in honest)} cells); unpaired rule on the same runs: "
          f"{sum(bool(h['unpaired_rule']) for h in honest)} runs, {sum(len(h['unpaired_rule']) for h in honest)} cells")
    for h in honest + slowed:
        print(f"    {h['run']}: exit {h['exit']} {h['false_alarms']}; {h['noise'].split('; ')[-1]}")
        if h["confirmed_cells"]:
            print(f"      confirmed {len(h['confirmed_cells'])} cells; before the confirmation: {h['first_decision']}")
    for h in honest + slowed:
        if "cross_confirmed" in h:
            print(f"    {h['run']}, its first decision confirmed by {h['cross_confirmed']['partner']}'s rounds: "
                  f"{h['cross_confirmed']['offending']}")
    for h in honest:
        print(f"  {h['run']}, every cell slowed in the record, caught: "
              + ", ".join(f"×{f}: {c}" for f, c in h["injected"].items()))
    for key in targets:
        print(f"  {args.slowdown:.0%} slowdown of {key}: caught in {sum(s['caught'][key] for s in slowed)} of "
              f"{len(slowed)} runs")
    print(f"  slowed runs: {sum(len(s['false_alarms']) for s in slowed)} innocent cells offending "
          f"{[o for s in slowed for o in s['false_alarms']]}")
    walls = [r["wall_s"] for r in runs.values()]
    if walls:
        print(f"  wall time per A/B run: {min(walls):.0f}–{max(walls):.0f} s")


if __name__ == "__main__":
    main()
