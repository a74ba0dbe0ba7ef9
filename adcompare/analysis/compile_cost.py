"""What compiling costs and when it pays off, with one rule for every framework.

A compiled cell is paired with its eager twin: the same cell in the eager variant its adapter declares it compiles
(`Measurement.compiles`: torch.compile compiles the torch.func code of `eager`, not `eager-autograd`), on the
same machine and in the same environment (`Measurement.twin_key`).

Break-even counts whole calls, with the compile charged wherever it was paid. Before the steady state a variant
pays its first call and, where the compile ran ahead of time in prepare (jax.jit(...).lower().compile(),
TensorFlow's trace), that compile too; a lazy compiler (torch.compile) pays it inside the first call
(`Timing.up_front`). N calls then cost up-front + (N−1)·t, t the steady-state median, and compiling pays off from
the smallest whole N with compiled ≤ eager: N = 1 + ⌈(up-front compiled − up-front eager) ÷ (t eager − t compiled)⌉
(1 when compiling costs nothing up front; never when the compiled steady state is not faster). TensorFlow's
ahead-of-time compile includes one execution, so its up-front cost holds one steady-state call more than it
must, well inside the compile's own noise. The compile time shown beside it is the adapter's (ahead of time) or
first call minus steady state.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from adcompare.analysis import sizes
from adcompare.analysis.summary import operator_order, timed
from adcompare.model.measurement import Measurement

FORMULA = ("N = 1 + ⌈(compile paid ahead of time + first call, compiled − first call, eager) ÷ (eager median − "
           "compiled median)⌉ whole calls, against the eager variant the compiled one compiles: the compile is "
           "charged wherever it was paid, ahead of time (JAX, TensorFlow) or inside the first call (torch.compile)")


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
        return self.compiled.measured.compile_method or "first call minus steady state"

    @property
    def speedup(self) -> float | None:
        return self.eager.measured.median / self.compiled.measured.median if self.eager else None

    @property
    def break_even(self) -> float | None:
        """Whole calls after which compiling has paid off (compile included); inf when never, None without an
        eager twin."""
        if self.eager is None:
            return None
        c, e = self.compiled.measured, self.eager.measured
        gap = c.up_front - e.up_front
        if gap <= 0:
            return 1.0
        if c.median >= e.median:
            return math.inf
        return 1.0 + math.ceil(gap / (e.median - c.median))


def costs(measurements: Iterable[Measurement]) -> list[CompileCost]:
    """Every timed compiled cell paired with its timed eager twin (see the module's doc)."""
    measurements = [m for m in measurements if timed(m)]
    eager = {m.merge_key: m for m in measurements if not m.compiled}
    out = [CompileCost(m, eager.get(m.twin_key(variant=m.compiles or ""))) for m in measurements if m.compiled]
    out.sort(key=lambda k: (k.compiled.cell.problem, operator_order(k.compiled.cell.operator),
                            sizes.sort_key(k.compiled.cell.size), k.compiled.cell.adapter, k.compiled.cell.variant,
                            k.compiled.cell.device, k.compiled.cell.dtype, k.compiled.cell.environment,
                            k.compiled.machine))
    return out


def at_largest_size(items: list[CompileCost]) -> list[CompileCost]:
    """One row per series (`Measurement.family`): the largest size (items come sorted by size)."""
    last: dict[tuple[str, ...], CompileCost] = {}
    for k in items:
        last[k.compiled.family] = k
    return list(last.values())
