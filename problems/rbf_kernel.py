"""Seed 002 (a Julia Discourse thread, "Forward- and reverse-mode AD comparisons with JAX"): RBF-kernel gradients.

The thread's kernel, exactly as it writes it (note r² is −2xx′ + (x + x′), not the usual x² − 2xx′ + x′²):

    k(X, X2) = exp(−½ ((−2 X X2ᵀ) + (X + X2ᵀ)))        X, X2 ∈ Rⁿ, k ∈ R^(n×n)

and two derivatives, timed for ForwardDiff, Zygote and JAX (jacfwd against jacrev) at n = 100:
`grad_kernel`, the Jacobian of k(x₁, X) w.r.t. the one point x₁, and `grad_kernel_map`, the Jacobian of k(xⱼ, X)
w.r.t. xⱼ for every point j, written with vmap. The inputs are the thread's X = linspace(−1, 1, n).
"""
from __future__ import annotations

import numpy as np

from adcompare import Shapes, problem


@problem(sizes=[10, 100, 1_000, 10_000], wrt="x1", tags=("tall",), complex_step_safe=True)
def rbf_kernel_point(x1, /, *, X, xp):
    """k(x₁, X) = exp(−½(−2 x₁ X + (x₁ + X))) w.r.t. the point x₁ ∈ R¹: R¹ → Rⁿ, the thread's `grad_kernel`.

    A tall n × 1 Jacobian: one JVP (forward mode) against n VJPs (reverse mode), which is why the thread found
    jacfwd faster than jacrev. x₁ is X[:1], as in the thread.
    """
    return xp.exp(-0.5 * ((-2.0 * x1 * X) + (x1 + X)))


@rbf_kernel_point.inputs
def _(rng, n):
    X = np.linspace(-1.0, 1.0, n)
    return {"x1": X[:1].copy(), "X": X}


@problem(
    sizes=[10, 100, 1_000, 10_000],
    wrt="t",
    batch="X",
    tags=("per-example", "tall"),
    operators=("value", "jvp", "jacfwd", "jacrev", "vmap_jacfwd", "vmap_jacrev"),
    complex_step_safe=True,
)
def rbf_kernel_map(t, X, /, *, X2, xp):
    """k(X + t, X2) with a shift t ∈ R¹ (zero here): per example xⱼ, R¹ → Rⁿ; for all points, R¹ → R^(n×n).

    X (n, 1) holds the points as rows, so one example is a 1-vector like the thread's x[:1]; X2 (n,) is the
    same points.

    The thread's `grad_kernel_map` is vmap over points xⱼ of jacfwd of k(xⱼ, X) w.r.t. xⱼ. The suite's
    per-example operators keep `wrt` shared and map over the batch, so the point enters as xⱼ + t and the
    derivative is taken w.r.t. the shift t at t = 0, which equals ∂k(xⱼ, X)/∂xⱼ: vmap_jacfwd and vmap_jacrev give
    the thread's (n, n) map (with a trailing axis of 1) by forward and by reverse mode. On the whole batch,
    jacfwd w.r.t. t is the same (n, n, 1) array from a single JVP, since row j of k depends on xⱼ only; jacrev
    needs n² VJPs and is only feasible at n = 100.
    """
    shifted = X + t  # (n, 1) for all points, (1,) for one: broadcasting against X2 (n,) gives (n, n) or (n,)
    return xp.exp(-0.5 * ((-2.0 * shifted * X2) + (shifted + X2)))


@rbf_kernel_map.inputs
def _(rng, n):
    X = np.linspace(-1.0, 1.0, n)
    return {"t": np.zeros(1), "X": X[:, None], "X2": X.copy()}


@rbf_kernel_map.shapes
def _(n):
    return Shapes(wrt=(1,), output=(n, n), batch=n, example_output=(n,))
