"""Expected failures as data: (adapter, problem, operator, variant) → (status, reason). '*' matches anything.

Strict: a listed cell that starts passing fails its test, so the entry is removed when a framework fixes it.
Compiled variants of problems declaring `compilable=False` are expected to fail by rule, not listed here.
"""
from __future__ import annotations

from adcompare.cell import Cell
from adcompare.operators import OPERATORS
from adcompare.status import Status

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
