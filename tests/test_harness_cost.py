"""The harness's own cost (analysis/harness_cost.py) against a recount by hand of the records' fields."""
from __future__ import annotations

from dataclasses import replace

import pytest

from adcompare.analysis.harness_cost import harness_cost
from adcompare.model.cell import Cell
from adcompare.model.measurement import CELL_TIMEOUT, UNFINISHED_CALL, Measurement, Timing
from adcompare.model.status import Status


def _cell(size: str, adapter: str = "jax", **details) -> Measurement:
    cell = Cell("exp_dot_loss", size, "grad", adapter, "eager", "cpu", "float64")
    timing = Timing((0.01,) * 5, 1, 0.2, call_seconds=0.5)
    return Measurement(cell, Status.OK, timing=timing, machine="m", details={
        "wall_seconds": 3.0, "prepare_seconds": 0.3,
        "overhead_seconds": {"inputs": 0.1, "reference": 1.2, "check": 0.4, "timing_loop": 0.05}, **details})


def test_a_worker_start_is_shared_by_its_cells_and_the_rest_is_what_the_stages_do_not_name():
    first, second = _cell("n10", worker_start_seconds=2.0), _cell("n100")
    other = _cell("n10", adapter="torch")  # another worker: no share of jax's start-up
    cost = harness_cost([first, second, other, Measurement(first.cell, Status.UNSUPPORTED, "no")])
    assert len(cost.cells) == 3
    by = {(c.measurement.cell.adapter, c.measurement.cell.size): c for c in cost.cells}
    jax = by[("jax", "n10")]
    own = 3.0 - (0.3 + 0.2 + 0.5)  # wall less prepare, the first call and the timed calls
    assert jax.stages["worker_start"] == 1.0 and by[("torch", "n10")].stages["worker_start"] == 0.0
    assert jax.own == pytest.approx(own + 1.0) and jax.wall == pytest.approx(4.0)
    assert jax.stages["other"] == pytest.approx(own - (0.1 + 1.2 + 0.4 + 0.05))
    assert sum(jax.stages.values()) == pytest.approx(jax.own)
    assert cost.own == pytest.approx(3 * own + 2.0) and cost.wall == pytest.approx(3 * 3.0 + 2.0)
    assert all(c.over_goal for c in cost.cells)  # 2 s of 3 s: over max(10 %, 1 s)
    assert cost.worst(1)[0].measurement.cell.adapter == "jax"  # the most harness seconds first


def test_a_cell_over_the_goal_only_through_its_share_of_a_start_up_is_over_only_with_it():
    """20 s of wall, 0.5 s of its own harness and a 2 s worker start-up to itself: 2.5 s of 22 s is over 10 %,
    0.5 s of 20 s is not; a cell over without the start-up is over with it too."""
    (alone,) = harness_cost([_cell("n10", wall_seconds=20.0, worker_start_seconds=2.0, prepare_seconds=18.8,
                                   overhead_seconds={"check": 0.5})]).cells
    assert alone.own == pytest.approx(2.5) and alone.wall == pytest.approx(22.0)
    assert alone.over_goal and not alone.over_goal_without_start
    (over,) = harness_cost([_cell("n10", worker_start_seconds=2.0)]).cells  # 2 s of its 3 s are the harness's
    assert over.over_goal and over.over_goal_without_start


def test_records_without_the_split_are_left_out():
    old = Measurement(Cell("exp_dot_loss", "n10", "grad", "jax", "eager", "cpu", "float64"), Status.OK,
                      details={"wall_seconds": 1.0})
    assert not harness_cost([old])


def test_the_report_method_section_gives_the_total_and_the_worst_cells(tmp_path):
    from adcompare.report import build
    from adcompare.store.results import Results

    ms = (_cell("n10", worker_start_seconds=2.0), _cell("n100"))
    page = " ".join(build(Results((), ms), tmp_path).read_text(encoding="utf-8").split())
    assert "<b>Harness cost.</b>" in page and "the 2 cells that recorded it spent 6 s of their 8 s (75 %)" in page
    assert "missed by 2. Worst: exp_dot_loss-n10-grad-jax-eager-float64 3 s of 4 s;" in page


def test_the_release_of_what_prepare_started_is_the_frameworks_like_prepare():
    """torch's data-parallel cells stop their gloo helper processes after the timing (`release_seconds`): the
    mirror of their start in prepare, so the framework's seconds, not the harness's."""
    plain, released = _cell("n10"), _cell("n10", release_seconds=1.5, wall_seconds=4.5)
    (a,), (b,) = harness_cost([plain]).cells, harness_cost([released]).cells
    assert b.own == pytest.approx(a.own) == pytest.approx(4.5 - (0.3 + 0.2 + 0.5 + 1.5))
    assert b.stages == pytest.approx(a.stages) and b.wall == pytest.approx(a.wall + 1.5)


def test_a_reference_differenced_once_is_shared_by_the_cells_that_use_it():
    """A size's jacfwd and jacrev share one float64 Jacobian, differenced by the first cell that needs it and read
    back by the next (verify/shared_references.py): each is charged half, and the totals stay what was spent."""
    def cell(operator: str, adapter: str, reference: float) -> Measurement:
        m = _cell("n10", adapter)
        return replace(m, cell=replace(m.cell, operator=operator),
                       details={**m.details, "overhead_seconds": {**m.details["overhead_seconds"],
                                                                  "reference": reference}})

    first, reader = cell("jacfwd", "jax", 2.0), cell("jacrev", "torch", 0.2)
    alone = cell("hessian", "torch", 0.4)  # another reference
    cost = harness_cost([first, reader, alone])
    by = {c.measurement.cell.operator: c for c in cost.cells}
    assert by["jacfwd"].stages["reference"] == by["jacrev"].stages["reference"] == pytest.approx(1.1)
    assert by["hessian"].stages["reference"] == pytest.approx(0.4)
    assert by["jacfwd"].wall == pytest.approx(3.0 - 0.9) and by["jacrev"].wall == pytest.approx(3.0 + 0.9)
    (as_spent_first,), (as_spent_reader,) = harness_cost([first]).cells, harness_cost([reader]).cells
    assert by["jacfwd"].own == pytest.approx(as_spent_first.own - 0.9)
    assert by["jacrev"].own == pytest.approx(as_spent_reader.own + 0.9)
    spent = harness_cost([first]).own + harness_cost([reader]).own + harness_cost([alone]).own
    assert cost.own == pytest.approx(spent) and cost.wall == pytest.approx(3 * 3.0)


def test_a_sizes_inputs_built_once_by_a_worker_are_shared_by_its_cells_at_that_size():
    """A worker builds a size's inputs for its first cell there and hands the same arrays to its next ones
    (cell_inputs' `reuse`: BA's are seconds to build): each is charged its part, and the totals stay what was spent;
    another worker builds its own, another size is another set."""
    def cell(operator: str, inputs: float, adapter: str = "jax", size: str = "n10") -> Measurement:
        m = _cell(size, adapter)
        return replace(m, cell=replace(m.cell, operator=operator),
                       details={**m.details, "wall_seconds": 4.0,  # own 3 s: room for every stage
                                  "overhead_seconds": {**m.details["overhead_seconds"], "inputs": inputs}})

    built, reused, later = cell("grad", 0.9), cell("value", 0.0), cell("hvp", 0.0)
    elsewhere, bigger = cell("grad", 0.6, adapter="torch"), cell("grad", 0.5, size="n100")
    cost = harness_cost([built, reused, later, elsewhere, bigger])
    by = {(c.measurement.cell.adapter, c.measurement.cell.size, c.measurement.cell.operator): c for c in cost.cells}
    assert [by[("jax", "n10", op)].stages["inputs"] for op in ("grad", "value", "hvp")] == pytest.approx([0.3] * 3)
    assert by[("jax", "n10", "grad")].wall == pytest.approx(4.0 - 0.6)
    assert by[("jax", "n10", "value")].wall == pytest.approx(4.0 + 0.3)
    assert by[("torch", "n10", "grad")].stages["inputs"] == pytest.approx(0.6)
    assert by[("jax", "n100", "grad")].stages["inputs"] == pytest.approx(0.5)
    alone = sum(harness_cost([m]).own for m in (built, reused, later, elsewhere, bigger))
    assert cost.own == pytest.approx(alone) and cost.wall == pytest.approx(5 * 4.0)
    assert all(sum(c.stages.values()) == pytest.approx(c.own) for c in cost.cells)


def test_the_call_a_cell_timeout_stopped_is_the_frameworks():
    """A slow cell its timeout stopped keeps its finished calls; the call it was stopped in ran the framework, not
    the harness (details[UNFINISHED_CALL]). An older record without it: the rest its stages do not name is that
    call's, wholly (an LSTM cell of 60 s showed 22 s of harness "other", the 22 s its third call had run)."""
    stopped = replace(Timing((5.0,), 1, 5.0, call_seconds=5.0), stopped=CELL_TIMEOUT)
    split = {"inputs": 0.1, "reference": 0.2, "check": 0.1}
    fresh = Measurement(_cell("n10").cell, Status.OK, timing=stopped, machine="m", details={
        "wall_seconds": 20.0, "prepare_seconds": 0.5, "overhead_seconds": split, UNFINISHED_CALL: 9.0})
    older = replace(fresh, details={k: v for k, v in fresh.details.items() if k != UNFINISHED_CALL})
    (new,), (old,) = harness_cost([fresh]).cells, harness_cost([older]).cells
    assert new.own == pytest.approx(20.0 - (0.5 + 5.0 + 5.0 + 9.0)) and new.stages["other"] == pytest.approx(0.1)
    assert old.own == pytest.approx(0.4) and old.stages["other"] == 0.0 and not old.over_goal


def test_the_call_a_timeout_stopped_after_the_checked_first_call_is_the_frameworks():
    """A compiled cell stopped before any timed call finished is a `timeout` that keeps its stages: the call it
    was stopped in (lower_bound_seconds) ran the framework, like UNFINISHED_CALL after timed calls."""
    cell = _cell("n10").cell
    split = {"inputs": 0.1, "reference": 0.2, "check": 0.1}
    stopped = Measurement(cell, Status.TIMEOUT, "no timed call finished", machine="m", details={
        "wall_seconds": 60.0, "prepare_seconds": 0.5, "first_call_seconds": 1.0, "overhead_seconds": split,
        "lower_bound_seconds": 58.1})
    (c,) = harness_cost([stopped]).cells
    assert c.own == pytest.approx(60.0 - (0.5 + 1.0 + 58.1)) and c.stages["other"] == 0.0 and not c.over_goal
