"""Input and output dimension of a cell's derivative, for the forward-vs-reverse plot.

Forward mode costs about one pass per input, reverse mode one per output, so the crossover is read against
inputs ÷ outputs. The results file does not store shapes, so they come from (first match wins):
1. `details["wrt_size"]` and `details["out_size"]` when the worker recorded them;
2. the problem itself, when it is installed here: the size of `wrt` and of f(wrt) evaluated through NumPy
   (per example for the vmap_* operators), as the checker does;
3. nothing: the cell is left out of that plot and the page says which problems were.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from adcompare.model.measurement import Measurement
from adcompare.model.operators import OPERATORS
from adcompare.model.problem import example_output_shape, output_shape
from adcompare.plugin import registry as plugins
from adcompare.plugin.registry import Registry


@dataclass
class Dimensions:
    """Caches per (problem, size, per-example?) because evaluating a problem is not free at large sizes."""

    _cache: dict[tuple[str, str, bool], tuple[int, int] | None] = field(default_factory=dict)
    _registry: Registry | None = None
    unknown: set[str] = field(default_factory=set)

    def of(self, m: Measurement) -> tuple[int, int] | None:
        wrt_size, out_size = m.details.get("wrt_size"), m.details.get("out_size")
        if isinstance(wrt_size, int) and wrt_size > 0 and isinstance(out_size, int) and out_size > 0:
            return wrt_size, out_size
        spec = OPERATORS.get(m.cell.operator)
        per_example = bool(spec and spec.per_example)
        key = (m.cell.problem, m.cell.size, per_example)
        if key not in self._cache:
            self._cache[key] = self._from_problem(*key)
            if self._cache[key] is None:
                self.unknown.add(m.cell.problem)
        return self._cache[key]

    def _from_problem(self, name: str, label: str, per_example: bool) -> tuple[int, int] | None:
        try:
            if self._registry is None:
                self._registry = plugins.load()
            problem = self._registry.problems.get(name)
            if problem is None:
                return None
            size = problem.size(label)
            wrt = problem.inputs(size, "float64")[problem.wrt]
            out = example_output_shape(problem, size) if per_example else output_shape(problem, size)
        except Exception:  # a problem changed since the run (size gone, plugin broken): no dimensions, not a crash
            return None
        return int(wrt.size), int(math.prod(out))
