"""Known framework limitations as data: (adapter, problem, operator, variant) → (status, reason); '*' matches all.

A cell that fails as expected is still recorded as `failed` with the framework's message; `adcompare check` and
`adcompare run` do not count it against their exit code, and the check matrix labels it. The test suite holds
the table strictly: a listed cell that starts passing fails its test, so entries go when frameworks improve.
Compiled variants of problems declaring `compilable=False` are expected to fail by rule, not listed here.
"""
from __future__ import annotations

from .cell import Cell
from .measurement import Measurement
from .operators import OPERATORS
from .status import Status

DERIVATIVES = [op for op in OPERATORS if op != "value"]  # `value` traces nothing, so it runs

EXPECTED: dict[tuple[str, str, str, str], tuple[Status, str]] = {
    **{("autograd", "control_loop", op, "*"): (
        Status.FAILED, "autograd's ArrayBox has no int(): seed 001's loop count read from the differentiated input "
                       "cannot be traced (JAX and torch eager trace it with concrete values)") for op in DERIVATIVES},
    ("tensorflow", "control_loop", "jacfwd", "*"): (
        Status.FAILED, "tf.vectorized_map traces f as a graph, where int(max(z)) has no value"),
}


def expected(cell: Cell, compilable: bool) -> tuple[Status, str] | None:
    if not compilable and not cell.variant.startswith("eager"):
        return Status.FAILED, "data-dependent Python control flow cannot be compiled"
    for (adapter, problem, operator, variant), outcome in EXPECTED.items():
        if all(want in ("*", got) for want, got in ((adapter, cell.adapter), (problem, cell.problem),
                                                   (operator, cell.operator), (variant, cell.variant))):
            return outcome
    return None


def expected_failure(m: Measurement, problems) -> str | None:
    """The reason `m` failed as expected, or None (also None when it did not fail the expected way)."""
    problem = problems.get(m.cell.problem)
    known = expected(m.cell, problem.compilable) if problem is not None else None
    return known[1] if known is not None and m.status is known[0] else None
