"""Every available adapter × the quick suite's cells × variant × both dtypes, through real workers.

Each cell must agree with the float64 reference and, pairwise, with every other adapter that ran it; unsupported
cells must say why. Known framework limitations are data in adcompare/expectations.py, checked strictly.
"""
from __future__ import annotations

import pytest

from adcompare import plugins, runner
from adcompare.status import Status
from adcompare.expectations import unexpected

REGISTRY = plugins.load()
PLAN = runner.plan(REGISTRY, runner.Selection(suite="quick", dtypes=("float32", "float64")))
CELLS = list(PLAN.cells) + [m.cell for m in PLAN.decided]
QUICK = {"min_time": 0.005, "max_time": 0.05, "warmup_time": 0.0, "min_samples": 3, "block_time": 0.001}


@pytest.fixture(scope="session")
def matrix():
    out = runner.run(REGISTRY, PLAN, runner.RunOptions(timeout=240, threads=2, policy=QUICK))
    return {m.cell.key: m for m in out}


@pytest.mark.parametrize("cell", CELLS, ids=[c.id for c in CELLS])
def test_cell_agrees_or_says_why_not(cell, matrix):
    m = matrix[cell.key]
    assert (why := unexpected(m, REGISTRY.problems)) is None, why
    if m.status is not Status.OK:
        return
    c = m.check
    assert c.output_dtype == cell.dtype, f"{cell.id}: dtype drift to {c.output_dtype}"
    assert m.timing is not None and m.timing.median > 0 and m.algorithm


def test_required_frameworks_are_present():
    """ADCOMPARE_REQUIRE (set by CI) turns a missing framework into a failure instead of silently fewer cells."""
    required = runner.required_frameworks()
    planned = {c.adapter for c in CELLS}
    assert set(required) <= planned, f"required {required}, planned {sorted(planned)}"
