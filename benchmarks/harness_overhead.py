"""The harness's own cost per cell: seconds outside the framework's calls, against the cell's wall time.

Issue 39, goal: ≤ max(10 %, 1 s) of every cell's wall time. A cell's wall (`details.wall_seconds`, the runner's,
worker start-up excluded) is split into the framework's seconds — prepare (transforms, compilation), the first
call, the timed calls (`timing.call_seconds`) — and the harness's: the worker's stages in
`details.overhead_seconds` (inputs, setup, reference, check, timing_loop) and the rest (the parent, the protocol,
the worker's loop). Reads results files written since that split; or runs `adcompare run` with the arguments
after `--` into a fresh file first.
Run: python benchmarks/harness_overhead.py results/x.jsonl [...]
     python benchmarks/harness_overhead.py -- --suite gradbench --problem bundle_adjustment --operator vmap_jacfwd
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from adcompare.store.results import load

STAGES = ("inputs", "setup", "reference", "check", "timing_loop")


def harness(m) -> tuple[float, dict[str, float]] | None:
    """(harness seconds, by stage with "other"), or None for a record without the split."""
    split = m.details.get("overhead_seconds")
    wall = m.details.get("wall_seconds")
    if split is None or wall is None:
        return None
    framework = m.details.get("prepare_seconds", 0.0)
    if m.timing is not None:
        framework += m.timing.first_call + m.timing.call_seconds
    elif "first_call_seconds" in m.details:
        framework += m.details["first_call_seconds"]
    own = max(0.0, wall - framework)
    return own, {**{k: split.get(k, 0.0) for k in STAGES}, "other": max(0.0, own - sum(split.values()))}


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
    rows = [(m, h) for m in load(paths).measurements if (h := harness(m)) is not None]
    if not rows:
        raise SystemExit("no cell record with details.overhead_seconds (written before issue 39's split)")
    total_wall = sum(m.details["wall_seconds"] for m, _ in rows)
    total_own = sum(own for _, (own, _) in rows)
    over = [(m, own) for m, (own, _) in rows if own > max(0.1 * m.details["wall_seconds"], 1.0)]
    share = 100 * total_own / total_wall
    print(f"{len(rows)} cells, wall {total_wall:.1f} s, harness {total_own:.1f} s ({share:.1f} %); "
          f"{len(over)} over max(10 %, 1 s) of their wall")
    print(f"{'cell':70} {'wall s':>8} {'own s':>7} {'own %':>6}  " + " ".join(f"{k:>9}" for k in (*STAGES, "other")))
    for m, (own, split) in sorted(rows, key=lambda r: -r[1][0])[:args.worst]:
        wall = m.details["wall_seconds"]
        print(f"{m.cell.id[:70]:70} {wall:8.2f} {own:7.2f} {100 * own / wall:5.1f}%  "
              + " ".join(f"{split[k]:9.3f}" for k in (*STAGES, "other")))


if __name__ == "__main__":
    main()
