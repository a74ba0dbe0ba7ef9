"""GradBench's `ode` eval: an ODE solved by Runge–Kutta, from cmpad's `an_ode` (evals/ode/README.md)."""
from __future__ import annotations

import numpy as np

from adcompare import Shapes, fold, grid, problem

from .gradbench_draws import replay
from .json_inputs import exact_keys, numbers_and_count, read_json_object

ODE_N = (1_000, 10_000, 100_000)  # run.py's -n default
ODE_S = (1, 10, 100)  # run.py's -s default
# GradBench draws the sizes sorted by n·s (Python's stable sort of [(n, s) for n in N for s in S]).
ODE_ORDER = sorted(((n, s) for n in ODE_N for s in ODE_S), key=lambda v: v[0] * v[1])
FINAL_TIME = 2.0  # ode.hpp's tf


def ode_rhs(x, y, xp):
    """y′ = f(y): f₀ = x₀ and fᵢ = xᵢ·yᵢ₋₁ for i > 0 (ode.hpp's ode_fun), i.e. x ⊙ [1, y₀, …, y_{n−2}]."""
    return x * xp.concat([xp.ones_like(y[:1]), y[:-1]])


def ode_solution(x, steps, xp):
    """y(2) by s steps of classical fourth-order Runge–Kutta from y(0) = 0, h = 2/s, in ode.hpp's order of
    operations; s = steps.shape[0] (steps is a placeholder whose length is the loop count)."""
    h = FINAL_TIME / steps.shape[0]

    def step(carry, _):
        (y,) = carry
        k1 = ode_rhs(x, y, xp)
        k2 = ode_rhs(x, y + h * k1 / 2.0, xp)
        k3 = ode_rhs(x, y + h * k2 / 2.0, xp)
        k4 = ode_rhs(x, y + h * k3, xp)
        return (y + h * (k1 + 2.0 * k2 + 2.0 * k3 + k4) / 6.0,)

    return fold(step, (xp.zeros_like(x),), (steps,), xp=xp)[0]


@problem(sizes=grid(n=ODE_N, s=ODE_S), wrt="x", tags=("classic", "scalar-output", "wide", "control-flow"),
         operators=("value", "grad"), complex_step_safe=True)
def ode(x, /, *, steps, xp):
    """GradBench's ODE solution (evals/ode/README.md; cmpad's an_ode; cpp/gradbench/evals/ode.hpp): Rⁿ → R, the
    last component y_{n−1}(2) of the solution of

        y₀′ = x₀,   yᵢ′ = xᵢ·yᵢ₋₁ (i > 0),   y(0) = 0,

    by s steps of fourth-order Runge–Kutta (h = 2/s). The README writes yᵢ′ = Σⱼ₌₁ⁱ xⱼ yᵢ₋₁; GradBench's code
    (ode.hpp, its manual and jax tools, cmpad) computes xᵢ·yᵢ₋₁, followed here. GradBench's `primal` returns the
    whole y(2) (n values) and its `gradient` is ∇ₓ y_{n−1}(2): this problem's value is the primal's last entry —
    the same work, since y_{n−1} needs every component integrated — and its `grad` is GradBench's gradient
    exactly (`ode_solution` gives the whole vector). The loop over the s steps is `adcompare.fold` (a lax.scan,
    as GradBench's jax tool writes it, or a tf.while_loop under a compiler); `steps` (s,) is a placeholder whose
    length is s. Inputs: GradBench's generator (python/gradbench/gradbench/evals/ode/run.py),
    `np.random.seed(31337)` then `np.random.rand(n)` per size in order of n·s, replayed draw for draw
    (problems/gradbench_draws.py). Sizes: its defaults n ∈ {1,000, 10,000, 100,000} × s ∈ {1, 10, 100}.
    At every default size the value and gradient are exactly 0: after s steps of RK4 only y₀ … y_{4s} are
    non-zero (each stage moves the non-zeros one index on) and n > 4s, so y_{n−1} is 0 for any x — GradBench's eval
    as its code defines it (its golden tool returns the zero gradient too); it still times the whole integration,
    and `ode_solution` is checked against GradBench's whole primal vector (tests/test_gradbench.py).
    GradBench's jax tool (tools/jax/ode.py) never enables float64, so it computes in float32 (its lse and llsq
    tools do enable it); tests/fixtures/gradbench/ode.json records its values beside the manual tool's.
    """
    return ode_solution(x, steps, xp)[-1]


@ode.inputs
def _(rng, n, s):
    return {"x": replay(rng, ODE_ORDER, [n_ for n_, _ in ODE_ORDER], (n, s)), "steps": np.zeros(s)}


@ode.shapes
def _(n, s):
    return Shapes(wrt=(n,), output=(), flops=30 * n * s, operations=25 * s)


@ode.reads
def read_gradbench(path):
    """GradBench's ode input as JSON (its ODEInput: x, n numbers, and s, the number of Runge–Kutta steps ≥ 1;
    min_runs and min_seconds, if present, are ignored), plain or gzipped."""
    data = read_json_object(path, "GradBench's ode input (a JSON object with x, a list of n ≥ 1 numbers, and s, an "
                                  "integer ≥ 1)", valid=exact_keys(("x", "s")))
    x, s = numbers_and_count(path, "ode", data, "n", "s")
    return {"n": len(x), "s": s}, {"x": x, "steps": np.zeros(s)}
