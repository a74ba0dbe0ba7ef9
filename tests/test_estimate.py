"""Estimates: the model grows with size and compile cost, history from the same machine replaces it, another
machine's history is ignored; --dry-run says which it used and --json lists every cell."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from adcompare.cli.main import main
from adcompare.model.cell import Cell
from adcompare.model.fingerprint import Machine
from adcompare.model.measurement import Measurement, Timing
from adcompare.model.problem import shapes_of
from adcompare.model.status import Status
from adcompare.model.timing_policy import TimingPolicy, budget_policy
from adcompare.run.timing import measure
from adcompare.store.results import ResultsWriter, load
from adcompare.study import scope as study
from adcompare.study.estimate import History, ModelledCell, estimate, model_cell, timed_seconds
from adcompare.study.plan import Selection
from adcompare.study.plan import plan as make_plan

from .test_timing import _sleeper


def test_the_model_grows_with_size_and_slow_compilers(registry):
    plan = make_plan(registry, Selection(problems=("exp_dot_loss",), operators=("jacfwd",), suite="full",
                                         adapters=("torch",), dtypes=("float32",)))
    est = estimate(registry, plan.cells)
    eager = [est.cells[c.key] for c in plan.cells if c.variant == "eager"]
    assert eager == sorted(eager) and eager[-1] > 2 * eager[0]
    by_variant = {c.variant: est.cells[c.key] for c in plan.cells if c.size == "n10"}
    assert by_variant["compiled"] > 5 * by_variant["eager"]  # torch.compile is a slow variant


def test_a_closed_form_reference_is_priced_as_one_evaluation_not_as_differencing(registry):
    """GMM declares its gradient by hand (2.5 s at d64-K200-n10000, where a differenced direction took 21 s): the
    model prices that reference as one evaluation, as it does the value's; hvp, which it differences, costs more."""
    gmm = registry.problem("gmm")
    size = gmm.size("d64-K200-n10000")
    shapes = shapes_of(gmm, size)
    fixed = {op: model_cell(registry, Cell("gmm", size.label, op, "jax", "compiled", "cpu", "float64"), shapes,
                            with_reference=True).fixed
             - model_cell(registry, Cell("gmm", size.label, op, "jax", "compiled", "cpu", "float64"), shapes,
                          with_reference=False).fixed for op in ("value", "grad", "hvp")}
    assert fixed["grad"] == pytest.approx(fixed["value"]) and fixed["hvp"] > 5 * fixed["grad"]


def write(path, machine: Machine, seconds: float) -> Cell:
    cell = Cell("f_xy", "n2", "hessian", "autograd", "eager", "cpu", "float32")
    with ResultsWriter(path, {"machine": machine.to_json(), "threads": 1}) as w:
        w.add(Measurement(cell, Status.OK, details={"wall_seconds": seconds}))
        w.add_worker({"adapter": "autograd", "dtype": "float32", "device": "cpu", "startup_seconds": 0.25})
    return cell


def test_history_from_the_same_machine_replaces_the_model(registry, tmp_path):
    here, there = Machine("here", "cpu A"), Machine("there", "cpu B")
    cell = write(tmp_path / "a.jsonl", here, 42.0)
    results = load([tmp_path / "a.jsonl"])
    est = estimate(registry, [cell], History.from_results(results, here.id))
    assert est.cells[cell.key] == 42.0 and est.measured == {cell.key}
    assert est.startups[("autograd", "float32", "cpu")] == 0.25
    other = estimate(registry, [cell], History.from_results(results, there.id))
    assert other.cells[cell.key] != 42.0 and not other.measured


def test_dry_run_json_lists_every_cell_with_estimates(capsys, tmp_path):
    argv = ["run", "--problem", "exp_dot_loss", "--suite", "full", "--dry-run", "-o", str(tmp_path / "none.jsonl")]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    planned = [r for r in out["cells"] if r["status"] == "planned"]
    assert planned and all(r["seconds"] > 0 and r["bytes"] > 0 and r["source"] == "model" for r in planned)
    assert {r["status"] for r in out["cells"]} <= {"planned", "unsupported", "too_large"}
    assert len(out["cells"]) == out["total_cells"] and out["estimated_seconds"] > 0
    assert main(argv) == 0
    assert "modelled, no earlier results on this machine" in capsys.readouterr().out


def test_list_suites_counts_cells_and_sums_this_machines_measured_times(capsys, tmp_path):
    out = tmp_path / "one.jsonl"
    assert main(["run", "--problem", "f_xy", "--adapter", "autograd", "--variant", "eager", "--no-progress",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["list", "--suites", "--json", "--history", str(out)]) == 0
    costs = {c["suite"]: c for c in json.loads(capsys.readouterr().out)}
    assert {"quick", "full"} <= set(costs)
    assert costs["full"]["cells"] > costs["quick"]["cells"] > 0
    assert costs["quick"]["measured_cells"] == 1 and costs["quick"]["measured_seconds"] > 0
    assert costs["quick"]["estimated_seconds"] > 0
    assert main(["list", "--suites"]) == 0
    assert "none in results/ or --history" in capsys.readouterr().out


def test_list_suites_reads_this_machines_earlier_runs_and_the_published_baselines(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # run's default output goes to ./results/, which list --suites reads unasked
    assert main(["run", "--problem", "f_xy", "--adapter", "autograd", "--variant", "eager", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["list", "--suites", "--json"]) == 0
    costs = {c["suite"]: c for c in json.loads(capsys.readouterr().out)}
    assert costs["quick"]["measured_cells"] == 1
    published = study.published_baselines()
    for suite, entry in published.items():  # each published run names its cells, wall time, machine and file
        assert costs[suite]["published"] == entry
        assert entry["cells"] > 0 and entry["wall_seconds"] > 0 and entry["machine"] and entry["results"]
    assert "full" in published  # the project's baseline run of the full suite (benchmarks/results/full/)


def test_a_slow_cells_model_counts_the_calls_the_timer_makes_under_each_policy():
    """Rule 7 of run/timing.py in the model: a call over the block allotment is timed with `slow_samples` calls and
    no warm-up, so the model charges the first call and those, per policy (a --max-time run's three, the default's
    seven), as `measure` makes them; a fast call keeps its warm-up and blocks."""
    for policy in (TimingPolicy(max_time=0.07), replace(budget_policy(True), max_time=0.07)):  # 10 ms a block
        timing = measure(_sleeper(0.03), lambda out: None, 0.03, compiled=False, policy=policy)
        calls = 1 + timing.warmup_calls + len(timing.samples) * timing.number
        assert timed_seconds(0.03, policy) == pytest.approx(0.03 * calls)
        assert calls == 1 + policy.slow_samples
    fast = TimingPolicy()
    assert timed_seconds(1e-4, fast) == pytest.approx(1e-4 + fast.warmup_time + fast.min_time)


def test_a_budgeted_study_models_its_slow_cells_with_the_budgets_fewer_calls(registry):
    """`prepare` models the cells under the policy the run will use: with --max-time a slow cell (here every
    BA per-example Jacobian at p = 182,072, about half a second a call) is modelled with three calls, not seven;
    a fast one (the same at p = 31,843 in autograd) alike."""
    plan = make_plan(registry, Selection(problems=("bundle_adjustment",), operators=("vmap_jacfwd",),
                                         sizes=("n49-m7776-p31843", "n161-m48126-p182072"), adapters=("autograd",),
                                         suite="adbench"))
    plain = study.prepare(registry, plan).estimate.modelled
    budgeted = study.prepare(registry, plan, max_time="10h").estimate.modelled
    small, large = (f"bundle_adjustment/{size}/vmap_jacfwd/autograd/eager/cpu/float64"
                    for size in ("n49-m7776-p31843", "n161-m48126-p182072"))
    assert budgeted[small] == plain[small] and budgeted[large] < plain[large]


def test_a_family_is_predicted_to_time_out_only_where_its_runner_would_skip_the_rest():
    """The runner skips a family's larger sizes after a timeout or a cell that kept only its first call, not after
    a slow cell its deadline stopped with a few calls measured: the model predicts it from what must fit (fixed
    part, first call, a second call), not from the whole cell's seconds."""
    slow = ModelledCell(fixed=1.0, per_call=20.0)  # 161 s under the default policy, 81 s under a budget's
    assert slow.seconds(TimingPolicy()) > 60 and not slow.times_out(60)
    assert ModelledCell(fixed=21.0, per_call=20.0).times_out(60)


def test_a_slow_cell_a_timeout_allows_few_calls_leaves_its_family_priced_by_the_model(registry):
    """estimate(): a size whose cell would run past the timeout but is measured within it (a slow cell stopped
    by its deadline) prices the next size by its model, not as skipped."""
    plan = make_plan(registry, Selection(problems=("bundle_adjustment",), operators=("vmap_jacfwd",),
                                         adapters=("autograd",), suite="adbench"))
    first, second = plan.cells[2], plan.cells[3]
    problem = registry.problems["bundle_adjustment"]
    model = model_cell(registry, first, shapes_of(problem, problem.size(first.size)), with_reference=True)
    timeout = (model.fixed + 2 * model.per_call + model.seconds(TimingPolicy())) / 2  # between what must fit, all
    est = estimate(registry, [first, second], timeout=timeout)
    assert est.cells[first.key] == timeout and est.cells[second.key] > 0.1


def _slow_record(path, machine: Machine, calls: int) -> Cell:
    cell = Cell("f_xy", "n2", "hessian", "autograd", "eager", "cpu", "float32")
    timing = Timing(samples=(2.0,) * calls, number=1, first_call=2.0, warmup_calls=0)
    with ResultsWriter(path, {"machine": machine.to_json(), "threads": 1}) as w:
        w.add(Measurement(cell, Status.OK, timing=timing, details={"wall_seconds": 2.0 * (1 + calls) + 0.5}))
    return cell


def test_history_of_a_slow_cell_is_priced_with_the_calls_the_next_runs_policy_gives_it(registry, tmp_path):
    """A slow cell measured with a budget's three calls (2 s each) costs four calls more in a plain run, and one
    measured with seven costs four fewer under a budget; a cell its deadline stopped is priced as measured."""
    here = Machine("here", "cpu A")
    cell = _slow_record(tmp_path / "three.jsonl", here, 3)
    history = History.from_results(load([tmp_path / "three.jsonl"]), here.id)
    assert estimate(registry, [cell], history, policy=budget_policy(True)).cells[cell.key] == 8.5
    assert estimate(registry, [cell], history, policy=TimingPolicy()).cells[cell.key] == 16.5
    _slow_record(tmp_path / "seven.jsonl", here, 7)
    history = History.from_results(load([tmp_path / "seven.jsonl"]), here.id)
    assert estimate(registry, [cell], history, policy=budget_policy(True)).cells[cell.key] == 8.5
