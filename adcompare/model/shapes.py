"""A problem's array shapes at one size: what the planner and the memory pre-flight need, without the arrays.

Planning the full suite asks for the shapes of every (problem, size) once, not once per cell. How a problem's shapes
are found (declared, or evaluated through NumPy) is `problem.shapes_of`, beside the Problem it reads.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Shapes:
    """Shapes at one size. `batch` is the leading length of the batch argument (None without one) and
    `example_output` the output for one batch element (None without a batch).

    Two optional hints improve the time estimate (estimate.py) where the shapes alone mislead: `flops`, the
    floating-point operations of one evaluation (GMM's n·K·d² work is invisible in its shapes), and `operations`,
    the array operations one evaluation dispatches, a Python loop counted once per pass (eager frameworks pay
    for each, and compilers compile each: LSTM's 20·l·c)."""

    wrt: tuple[int, ...]
    output: tuple[int, ...]
    batch: int | None = None
    example_output: tuple[int, ...] | None = None
    flops: int | None = None
    operations: int | None = None

    @property
    def n_in(self) -> int:
        return int(math.prod(self.wrt))

    @property
    def n_out(self) -> int:
        return int(math.prod(self.output))

    @property
    def n_example_out(self) -> int:
        return int(math.prod(self.example_output or ()))


def without_hints(s: Shapes) -> Shapes:
    """The shapes alone (what an evaluation can confirm), hints dropped."""
    return Shapes(s.wrt, s.output, s.batch, s.example_output)
