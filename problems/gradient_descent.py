"""GradBench's gradient-descent solver (tools/futhark/solver.fut, `multivariate_argmin`), shared by `saddle` and
`particle`: the problems call it with `adcompare.grad` as the gradient, their float64 references with closed
forms. An argmax is the argmin of −f with the gradient of −f, as solver.fut's multivariate_argmax writes it.

    start at x with step η = 1e-5, i = 0; repeat:
      stop when |∇f(x)| ≤ 1e-5;
      after 10 accepted steps in a row, double η (i ← 0);
      x′ = x − η·∇f(x); stop when |x − x′| ≤ 1e-5;
      accept x′ if f(x′) < f(x) (i ← i + 1), else halve η (i ← 0).

Written with `adcompare.while_loop` and `adcompare.cond`, one trip per pass of solver.fut's loop (the same trips,
the same values): a Python loop op by op (eager variants, the NumPy references), the framework's structured loop
where the namespace is staged (jax.jit, tf.function). Each trip evaluates f(x′) and, where x′ is accepted,
∇f(x′), as solver.fut does; a growing trip evaluates neither. The state is (x, f(x), ∇f(x), η, i, stopped), all
arrays of f's dtype, `stopped` 1 after the |x − x′| ≤ 1e-5 exit; the loop runs while |∇f(x)|·(1 − stopped) > 1e-5.
The tests are comparisons and `where`, no logical operators (not every namespace has them): the same predicates.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import adcompare

STOP = 1e-5  # solver.fut: the gradient's magnitude and the step's length below which it stops
FIRST_STEP = 1e-5  # solver.fut's initial η
GROW_AFTER = 10  # accepted steps in a row after which η doubles
# The bound adcompare.while_loop requires (reaching it is an error, never a truncation): GradBench's inputs take
# 170 trips per descent (saddle, each of its 157 descents) and 92 (particle); a bounded staged loop runs this many
# steps, so it is kept a small multiple of those.
MAX_TRIPS = 1_000


def argmin(f: Callable[[Any], Any], gradient: Callable[[Any], Any], x: Any, *, xp: Any,
           max_trips: int = MAX_TRIPS) -> Any:
    """The point where gradient descent from `x` on `f` stops (solver.fut's multivariate_argmin)."""
    fx = f(x)
    zero = xp.zeros_like(fx)

    def more(state):
        x, fx, gx, eta, accepted, stopped = state
        return xp.sqrt(xp.sum(gx * gx)) * (1 - stopped) > STOP

    def grow(x, fx, gx, eta, accepted, stopped):
        return x, fx, gx, 2 * eta, zero, stopped

    def step(x, fx, gx, eta, accepted, stopped):
        x_new = x - eta * gx
        moved = x - x_new
        short = xp.sqrt(xp.sum(moved * moved)) <= STOP
        f_new = f(x_new)

        def accept(x_new, f_new):
            return x_new, f_new, gradient(x_new), eta, accepted + 1, zero

        def reject(x_new, f_new):
            return x, fx, gx, eta / 2, zero, xp.where(short, zero + 1, zero)

        # accepted where f(x′) < f(x) and the step was not too short (a short step stops: f(x) < f(x) is false)
        return adcompare.cond(xp.where(short, fx, f_new) < fx, accept, reject, x_new, f_new, xp=xp)

    def trip(state):
        return adcompare.cond(state[4] == GROW_AFTER, grow, step, *state, xp=xp)

    state = (x, fx, gradient(x), zero + FIRST_STEP, zero, zero)
    return adcompare.while_loop(more, trip, state, xp=xp, max_trips=max_trips)[0]
