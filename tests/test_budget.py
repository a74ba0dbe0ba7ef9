"""--max-time: durations, the round-by-round choice (no family starves), and a real run that stops at its budget,
records the rest as resumable `skipped`, and finishes them with --resume."""
from __future__ import annotations

import json

import pytest

from adcompare.cli.main import main
from adcompare.model.errors import UsageError
from adcompare.model.status import Status
from adcompare.store.results import finished_keys, load
from adcompare.study.budget import choose, parse_duration
from adcompare.study.estimate import estimate
from adcompare.study.plan import Selection
from adcompare.study.plan import plan as make_plan


def test_durations():
    assert [parse_duration(t) for t in ("90", "90s", "15m", "1.5h", "1h30m")] == [90, 90, 900, 5400, 5400]
    for bad in ("", "soon", "0", "5d", "-3m"):
        with pytest.raises(UsageError, match="--max-time"):
            parse_duration(bad)


def test_a_budget_for_one_round_runs_every_familys_smallest_size(registry):
    plan = make_plan(registry, Selection(problems=("exp_dot_loss", "control_loop_static"), suite="full",
                                         adapters=("autograd", "jax"), dtypes=("float32",)))
    est = estimate(registry, plan.cells)
    families = {c.family for c in plan.cells}
    smallest = [c for c in plan.cells if c.size == "n10"]
    one_round = sum(est.cells[c.key] for c in smallest) + sum(est.startups.values())
    chosen, rest = choose(plan.cells, est, one_round * 1.05)
    assert {c.family for c in chosen} == families  # nobody starves
    assert {c.key for c in smallest} <= {c.key for c in chosen}
    assert rest and all(c.size != "n10" for c in rest)
    assert [c for c in plan.cells if c in chosen] == chosen  # run in the plan's order
    everything, nothing = choose(plan.cells, est, 1e9)
    assert len(everything) == len(plan.cells) and not nothing


def test_max_time_stops_records_the_rest_and_resume_finishes(tmp_path, capsys):
    out = tmp_path / "budget.jsonl"
    selection = ["--problem", "f_xy,f_r2_r3,g_xy", "--adapter", "autograd", "--dtype", "float32", "--suite", "full",
                 "--no-progress",
                 "-o", str(out)]
    main(["run", *selection, "--max-time", "3s"])
    first = load([out]).measurements
    left = [m for m in first if m.status is Status.SKIPPED]
    assert left and all(m.details.get("resumable") and "--max-time 3s" in m.message for m in left)
    ran = [m for m in first if m.status is Status.OK]
    assert ran, "the budget fits some cells"
    assert finished_keys(out) == {m.cell.key for m in first if not m.details.get("resumable")}
    capsys.readouterr()
    main(["run", *selection, "--resume"])
    final = load([out]).measurements
    assert {m.cell.key for m in final} == {m.cell.key for m in first}
    assert not [m for m in final if m.status is Status.SKIPPED]
    records = [json.loads(line) for line in out.read_text().splitlines()[1:]]
    ran_twice = {r["key"] for r in records if r.get("record") == "cell" and r["status"] == "ok"}
    assert len([r for r in records if r.get("record") == "cell" and r["status"] == "ok"]) == len(ran_twice)
