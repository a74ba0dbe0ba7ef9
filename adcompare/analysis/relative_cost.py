"""J/O: a derivative's steady-state time divided by the function's own (the `value` operator), as ADBench plots it.

Both come from the same cell but for the operator (`Measurement.twin_key(operator="value")`: same machine and
environment too). Theory bounds a gradient by a small
constant times the function (the "cheap gradient principle", about 4–5 in practice; Griewank & Walther, ch. 4),
which the page draws as a reference band.
"""
from __future__ import annotations

from collections.abc import Iterable

from adcompare.analysis.summary import timed
from adcompare.model.measurement import Measurement

CHEAP_GRADIENT_BAND = (4.0, 5.0)
BOUNDED_OPERATORS = ("grad", "vjp", "vmap_grad")  # reverse-mode scalar/co-vector products: the bound applies
PLOTTED_OPERATORS = ("grad", "vjp", "jvp", "hvp", "vmap_grad")  # Jacobians and Hessians grow with dimension


RelativeCosts = dict[tuple[str, str], float]  # Measurement.merge_key → J/O, as `ratios` gives them


def ratios(measurements: Iterable[Measurement]) -> RelativeCosts:
    """(machine, cell key) → J/O for every timed derivative whose value twin was timed too."""
    measurements = [m for m in measurements if timed(m)]
    value = {m.merge_key: m.measured.median for m in measurements if m.cell.operator == "value"}
    out: RelativeCosts = {}
    for m in measurements:
        base = value.get(m.twin_key(operator="value"))
        if m.cell.operator != "value" and base:
            out[m.merge_key] = m.measured.median / base
    return out
