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
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    paths = list(args.results)
    if run_args:
        out = Path(tempfile.mkdtemp()) / "overhead.jsonl"
        subprocess.run([sys.executable, "-m", "adcompare", "run", *run_args, "-o", str(out)], check=True)
        paths.append(str(out))
    cost = harness_cost(load(paths).measurements)
    if not cost.cells:
        raise SystemExit("no cell record with details.overhead_seconds (written before issue 39's split)")
    share = 100 * cost.own / cost.wall
    print(f"{len(cost.cells)} cells, wall {cost.wall:.1f} s, harness {cost.own:.1f} s ({share:.1f} %); "
          f"{len(cost.over_goal)} over max(10 %, 1 s) of their wall")
    print(f"{'cell':70} {'wall s':>8} {'own s':>7} {'own %':>6}  " + " ".join(f"{k[:9]:>9}" for k in STAGES))
    for c in cost.worst(args.worst):
        print(f"{c.measurement.cell.id[:70]:70} {c.wall:8.2f} {c.own:7.2f} {100 * c.own / c.wall:5.1f}%  "
              + " ".join(f"{c.stages[k]:9.3f}" for k in STAGES))


if __name__ == "__main__":
    main()
