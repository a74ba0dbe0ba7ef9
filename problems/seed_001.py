"""Seed 001 (DeHaven & Bordelon, "Automatic Differentiation with JAX"): the R²→R³ example and a scalar loss."""
from __future__ import annotations

import math

from adcompare import problem


@problem(sizes=[2], wrt="x", tags=("tall", "small"), complex_step_safe=True)
def f_r2_r3(x, /, *, xp):
    """f(x) = [sin(x₀/x₁) + x₁², x₀² − x₁², x₀³]: R² → R³.

    At x = [1, 0.5] its Jacobian is [[-0.8322937, 2.6645875], [2, -1], [3, 0]] (seed 001).
    Written with `stack` of scalars, since list-to-array construction is not in the Array API.
    """
    x0, x1 = x[0], x[1]
    return xp.stack([xp.sin(x0 / x1) + x1**2, x0**2 - x1**2, x0**3])


@f_r2_r3.inputs
def _(rng, n):
    return {"x": rng.uniform(0.5, 1.5, size=n)}


@problem(sizes=[10, 100, 1_000, 10_000], wrt="x", tags=("scalar-output", "wide"), complex_step_safe=True)
def exp_dot_loss(x, /, *, x_star, xp):
    """loss(x) = sin(exp(x*·x / √n)): Rⁿ → R (seed 001's forward-vs-reverse example, n up to 10,000).

    Reverse mode needs one sweep, forward mode n: the seed's jacrev is ~100× faster than jacfwd at n = 10,000.
    """
    return xp.sin(xp.exp(xp.vecdot(x_star, x) / math.sqrt(x.shape[-1])))


@exp_dot_loss.inputs
def _(rng, n):
    return {"x": rng.standard_normal(n), "x_star": rng.standard_normal(n)}
