"""Seed 001 (DeHaven & Bordelon, "Automatic Differentiation with JAX"): the R²→R³ example, the forward-vs-reverse
loss, and the control-loop function."""
from __future__ import annotations

import math

import numpy as np

import adcompare
from adcompare import problem


@problem(sizes=[2], wrt="x", tags=("tall", "small"), complex_step_safe=True)
def f_r2_r3(x, /, *, xp):
    """f(x) = [sin(x₀/x₁) + x₁², x₀² − x₁², x₀³]: R² → R³.

    At x = [1, 0.5] (the article's point, used as the input) its Jacobian is
    [[-0.8322937, 2.6645875], [2, -1], [3, 0]] (seed 001).
    Written with `stack` of scalars, since list-to-array construction is not in the Array API.
    """
    x0, x1 = x[0], x[1]
    return xp.stack([xp.sin(x0 / x1) + x1**2, x0**2 - x1**2, x0**3])


@f_r2_r3.inputs
def _(rng, n):
    return {"x": np.array([1.0, 0.5])}


@problem(sizes=[10, 100, 1_000, 10_000], wrt="x", tags=("scalar-output", "wide"), complex_step_safe=True)
def exp_dot_loss(x, /, *, x_star, xp):
    """loss(x) = sin(exp(x*·x / √n)): Rⁿ → R (seed 001's forward-vs-reverse example, n up to 10,000).

    Reverse mode needs one sweep, forward mode n: the seed's jacrev is ~83× faster than jacfwd at n = 10,000.
    """
    return xp.sin(xp.exp(xp.vecdot(x_star, x) / math.sqrt(x.shape[-1])))


@exp_dot_loss.inputs
def _(rng, n):
    return {"x": rng.standard_normal(n), "x_star": rng.standard_normal(n)}


@problem(
    sizes=[10, 100, 1_000, 10_000],
    wrt="z",
    tags=("scalar-output", "wide", "control-flow"),
    compilable=False,
)
def control_loop(z, /, *, xp):
    """f(z) = Σᵢ zᵢ⁽ᵏ⁾ after k steps of z ← sin(z²), with k = ⌊max(z)⌋ read from the data: Rⁿ → R (seed 001).

    Written as the article writes it: `int(max(z))` needs a concrete value, so it runs eagerly (the derivative
    is defined wherever max(z) is not an integer, k being locally constant) and must fail under a tracing
    compiler (jax.jit, tf.function), which `compilable=False` declares. The seeded standard-normal inputs give
    k = 1, 2, 3, 3 at n = 10, 100, 1,000, 10,000 (the article's n = 100 example has k = 2 too).
    See `control_loop_static` for the compilable form with the count fixed, and `control_loop_while` for the same
    data-dependent loop written so that a compiler can stage it.
    """
    for _ in range(int(xp.max(z))):
        z = xp.sin(z**2)
    return xp.sum(z)


@control_loop.inputs
def _(rng, n):
    return {"z": rng.standard_normal(n)}


STATIC_STEPS = 3


@problem(sizes=[10, 100, 1_000, 10_000], wrt="z", tags=("scalar-output", "wide", "control-flow"),
         complex_step_safe=True)
def control_loop_static(z, /, *, xp):
    """f(z) = Σᵢ zᵢ⁽³⁾ after k = 3 steps of z ← sin(z²): Rⁿ → R, `control_loop` with the loop count fixed.

    A Python loop with a static count unrolls under a compiler, so this one compiles; k = 3 is what the data-
    dependent version reads at n ≥ 1,000. Compare it with `control_loop` to see the price of data-dependence.
    """
    for _ in range(STATIC_STEPS):
        z = xp.sin(z**2)
    return xp.sum(z)


@control_loop_static.inputs
def _(rng, n):
    return {"z": rng.standard_normal(n)}


# The bound adcompare.while_loop requires of control_loop_while (reaching it is an error, never a truncation):
# k = ⌊max(z)⌋ is 1–3 on the seeded standard-normal inputs (max 3.9 at n = 10,000; 5 would take n ≈ 3·10⁶), so 8
# holds every generated input with room. JAX's reverse mode runs the bounded form, all 8 trips (the state frozen
# after the k-th): the bound is kept small because that is what a staged reverse-mode loop pays for it.
CONTROL_MAX_TRIPS = 8


@problem(sizes=[10, 100, 1_000, 10_000], wrt="z", tags=("scalar-output", "wide", "control-flow"))
def control_loop_while(z, /, *, xp):
    """`control_loop`, the same function and the same k = ⌊max(z)⌋ trips of z ← sin(z²), with the data-dependent
    loop written as `adcompare.while_loop` (seed 001's twin): what each compiler does once the loop is staged.

    The loop runs while trips + 1 ≤ max(z) — for a whole number of trips, trips < ⌊max(z)⌋, which is
    `range(int(max(z)))`'s count (int truncates toward 0, ⌊·⌋ toward −∞: both give no trip for max(z) < 1) — a
    comparison staged with the loop instead of a Python int read off the data. Eagerly it is a Python loop op by
    op, as `control_loop`; under jax.jit a lax.while_loop (forward mode) or the bounded form of CONTROL_MAX_TRIPS
    steps (reverse mode, which must transpose the loop); under tf.function a tf.while_loop; torch.compile refuses
    it (`unsupported`, with the reason). The derivative is `control_loop`'s wherever max(z) is not a whole number
    (k is then locally constant, and the comparison carries no derivative).
    """
    top = xp.max(z)

    def more(state):
        return state[1] + 1 <= top

    def step(state):
        z, trips = state
        return xp.sin(z**2), trips + 1

    z, _ = adcompare.while_loop(more, step, (z, xp.zeros_like(top)), xp=xp, max_trips=CONTROL_MAX_TRIPS)
    return xp.sum(z)


@control_loop_while.inputs
def _(rng, n):
    return {"z": rng.standard_normal(n)}
