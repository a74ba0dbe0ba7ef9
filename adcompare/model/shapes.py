"""A problem's array shapes at one size: what the planner and the memory pre-flight need, without the arrays.

Planning the full suite asks for the shapes of every (problem, size) once, not once per cell. A problem may declare
them from its dimensions (`@<problem>.shapes`, arithmetic only, nothing materialised); otherwise they are found by
evaluating the problem through NumPy at float64 — fine for small sizes, which is why the large built-in problems
declare theirs. `tests/test_problems.py` checks every declaration against an evaluation at the smallest sizes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # for annotations only: problem.py imports this module
    from adcompare.model.problem import Problem, Size


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


_CACHE: dict[tuple, Shapes] = {}


def shapes_of(problem: "Problem", size: "Size") -> Shapes:
    """The problem's shapes at `size`: declared, or evaluated through NumPy once per (problem, size)."""
    key = (problem.function, problem.generator, problem.shape_function, size)
    if key not in _CACHE:
        if problem.shape_function is not None:
            _CACHE[key] = _normalise(problem.shape_function(**size.as_dict()))
        else:
            _CACHE[key] = evaluated_shapes(problem, size)
    return _CACHE[key]


def evaluated_shapes(problem: "Problem", size: "Size") -> Shapes:
    """Shapes found by generating the inputs and evaluating the function through NumPy (materialises them)."""
    inputs = problem.inputs(size, "float64")
    w = inputs.pop(problem.wrt)
    out = tuple(np.shape(problem.bind(np, inputs)(w)))
    if problem.batch is None:
        return Shapes(tuple(np.shape(w)), out)
    batch = inputs.pop(problem.batch)
    example = tuple(np.shape(problem.bind(np, inputs)(w, batch[0])))
    return Shapes(tuple(np.shape(w)), out, int(np.shape(batch)[0]), example)


def without_hints(s: Shapes) -> Shapes:
    """The shapes alone (what an evaluation can confirm), hints dropped."""
    return Shapes(s.wrt, s.output, s.batch, s.example_output)


def _normalise(s: Shapes) -> Shapes:
    ex = None if s.example_output is None else tuple(int(v) for v in s.example_output)
    whole = lambda v: None if v is None else int(v)  # noqa: E731
    return Shapes(tuple(int(v) for v in s.wrt), tuple(int(v) for v in s.output), whole(s.batch), ex,
                  whole(s.flops), whole(s.operations))
