"""A corpus run's tallies, as its README gives them: cells by status per adapter, the share measured, ok cells per
problem, what did not measure and why, few-sample cells, and the harness's own cost (issue 39's goals).

Reads a results file (or several, merged as the report merges them: each key's last record counts) through the
same loader the report uses, labels included, and prints Markdown tables. "Measured" is a cell recorded `ok`;
the share is over the cells that are not `unsupported` (the adapters declare those), as in the committed READMEs.
Run: python benchmarks/corpus_tally.py benchmarks/results/gradbench/gradbench.jsonl
"""
from __future__ import annotations

import argparse
from collections import Counter, defaultdict

from adcompare.analysis.harness_cost import STAGES, harness_cost
from adcompare.model.status import Status
from adcompare.store.results import load
from adcompare.verify.expectations import expected_reason
from adcompare.verify.shared_references import SHARE_ABOVE

COLUMNS = ("ok", "timeout", "failed", "mismatch", "crashed", "skipped", "too_large", "unsupported")


def _why(message: str) -> str:
    """A skip's reason without its particulars ("skipped: the smaller size X timed out" → its first words)."""
    reason = message.split(":", 1)[1] if ":" in message else message
    return " ".join(reason.split("(")[0].split(";")[0].split()[:6])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+")
    parser.add_argument("--worst", type=int, default=10, help="cells listed over the harness goal")
    args = parser.parse_args()
    results = load(args.results)
    ms = results.measurements
    for prov, source in zip(results.provenance, results.sources):
        print(f"{source}: started {prov.date} on commit {prov.git_commit or 'unknown'}")
        for r in (r for r in results.resumptions if r.source == source):
            print(f"  resumed {r.describe()}")
    by_adapter: dict[str, Counter[str]] = defaultdict(Counter)
    for m in ms:
        by_adapter[m.cell.adapter][m.status.value] += 1
        by_adapter["**all**"][m.status.value] += 1
    print("| adapter | " + " | ".join(COLUMNS) + " |\n|---|" + "---|" * len(COLUMNS))
    for adapter in sorted(by_adapter, key=lambda a: (a.startswith("**"), a)):
        print(f"| {adapter} | " + " | ".join(f"{by_adapter[adapter][c]:,}" for c in COLUMNS) + " |")
    total = by_adapter["**all**"]
    counted = sum(total.values()) - total["unsupported"]
    print(f"\n{len(ms):,} cells; measured (ok) {total['ok']:,} of the {counted:,} not unsupported: "
          f"{100 * total['ok'] / counted:.1f} %")
    per_problem = Counter(m.cell.problem for m in ms if m.status is Status.OK)
    print("ok per problem: " + ", ".join(f"{p} {n:,}" for p, n in per_problem.most_common()))
    expected = Counter(m.status.value for m in ms if m.status.is_failure and expected_reason(m))
    unexpected = [m for m in ms if m.status.is_failure and not expected_reason(m)
                  and m.status not in (Status.TIMEOUT, Status.SKIPPED)]
    print(f"failures labelled expected: {dict(expected)}; unexpected (not timeouts): {len(unexpected)}")
    for m in unexpected[:20]:
        print(f"  {m.status.value} {m.cell.key}: {m.message[:160]}")
    skipped = Counter(_why(m.message) for m in ms if m.status is Status.SKIPPED)
    print("skipped, by why: " + "; ".join(f"{n} {why}" for why, n in skipped.most_common(6)))
    timeouts = [m for m in ms if m.status is Status.TIMEOUT]
    with_calls = [m for m in timeouts if m.timing is not None and m.timing.samples]
    print(f"timeouts: {len(timeouts)}, of which with timed calls kept: {len(with_calls)} (goal 0)")
    by_problem = Counter((m.cell.problem, m.cell.operator) for m in timeouts)
    print("timeouts by problem · operator: " + ", ".join(f"{p} · {o} {n}" for (p, o), n in by_problem.most_common()))
    few = [m for m in ms if m.status is Status.OK and m.timing is not None and m.timing.stopped]
    print(f"ok with timing cut short: {len(few)} "
          f"({dict(Counter(m.timing.stopped for m in few if m.timing is not None))})")
    cost = harness_cost(ms)
    if cost.cells:
        share = 100 * cost.own / cost.wall
        print(f"\nharness: {cost.own:.0f} s of the cells' {cost.wall:.0f} s ({share:.1f} %) outside the frameworks' "
              f"calls; {len(cost.over_goal)} of {len(cost.cells)} cells over max(10 %, 1 s)")
        stages = {k: sum(c.stages[k] for c in cost.cells) for k in STAGES}
        print("by stage: " + ", ".join(f"{k} {v:.0f} s" for k, v in stages.items()))
        again: dict[tuple[str, ...], list[float]] = defaultdict(list)  # references differenced in this worker
        for c in cost.cells:
            cell = c.measurement.cell
            if not c.measurement.details.get("reference_shared"):
                again[(cell.problem, cell.size, cell.operator, cell.dtype)].append(c.stages["reference"])
        repeated = sum(sum(v) - max(v) for v in again.values() if max(v) >= SHARE_ABOVE)
        shared = sum(1 for c in cost.cells if c.measurement.details.get("reference_shared"))
        print(f"references differenced again by another worker: {repeated:.0f} s; read from another worker: "
              f"{shared} cells (verify/shared_references.py)")
        over = Counter(c.measurement.cell.problem + " · " + c.measurement.cell.operator for c in cost.over_goal)
        print("over the goal, by problem · operator: " + ", ".join(f"{k} {n}" for k, n in over.most_common(8)))
        for c in cost.worst(args.worst):
            top = max(STAGES, key=lambda k: c.stages[k])
            print(f"  {c.measurement.cell.key}: wall {c.wall:.1f} s, harness {c.own:.1f} s "
                  f"({100 * c.own / c.wall:.0f} %), most in {top} {c.stages[top]:.1f} s")


if __name__ == "__main__":
    main()
