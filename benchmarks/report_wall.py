"""Wall time of `adcompare report` with no results given (it runs the quick suite, imports included).

Goal (issues 17 and 39): ≤ 150 s on the project's 2-core machine, with the quick suite timing sizes (scaling).
Prints the wall time, the cell count, and where the time went: the frameworks' own (prepare, first calls, timed
calls) against adcompare's (the workers' start-ups, the cells' own stages by analysis/harness_cost.py, and the rest
outside the cells: closing workers, the parent's start, the page); then per adapter · variant and the ten most
expensive cells (first call + steady-state timing as recorded).
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

from adcompare.analysis.harness_cost import harness_cost
from adcompare.model.measurement import Measurement
from adcompare.model.status import Status
from adcompare.store.results import load

GOAL_S = 150.0


def where_it_went(measurements: list[Measurement], wall: float) -> dict[str, float]:
    """The run's `wall` seconds split, the parts adding up to it: the frameworks' in the cells measured ok (prepare,
    first calls, timed calls, the release of what prepare started), adcompare's (those cells' own stages by
    analysis/harness_cost.py, the workers' start-ups, what is outside every cell: closing workers, the parent's start,
    the page) and the cells not measured ok (unsupported, failed: their wall whole)."""
    ok: list[Measurement] = []
    others: list[Measurement] = []
    for m in measurements:
        (ok if m.status is Status.OK and m.timing else others).append(m)

    def total(key: str, cells: list[Measurement]) -> float:
        return sum(float(m.details.get(key, 0.0) or 0.0) for m in cells)

    stages: dict[str, float] = defaultdict(float)
    for cost in harness_cost(ok).cells:
        for stage, seconds in cost.stages.items():
            if stage != "worker_start":  # its share of a start-up: counted whole below
                stages[stage] += seconds
    starts = total("worker_start_seconds", measurements)
    timings = [t for m in ok if (t := m.timing) is not None]
    return {"prepare": total("prepare_seconds", ok), "first calls": sum(t.first_call for t in timings),
            "timed calls": sum(t.call_seconds for t in timings), "release": total("release_seconds", ok),
            "cells' own stages": sum(stages.values()), "references": stages["reference"], "worker start-ups": starts,
            "outside the cells": wall - total("wall_seconds", measurements) - starts,
            "cells not measured ok": total("wall_seconds", others)}


FRAMEWORKS = ("prepare", "first calls", "timed calls", "release")
ADCOMPARE = ("cells' own stages", "worker start-ups", "outside the cells")


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
    split = where_it_went(list(ms), wall)
    for name, parts in (("frameworks' own", FRAMEWORKS), ("adcompare's", ADCOMPARE)):
        print(f"{name} {sum(split[k] for k in parts):.1f} s: " + ", ".join(f"{k} {split[k]:.1f} s" for k in parts)
              + (f" (references {split['references']:.1f} s of the stages)" if parts is ADCOMPARE else ""))
    print(f"cells not measured ok: {split['cells not measured ok']:.1f} s")
    print("first call + timing per adapter · variant: " +
          ", ".join(f"{k} {v:.1f} s" for k, v in sorted(spent.items(), key=lambda kv: -kv[1])))
    for seconds, cell, status in sorted(cost, reverse=True)[:10]:
        print(f"  {seconds:6.2f} s  {cell}  {status}")


if __name__ == "__main__":
    main()
