"""Wall time of `adcompare report` with no results given (it runs the quick suite, imports included).

Goal (issue 17): ≤ 150 s on the project's 2-core machine, with the quick suite timing sizes (scaling). Prints the
wall time, the cell count, and where the time went: per adapter · variant, and the ten most expensive cells
(first call + steady-state timing as recorded; checking and worker start-up are the rest of the wall time).
Run: python benchmarks/report_wall.py [-o DIR] [-- extra adcompare report options]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from adcompare.store.results import load

GOAL_S = 150.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, help="report folder (default: a temporary one)")
    parser.add_argument("extra", nargs="*", help="more options for adcompare report (after --)")
    args = parser.parse_args()
    out = args.output or Path(tempfile.mkdtemp(prefix="report-wall-"))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "adcompare", "report", "-o", str(out), "--no-progress",
                           *args.extra], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
    results = load([out / "results.jsonl"])
    ms = results.measurements
    spent: dict[str, float] = defaultdict(float)
    cost = []
    for m in ms:
        seconds = (m.timing.first_call + (m.timing.total_seconds or 0)) if m.timing else 0.0
        spent[f"{m.cell.adapter} · {m.cell.variant}"] += seconds
        cost.append((seconds, m.cell.id, m.status.value))
    print(f"adcompare report: {wall:.1f} s wall for {len(ms)} cells "
          f"(goal ≤ {GOAL_S:.0f} s: {'met' if wall <= GOAL_S else 'NOT met'}); report in {out}")
    print("first call + timing per adapter · variant: " +
          ", ".join(f"{k} {v:.1f} s" for k, v in sorted(spent.items(), key=lambda kv: -kv[1])))
    for seconds, cell, status in sorted(cost, reverse=True)[:10]:
        print(f"  {seconds:6.2f} s  {cell}  {status}")


if __name__ == "__main__":
    main()
