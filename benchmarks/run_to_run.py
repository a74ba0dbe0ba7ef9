"""How far the same cells' medians move between two runs, and how wide each cell's samples are: what a timing
policy costs in reproducibility.

Issue 39 shortened the timing of the quick suite that `adcompare report` runs itself (model/timing_policy.py
`report_policy`: 7 blocks of 10 ms after 20 ms, not 0.2 s after 50 ms). Give two runs of one policy and two of
another (e.g. `benchmarks/report_wall.py -o DIR` with the code before and after, interleaved); over the ok cells
all four share, this prints each pair's |log(median₁ ÷ median₂)| (median and 90th percentile), the cells'
IQR ÷ median, and their sample counts.
Run: python benchmarks/run_to_run.py A1/results.jsonl A2/results.jsonl [B1/results.jsonl B2/results.jsonl]
"""
from __future__ import annotations

import argparse
import math
import statistics

import numpy as np

from adcompare.model.measurement import Timing
from adcompare.model.status import Status
from adcompare.store.results import load


def timings(path: str) -> dict[str, Timing]:
    return {m.cell.key: m.timing for m in load([path]).measurements if m.timing and m.status is Status.OK}


def quantile(values: list[float], q: float) -> float:
    return sorted(values)[int(q * (len(values) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="two results files per policy, in pairs")
    args = parser.parse_args()
    if len(args.results) % 2:
        parser.error("give the results files in pairs: two runs of each policy")
    runs = [timings(path) for path in args.results]
    common = sorted(set.intersection(*(set(r) for r in runs)))
    print(f"{len(common)} ok cells in all {len(runs)} runs")
    if not common:
        return
    for i in range(0, len(runs), 2):
        a, b = runs[i], runs[i + 1]
        moved = [abs(math.log(a[k].median / b[k].median)) for k in common]
        spread = [float((np.percentile(t.samples, 75) - np.percentile(t.samples, 25)) / t.median)
                  for r in (a, b) for t in (r[k] for k in common)]
        samples = statistics.median(len(r[k].samples) for r in (a, b) for k in common)
        print(f"{args.results[i]} vs {args.results[i + 1]}: |log ratio| of medians: median "
              f"{statistics.median(moved):.3f}, p90 {quantile(moved, 0.9):.3f}; IQR ÷ median: median "
              f"{statistics.median(spread):.3f}, p90 {quantile(spread, 0.9):.3f}; samples a cell: {samples:g}")


if __name__ == "__main__":
    main()
