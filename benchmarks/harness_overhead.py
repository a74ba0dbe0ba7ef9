"""The harness's own cost per cell: seconds outside the framework's calls, against the cell's wall time.

Issue 39, goal: ≤ max(10 %, 1 s) of every cell's wall time. A cell's wall (`details.wall_seconds`, the runner's,
worker start-up excluded) is split into the framework's seconds — prepare (transforms, compilation), the first
call, the timed calls (`timing.call_seconds`) — and the harness's: the worker's stages in
`details.overhead_seconds` (inputs, setup, reference, check, timing_loop), the rest (the parent, the protocol,
the worker's loop) and each worker's start-up shared by its cells (adcompare/analysis/harness_cost.py). Reads
results files written since that split; or runs `adcompare run` with the arguments after `--` into a fresh file
first.
Run: python benchmarks/harness_overhead.py results/x.jsonl [...]
     python benchmarks/harness_overhead.py -- --suite gradbench --problem bundle_adjustment --operator vmap_jacfwd
     python benchmarks/harness_overhead.py new.jsonl --against old.jsonl   # the cells both measured, side by side
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from adcompare.analysis.harness_cost import STAGES, harness_cost
from adcompare.store.results import load


def main() -> None:
    argv = sys.argv[1:]
    run_args = argv[argv.index("--") + 1:] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="*")
    parser.add_argument("--worst", type=int, default=15, help="cells listed, by harness seconds")
    parser.add_argument("--against", metavar="RESULTS", help="another run: totals by stage over the cells both "
                                                            "measured ok (older code, or another machine)")
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    paths = list(args.results)
    if run_args:
        out = Path(tempfile.mkdtemp()) / "overhead.jsonl"
        subprocess.run([sys.executable, "-m", "adcompare", "run", *run_args, "-o", str(out)], check=True)
        paths.append(str(out))
    measurements = load(paths).measurements
    if args.against:
        _side_by_side(measurements, load([args.against]).measurements, args.against)
    cost = harness_cost(measurements)
    if not cost.cells:
        raise SystemExit("no cell record with details.overhead_seconds (written before issue 39's split)")
    share = 100 * cost.own / cost.wall
    without_start = sum(c.over_goal_without_start for c in cost.cells)
    print(f"{len(cost.cells)} cells, wall {cost.wall:.1f} s, harness {cost.own:.1f} s ({share:.1f} %); "
          f"{len(cost.over_goal)} over max(10 %, 1 s) of their wall, {without_start} without their share of a "
          f"worker's start-up (a run of a few cells gives each start to few; a corpus run to hundreds)")
    print(f"{'cell':70} {'wall s':>8} {'own s':>7} {'own %':>6}  " + " ".join(f"{k[:9]:>9}" for k in STAGES))
    for c in cost.worst(args.worst):
        print(f"{c.measurement.cell.id[:70]:70} {c.wall:8.2f} {c.own:7.2f} {100 * c.own / c.wall:5.1f}%  "
              + " ".join(f"{c.stages[k]:9.3f}" for k in STAGES))


def _side_by_side(ours, theirs, name: str) -> None:
    """Each run's harness over the cells both measured ok: wall, harness, cells over the goal, seconds by stage."""
    ok = {m.cell.key for m in theirs if m.status.value == "ok"} & {m.cell.key for m in ours if m.status.value == "ok"}
    for label, ms in (("these", ours), (name, theirs)):
        cost = harness_cost([m for m in ms if m.cell.key in ok])
        if not cost.cells:
            raise SystemExit(f"{label}: no cell both runs measured has details.overhead_seconds")
        stages = {k: sum(c.stages[k] for c in cost.cells) for k in STAGES}
        print(f"{label}: {len(cost.cells)} cells both measured, wall {cost.wall:.0f} s, harness {cost.own:.0f} s "
              f"({100 * cost.own / cost.wall:.1f} %), {len(cost.over_goal)} over the goal; "
              + ", ".join(f"{k} {v:.0f} s" for k, v in stages.items()))


if __name__ == "__main__":
    main()
