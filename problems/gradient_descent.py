"""GradBench's gradient-descent solver (tools/futhark/solver.fut, `multivariate_argmin`), shared by `saddle` and
`particle`: the problems call it with `adcompare.grad` as the gradient, their float64 references with closed
forms. An argmax is the argmin of −f with the gradient of −f, as solver.fut's multivariate_argmax writes it.

    start at x with step η = 1e-5, i = 0; repeat:
      stop when |∇f(x)| ≤ 1e-5;
      after 10 accepted steps in a row, double η (i ← 0);
      x′ = x − η·∇f(x); stop when |x − x′| ≤ 1e-5;
      accept x′ if f(x′) < f(x) (i ← i + 1), else halve η (i ← 0).

Every test reads a value of the iterate, so the loop is data-dependent Python control flow: it runs op by op and
no tracing compiler (jax.jit, tf.function, torch.compile with fullgraph) can stage it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

STOP = 1e-5  # solver.fut: the gradient's magnitude and the step's length below which it stops
FIRST_STEP = 1e-5  # solver.fut's initial η
GROW_AFTER = 10  # accepted steps in a row after which η doubles


def argmin(f: Callable[[Any], Any], gradient: Callable[[Any], Any], x: Any, *, xp: Any) -> Any:
    """The point where gradient descent from `x` on `f` stops (solver.fut's multivariate_argmin)."""
    fx, gx, eta, accepted = f(x), gradient(x), FIRST_STEP, 0
    while True:
        if xp.sqrt(xp.sum(gx * gx)) <= STOP:
            return x
        if accepted == GROW_AFTER:
            eta, accepted = 2 * eta, 0
            continue
        x_new = x - eta * gx
        step = x - x_new
        if xp.sqrt(xp.sum(step * step)) <= STOP:
            return x
        f_new = f(x_new)
        if f_new < fx:
            x, fx, gx, accepted = x_new, f_new, gradient(x_new), accepted + 1
        else:
            eta, accepted = eta / 2, 0

