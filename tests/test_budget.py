"""--max-time: durations, rounds of cost (cheap cells first, a family smallest size first), the budget's choice,
and real runs that stop at their budget, record the rest as resumable `skipped`, and finish them with --resume."""
from __future__ import annotations

import json
import re
import time
from dataclasses import replace

import pytest

from adcompare.cli.main import main
from adcompare.model.cell import Cell
from adcompare.model.errors import UsageError
from adcompare.model.observer import RunObserver
from adcompare.model.status import Status
from adcompare.model.timing_policy import TimingPolicy
from adcompare.run import runner
from adcompare.run.runner import RunOptions
from adcompare.store.results import finished_keys, load
from adcompare.study.budget import COST_ROUNDS, choose, cost_rounds, parse_duration
from adcompare.study.estimate import Estimate, History, LiveEstimate, estimate
from adcompare.study.plan import Plan, Selection
from adcompare.study.plan import plan as make_plan
from adcompare.study.scope import prepare


def test_durations():
    assert [parse_duration(t) for t in ("90", "90s", "15m", "1.5h", "1h30m")] == [90, 90, 900, 5400, 5400]
    for bad in ("", "soon", "0", "5d", "-3m"):
        with pytest.raises(UsageError, match="--max-time"):
            parse_duration(bad)


def test_a_budget_is_filled_cheapest_first_each_family_smallest_size_first(registry):
    """choose() fills the budget greedily in cost_rounds' order: every chosen cell's smaller sizes are chosen, and
    a cell left out whose smaller sizes were all chosen would not fit in what the chosen cells leave of it."""
    plan = make_plan(registry, Selection(problems=("exp_dot_loss", "control_loop_static"), suite="full",
                                         adapters=("autograd", "jax"), dtypes=("float32",)))
    est = estimate(registry, plan.cells)
    est = Estimate(est.cells, {})  # no start-ups: what is left of the budget is then exact
    budget = sum(est.cells.values()) / 3
    chosen, rest = choose(plan.cells, est, budget)
    assert chosen and rest
    assert [c for c in plan.cells if c in chosen] == chosen  # run in the plan's order
    keys = {c.key for c in chosen}
    sizes: dict[tuple[str, ...], list[Cell]] = {}
    for c in plan.cells:
        sizes.setdefault(c.family, []).append(c)
    left = budget - sum(est.cells[k] for k in keys)
    for family in sizes.values():
        taken = [c.key in keys for c in family]
        assert taken == sorted(taken, reverse=True)  # a family's chosen sizes are its smallest ones
        if not all(taken):
            assert est.cells[family[taken.count(True)].key] > left  # its first size left out did not fit
    cheap = cost_rounds(plan.cells, lambda c: est.cells[c.key])[0]
    assert {c.key for c in cheap} <= keys  # the first round costs a fraction of the budget here
    everything, nothing = choose(plan.cells, est, 1e9)
    assert len(everything) == len(plan.cells) and not nothing


def test_a_rounds_run_is_given_what_the_budget_fits_and_a_one_round_run_everything(registry):
    """`--rounds` repeats each timed cell later, so it runs only the cells the estimate fits (the rest recorded
    left out up front); a one-round run is given every cell and its live estimate decides."""
    plan = make_plan(registry, Selection(problems=("exp_dot_loss",), suite="full", adapters=("autograd",),
                                         dtypes=("float32",)))
    st = prepare(registry, plan, max_time="2s")
    assert st.beyond and st.scheduled
    whole, none = st.to_run(1)
    assert whole.cells == plan.cells and not none
    fits, left = st.to_run(3)
    assert fits.cells == st.scheduled
    assert {m.cell.key for m in left} == set(st.beyond)
    assert all(m.status is Status.SKIPPED and m.details["resumable"] for m in left)


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


def _cell(operator: str, size: str, device: str = "cpu", adapter: str = "autograd") -> Cell:
    return Cell("exp_dot_loss", size, operator, adapter, "eager", device, "float64")


def test_the_live_estimate_corrects_a_family_from_its_smaller_size_and_a_device_from_its_cells():
    """A finished cell's wall ÷ its modelled seconds corrects its family's larger sizes; a family with nothing run
    yet takes the median ratio of its adapter's families on the same device once three have run normally (a GPU's
    from GPU cells only); a cell measured on this machine before keeps its measured seconds."""
    small, large = _cell("grad", "n10"), _cell("grad", "n100")
    other, measured = _cell("value", "n10"), _cell("jvp", "n10")
    gpu = _cell("value", "n10", device="cuda")
    cpu_more = [replace(_cell(operator, "n10"), variant="compiled") for operator in ("hvp", "jacfwd")]
    refused = replace(_cell("hessian", "n10"), variant="compiled")
    gpu_more = [replace(_cell(operator, "n10", device="cuda"), variant="compiled")
                for operator in ("value", "hvp", "jacfwd")]
    est = Estimate({c.key: s for c, s in ((small, 0.1), (large, 1.0), (other, 0.2), (measured, 5.0), (gpu, 0.2),
                                          *((c, 0.1) for c in (*cpu_more, refused)),
                                          *((c, 0.2) for c in gpu_more))},
                   {}, frozenset({measured.key}))
    live = LiveEstimate(est)
    assert live.seconds(large) == 1.0
    live.learn(small, 3.0)  # 30× the model
    assert live.seconds(large) == pytest.approx(30.0)
    assert live.seconds(other) == 0.2  # one cell does not speak for its adapter's other families …
    live.learn(replace(small, size="n100"), 30.0)  # … nor does one family's every size …
    live.learn(refused, 0.001, ran=False)  # … nor a cell refused in a millisecond …
    assert live.seconds(other) == 0.2
    for c, wall in zip(cpu_more, (0.2, 0.1)):  # … three families that ran do: the median of 30, 2 and 1
        live.learn(c, wall)
    assert live.seconds(other) == pytest.approx(0.4)  # no value cell run yet: the adapter's ratio on the CPU
    assert live.seconds(gpu) == 0.2 and live.seconds(measured) == 5.0
    for c in gpu_more:  # a tenth of the model on the GPU leaves the CPU's corrections alone
        live.learn(c, 0.02)
    assert live.seconds(gpu) == pytest.approx(0.02)
    assert live.seconds(other) == pytest.approx(0.4)


def test_a_history_is_corrected_by_its_familys_cell_run_again():
    """A family measured before (history) is re-estimated from its smaller size's wall time now against its
    history; another measured family, and the adapter's modelled cells, keep theirs."""
    small, large, other = _cell("grad", "n10"), _cell("grad", "n100"), _cell("value", "n10")
    modelled = _cell("jvp", "n10")
    est = Estimate({small.key: 60.0, large.key: 60.0, other.key: 60.0, modelled.key: 1.0}, {},
                   frozenset({small.key, large.key, other.key}))
    live = LiveEstimate(est)
    live.learn(small, 6.0)  # a timeout's 60 s lower bound before; 6 s now
    assert live.seconds(large) == pytest.approx(6.0)
    assert live.seconds(other) == 60.0 and live.seconds(modelled) == 1.0


def test_cost_rounds_run_cheap_cells_first_and_a_family_smallest_size_first():
    """Rounds by estimated cost (COST_ROUNDS), cheapest first within a round: a cheap large size runs before
    an expensive small size of another family, but never before its own family's smaller size; a cell's sides in
    two --env environments (timed together) share the dearer side's round."""
    grad10, grad100, value10, value100, value1000 = (
        _cell("grad", "n10"), _cell("grad", "n100"), _cell("value", "n10"), _cell("value", "n100"),
        _cell("value", "n1000"))
    cells = [grad10, grad100, value10, value100, value1000]
    seconds = {grad10.key: 60.0, grad100.key: 1.0, value10.key: 0.1, value100.key: 0.3, value1000.key: 3.0}
    rounds = cost_rounds(cells, lambda c: seconds[c.key])
    assert len(rounds) == len(COST_ROUNDS) + 1
    assert [[c.key for c in r] for r in rounds if r] == [
        [value10.key, value100.key], [value1000.key], [grad10.key, grad100.key]]  # grad100 waits for grad10
    old, new = replace(value10, environment="old"), replace(value10, environment="new")
    sides = cost_rounds([old, new], lambda c: 0.4 if c is old else 0.6)
    assert [[c.key for c in r] for r in sides if r] == [[old.key, new.key]]
    assert sides[1] == [old, new]


def test_a_budgeted_run_learns_from_its_cells_and_starts_none_that_would_end_past_the_deadline(registry):
    """A real autograd run whose estimate is far too low (the model off as a CPU-fitted prior is off on a GPU):
    the smallest size of each family runs first (in rounds across families), its measured wall time corrects
    the larger sizes' estimates, and those no longer fit the budget: recorded resumable `skipped` with the
    corrected estimate, instead of run to the deadline. No wall-clock assertion: the model is 10,000× low, the
    budget 120 s (a safety net far above the cells' fraction of a second)."""
    cells = [_cell("grad", "n10"), _cell("grad", "n100"), _cell("value", "n10"), _cell("value", "n100")]
    est = Estimate({c.key: (1e-5 if c.size == "n10" else 0.05) for c in cells}, {})  # n100: 5,000× n10's model
    order: list[str] = []

    class Order(RunObserver):
        def on_progress(self, cell, measurement):
            if cell is not None and measurement is None:
                order.append(cell.key)

    options = RunOptions(timeout=120, threads=1, deadline=time.monotonic() + 120, budget="2m", estimate=est)
    out = {m.cell.key: m for m in runner.run(registry, Plan(tuple(cells), ()), options, observer=Order())}
    assert {order[0], order[1]} == {cells[0].key, cells[2].key}  # every family's smallest size first
    assert all(out[c.key].status is Status.OK for c in cells if c.size == "n10")
    for c in cells[1::2]:
        m = out[c.key]
        assert m.status is Status.SKIPPED and m.details["resumable"], m.message
        assert "corrected by this run's cells" in m.message and "--max-time 2m" in m.message
        assert re.search(r"estimated at \d[\d.]* (s|ms|µs) .*than the \d[\d.]* (s|ms|µs) left", m.message), m.message


def test_a_cell_its_family_shows_dearer_than_its_round_waits_for_a_later_round(registry):
    """A model far too low puts every cell in the first round; once a family's smallest size has run, its larger
    sizes' corrected estimates exceed that round's bound and wait for a later round, so the other worker group's
    smallest sizes run before them (one group no longer runs all its sizes before the next starts). No
    wall-clock assertion: a larger size's corrected estimate is 100 × its smaller size's wall time, which the
    timing policy's 10 ms minimum alone puts at 1 s or more, above the 0.5 s bound."""
    cells = [replace(_cell(op, size), dtype=dtype) for dtype in ("float64", "float32")
             for op in ("grad", "value") for size in ("n10", "n100")]
    est = Estimate({c.key: (1e-7 if c.size == "n10" else 1e-5) for c in cells}, {})  # everything in round 0
    order: list[str] = []

    class Order(RunObserver):
        def on_progress(self, cell, measurement):
            if cell is not None and measurement is None:
                order.append(cell.key)

    quick = TimingPolicy(min_time=0.01, max_time=0.05, warmup_time=0.0, min_samples=1)
    options = RunOptions(timeout=120, threads=1, deadline=time.monotonic() + 600, budget="10m", estimate=est,
                         policy=quick)
    out = {m.cell.key: m for m in runner.run(registry, Plan(tuple(cells), ()), options, observer=Order())}
    assert all(m.status is Status.OK for m in out.values()), [m.message for m in out.values()]
    assert sorted(order) == sorted(c.key for c in cells)  # each cell ran once
    assert {k.split("/")[1] for k in order[:4]} == {"n10"}, order  # both groups' smallest sizes first


def test_after_a_timeout_only_the_sizes_its_model_prices_as_high_are_skipped():
    """A size that timed out (or reached its timeout) skips its family's later sizes that cost at least as much by
    the model; a cheaper one still runs. ADBench's GMM lists d64-K10 before d2-K100: JAX's eager gradient reached
    its 60 s timeout at d64-K10-n1000 (its first call, 50 s) and all 43 later sizes were skipped, d2-K100 among
    them (d2-K50 had taken 3 s)."""
    stopped, cheaper, dearer = _cell("grad", "n100"), _cell("grad", "n10"), _cell("grad", "n1000")
    est = Estimate({}, {}, modelled={stopped.key: 10.0, cheaper.key: 1.0, dearer.key: 20.0})
    timed_out = {stopped.family: runner.TimedOut(stopped, "n100 reached its timeout (1 call measured)")}
    options = RunOptions(timeout=60, estimate=est)
    assert runner._left_out(cheaper, timed_out, options) is None  # runs
    skipped = runner._left_out(dearer, timed_out, options)
    assert skipped.status is Status.SKIPPED and "the smaller size n100 reached its timeout" in skipped.message
    assert runner._left_out(cheaper, timed_out, RunOptions(timeout=60)).status is Status.SKIPPED  # no model: as before


def test_every_cell_is_modelled_history_or_not(registry):
    """The model's price of each cell, kept beside the estimate that history may replace: what the skip after a
    timeout compares."""
    cells = [Cell("exp_dot_loss", size, "grad", "autograd", "eager", "cpu", "float64") for size in ("n10", "n1000")]
    est = estimate(registry, cells, History("m", {cells[0].key: 99.0}))
    assert est.cells[cells[0].key] == 99.0 and set(est.modelled) == {c.key for c in cells}
    assert 0 < est.modelled[cells[0].key] <= est.modelled[cells[1].key]
