"""GradBench's `particle` eval: a charged particle's control by nested gradient descent (evals/particle/README.md,
commit f26651a7)."""
from __future__ import annotations

import numpy as np

import adcompare
from adcompare import Shapes, problem
from adcompare.model.nesting import ORDERS

from .gradient_descent import argmin
from .json_inputs import read_json_object

W0 = 0.0  # run.py's one input
NESTED = tuple(f"nested_{order}" for order in ORDERS)
DELTA_T = 1e-1  # particle.fut's Euler step
COMPLEX_STEP = 1e-20
# adcompare.while_loop's bound on the Euler steps (reaching it is an error): GradBench's input takes ~353; a
# bounded staged loop runs this many steps, so it is kept a small multiple of that.
EULER_MAX_TRIPS = 1_000


def distance(u, v, xp):
    d = u - v
    return xp.sqrt(xp.sum(d * d))


def naive_euler(w, *, xp, mode):
    """x₀(t_f)² where the particle's path, Euler-integrated under the force −∇ₓp(x; w), crosses the x axis
    (particle.fut's naive_euler; ∇ₓp taken by `adcompare.grad` in `mode`). `w` has shape (1,). The loop is
    `adcompare.while_loop`, one trip per accepted Euler step; particle.fut also takes ∇ₓp at the last position,
    whose step it then rejects, a value it never uses: here that derivative is not taken."""
    zero = w[0] * 0  # every constant built from w: its dtype and device, on every framework
    charges = (xp.stack([zero + 10, 10 - w[0]]), xp.stack([zero + 10, zero]))

    def potential(x):
        return 1 / distance(x, charges[0], xp) + 1 / distance(x, charges[1], xp)

    def above(state):  # the next position stays above the x axis
        x, xdot = state
        return (x + DELTA_T * xdot)[1] > 0

    def euler_step(state):
        x, xdot = state
        return x + DELTA_T * xdot, xdot - DELTA_T * adcompare.grad(potential, x, xp=xp, mode=mode)

    start = (xp.stack([zero, zero + 8]), xp.stack([zero + 0.75, zero]))
    x, xdot = adcompare.while_loop(above, euler_step, start, xp=xp, max_trips=EULER_MAX_TRIPS)
    delta_t_f = -x[1] / xdot[1]
    x_t_f = x + delta_t_f * xdot
    return x_t_f[0] * x_t_f[0]


@problem(sizes=[{"d": 1}], wrt="w", tags=("nested", "control-flow", "scalar-output"), operators=NESTED)
def particle(w, /, *, xp):
    """GradBench's particle (evals/particle/README.md; tools/futhark/particle.fut and solver.fut; Pearlmutter and
    Siskind's nested-AD benchmark): R → R, the control w that sends a charged particle through the origin,

        w* = argmin_w x₀(t_f; w)²,   p(x; w) = ‖x − (10, 10 − w)‖⁻¹ + ‖x − (10, 0)‖⁻¹,

    the particle starting at x = (0, 8) with velocity (0.75, 0), integrated by Euler steps of Δt = 0.1 under the
    force −∇ₓp while the next position stays above the x axis, then linearly extrapolated to it (t_f); the argmin
    by GradBench's gradient descent (problems/gradient_descent.py) from w. The descent differentiates the whole
    integration, whose every step takes ∇ₓp: `adcompare.grad(..., mode="outer")` around `mode="inner"`; the four
    nesting orders are GradBench's functions ff, fr, rf, rr (operators nested_ff …: outer mode, then inner). Both
    loops test values (`x₁ > 0`, the descent's stops): `adcompare.while_loop` and `adcompare.cond`, Python loops
    op by op and staged loops under jax.jit and tf.function (under jax.jit in the bounded form where the outer
    derivative is reverse: it transposes the Euler loop), refused by torch.compile. `w` is a vector of one, as
    particle.fut's `[w0]`; the output is w*[0].
    Reference (float64, `particle_reference`): the same algorithm with ∇ₓp in closed form, −Σ (x − c)/‖x − c‖³,
    and the outer derivative by complex step (h = 1e-20) through that integration — exact to rounding, the
    branch taken on real parts, so it is the derivative of the same loop the frameworks differentiate. The
    frameworks' ∇ₓp rounds differently from the closed form; the descent amplifies that only where a test
    flips, which the tests hold below 1e-9 (tests/test_nested.py).
    GradBench expects 0.2071918746486116 from w = 0 (run.py's `expect`, checked at |x − y| / max(1, |x| + |y|)
    ≤ 1e-4; tests/fixtures/gradbench/particle.json). Input: that w, or GradBench's JSON input (`--inputs FILE.json`:
    {"w": number}).
    """
    def outer(v):
        return naive_euler(v, xp=xp, mode="inner")

    return argmin(outer, lambda v: adcompare.grad(outer, v, xp=xp, mode="outer"), w, xp=xp)[0]


@particle.inputs
def _(rng, d):
    return {"w": np.full(d, W0, dtype=np.float64)}


def _euler_reference(w):
    """naive_euler in NumPy with ∇ₓp in closed form; complex w gives the complex-step derivative."""
    charges = (np.array([10, 10 - w]), np.array([10, 0], dtype=np.asarray(w).dtype))
    x, xdot = np.array([0, 8], dtype=np.asarray(w).dtype), np.array([0.75, 0], dtype=np.asarray(w).dtype)
    while True:
        gradient = sum(-(x - c) / np.sum((x - c) * (x - c)) ** 1.5 for c in charges)
        x_new = x + DELTA_T * xdot
        if not x_new[1].real > 0:
            break
        x, xdot = x_new, xdot - DELTA_T * gradient
    x_t_f = x + (-x[1] / xdot[1]) * xdot
    return x_t_f[0] * x_t_f[0]


def particle_reference(w):
    """The same descent in float64 NumPy: ∇ₓp in closed form, d/dw by complex step (see particle's docstring)."""
    def f(v):
        return np.float64(_euler_reference(float(v[0])))

    def gradient(v):
        return np.array([_euler_reference(complex(v[0], COMPLEX_STEP)).imag / COMPLEX_STEP])

    return argmin(f, gradient, np.asarray(w, dtype=np.float64), xp=np)[0]


for _operator in NESTED:
    particle.analytic(_operator)(particle_reference)


@particle.shapes
def _(d):
    # Operations dispatched in one call, for the time estimate, counted: a descent of 92 trips, each an integration
    # and one under the outer derivative, of ~353 Euler steps of ~40 operations (the inner gradient's included),
    # about three times that under a derivative: of the order 4·10⁶.
    return Shapes(wrt=(d,), output=(), operations=4_000_000)


def _gradbench_json(path: str) -> dict:
    return read_json_object(path, "GradBench's particle input (a JSON object with w, a number)",
                            valid=lambda data: isinstance(data.get("w"), (int, float)))


@particle.reads_header
def _(path):
    _gradbench_json(path)
    return {"d": 1}


@particle.reads
def _(path):
    """GradBench's ParticleInput: {"w": number} (min_runs and min_seconds, if present, are ignored)."""
    return {"d": 1}, {"w": np.array([float(_gradbench_json(path)["w"])])}
