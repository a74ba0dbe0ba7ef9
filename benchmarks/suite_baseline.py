"""Publish a suite's end-to-end measurement: `adcompare list --suites` shows it as the suite's last published run.

Reads the results file of a whole-suite run (merged shards included), prints its cells by status and its five most
expensive families, and writes the suite's entry in
adcompare/study/suite_baselines.json: cells recorded, wall time, the machine (CPU and core count from the file's
provenance), the date, and where the results are committed. The wall time is what the run took end to end, passed
with --wall (e.g. from `time`); without it, the sum of the cells' and workers' start-up times the file records.
Run: python benchmarks/suite_baseline.py SUITE RESULTS [--wall SECONDS] [--committed PATH]
"""
from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

from adcompare.store.results import load
from adcompare.study.scope import BASELINES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("results", type=Path)
    parser.add_argument("--wall", type=float, help="end-to-end wall seconds of the run")
    parser.add_argument("--committed", help="where the results are committed (default: RESULTS as given)")
    args = parser.parse_args()
    results = load([args.results])
    ms = results.measurements
    # worker start-ups as the cells were charged them: workers started side by side (start_together) overlap, so
    # their own start-ups add up to more than the run spent; files from before that have only the workers' own
    shares = [float(m.details["worker_start_seconds"]) for m in ms if "worker_start_seconds" in m.details]
    starts = sum(shares) if shares else sum(float(w.get("startup_seconds", 0.0)) for w in results.workers)
    recorded = sum(float(m.details.get("wall_seconds", 0.0)) for m in ms) + starts
    prov = results.provenance[0]
    entry = {"cells": len(ms), "wall_seconds": round(args.wall if args.wall else recorded, 1),
             "wall_source": "end to end" if args.wall else "sum of cell and start-up times",
             "machine": f"{prov.cpu or 'unknown CPU'}, {prov.cpu_count or '?'} cores",
             "date": prov.date[:10], "results": args.committed or str(args.results)}
    table = json.loads(BASELINES.read_text(encoding="utf-8")) if BASELINES.is_file() else {}
    table[args.suite] = entry
    BASELINES.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{args.suite}: {entry}")
    print("cells by status: " + ", ".join(f"{n} {s}" for s, n in Counter(m.status.value for m in ms).most_common()))
    family: dict[str, float] = defaultdict(float)  # problem · operator · adapter · variant, sizes and dtypes summed
    for m in ms:
        c = m.cell
        family[f"{c.problem} · {c.operator} · {c.adapter} · {c.variant}"] += float(m.details.get("wall_seconds", 0.0))
    print("most expensive families: " + "; ".join(f"{k} {v:.0f} s" for k, v in
                                                    sorted(family.items(), key=lambda kv: -kv[1])[:5]))


if __name__ == "__main__":
    main()
