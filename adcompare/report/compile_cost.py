"""What compiling costs and when it pays off.

Break-even counts whole calls, first calls included, against the eager variant of the same cell: N calls cost
first_c + (N−1)·t_c compiled and first_e + (N−1)·t_e eager (t = steady-state median), so compiling pays off from
N = 1 + (first_c − first_e) ÷ (t_e − t_c) calls on, and never when the compiled steady state is not faster. Using
the measured first calls (rather than the compile time alone) charges tracing and the eager variant's own warm-up
fairly; the compile time shown beside it is the adapter's (ahead of time) or first call minus steady state.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ..measurement import Measurement
from . import sizes
from .summary import operator_order, timed

FORMULA = "N = 1 + (first call compiled − first call eager) ÷ (eager median − compiled median)"


def is_eager(variant: str) -> bool:
    return variant == "eager" or variant.startswith("eager")


def compile_seconds(m: Measurement) -> float | None:
    t = m.timing
    if t is None:
        return None
    if t.compile is not None:
        return t.compile
    return max(t.first_call - t.median, 0.0)


@dataclass(frozen=True)
class CompileCost:
    compiled: Measurement
    eager: Measurement | None

    @property
    def compile(self) -> float | None:
        return compile_seconds(self.compiled)

    @property
    def method(self) -> str:
        return self.compiled.timing.compile_method or "first call minus steady state"

    @property
    def speedup(self) -> float | None:
        return self.eager.timing.median / self.compiled.timing.median if self.eager else None

    @property
    def break_even(self) -> float | None:
        """Calls after which compiling has paid off; inf when never, None without an eager twin."""
        if self.eager is None:
            return None
        c, e = self.compiled.timing, self.eager.timing
        if c.median >= e.median:
            return math.inf
        return max(1.0, 1.0 + (c.first_call - e.first_call) / (e.median - c.median))


def costs(measurements: Iterable[Measurement]) -> list[CompileCost]:
    """Every timed compiled cell paired with its timed eager twin (same adapter, problem, size, …)."""
    measurements = [m for m in measurements if timed(m)]
    eager = {(m.cell.problem, m.cell.size, m.cell.operator, m.cell.adapter, m.cell.device, m.cell.dtype, m.machine): m
             for m in measurements if is_eager(m.cell.variant)}
    out = []
    for m in measurements:
        c = m.cell
        if is_eager(c.variant):
            continue
        out.append(CompileCost(m, eager.get((c.problem, c.size, c.operator, c.adapter, c.device, c.dtype, m.machine))))
    out.sort(key=lambda k: (k.compiled.cell.problem, operator_order(k.compiled.cell.operator),
                            sizes.sort_key(k.compiled.cell.size), k.compiled.cell.adapter, k.compiled.cell.variant,
                            k.compiled.cell.device, k.compiled.cell.dtype))
    return out


def at_largest_size(items: list[CompileCost]) -> list[CompileCost]:
    """One row per problem/operator/adapter/variant/device/dtype: the largest size (items come sorted by size)."""
    last: dict[tuple, CompileCost] = {}
    for k in items:
        c = k.compiled.cell
        last[(c.problem, c.operator, c.adapter, c.variant, c.device, c.dtype)] = k
    return list(last.values())
