"""How well the cost model (study/estimate.py) prices the cells a results file measured: each ok cell's wall time
against its model, overall and per adapter · variant · problem, for the slow cells (a call over the policy's block
allotment, timed by rule 7 of run/timing.py) and for all.

The model orders a budgeted run's cells before any are measured; a run's own cells then correct it (LiveEstimate),
and later runs read history. Ratios far from 1 say which part of the model to refit.
Run: python benchmarks/model_fit.py benchmarks/results/adbench/adbench-2026-11-27.jsonl [--timeout 60] [--plain]
(--plain: model under the default policy; by default a --max-time run's, as the corpus runs are timed.)
"""
from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from adcompare.cli.pipeline import load_registry
from adcompare.model.status import Status
from adcompare.model.timing_policy import budget_policy
from adcompare.store.results import load
from adcompare.study.estimate import estimate


def _quantiles(ratios: list[float]) -> str:
    if len(ratios) < 2:
        return f"{ratios[0]:.2f}" if ratios else "—"
    q = statistics.quantiles(ratios, n=10)
    return f"p10 {q[0]:.2f} · p50 {statistics.median(ratios):.2f} · p90 {q[8]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--plain", action="store_true", help="model under the default policy")
    args = parser.parse_args()
    registry = load_registry([])
    policy = budget_policy(not args.plain)
    ok = {m.cell.key: m for m in load([args.results], registry.problems).measurements
          if m.status is Status.OK and m.timing is not None and m.timing.median is not None
          and isinstance(m.details.get("wall_seconds"), (int, float))}
    modelled = estimate(registry, [m.cell for m in ok.values()], timeout=args.timeout, policy=policy).modelled
    slow = {k for k, m in ok.items() if m.timing is not None and (m.timing.median or 0) > policy.block_allotment}
    ratio = {k: float(ok[k].details["wall_seconds"]) / modelled[k] for k in modelled if modelled[k] > 0}
    print(f"{args.results}: wall ÷ model, {len(ratio)} ok cells ({len(slow)} slow)")
    print(f"  all:  {_quantiles(list(ratio.values()))}")
    print(f"  slow: {_quantiles([ratio[k] for k in slow if k in ratio])}")
    groups: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for k in slow & ratio.keys():
        c = ok[k].cell
        groups[(c.adapter, c.variant, c.problem)].append(ratio[k])
    print("slow cells by adapter · variant · problem (cells, median wall ÷ model):")
    for (adapter, variant, problem), values in sorted(groups.items()):
        print(f"  {adapter:10s} {variant:15s} {problem:18s} {len(values):4d}  {statistics.median(values):6.2f}")


if __name__ == "__main__":
    main()
