"""Seed 000 ("Understanding and benchmarking JAX's autodiff options"): the linear layer X @ W."""
from __future__ import annotations

from adcompare import grid, problem


@problem(
    sizes=grid(n=[5, 10], p=[8, 16, 64, 256, 512], o=[2, 5]),
    wrt="W",
    batch="X",
    tags=("per-example", "tall"),
    operators=("value", "jvp", "vjp", "jacfwd", "jacrev", "vmap_jacfwd", "vmap_jacrev"),
    complex_step_safe=True,
)
def linear_layer(W, X, /, *, xp):
    """y = X @ W with X (n, p), W (p, o), differentiated w.r.t. W: R^(p·o) → R^(n·o).

    Per-example operators map over the rows xᵢ of X: ∂(xᵢ @ W)/∂W has shape (o, p, o) for each of the n rows.
    """
    return X @ W


@linear_layer.inputs
def _(rng, n, p, o):
    return {"W": rng.standard_normal((p, o)), "X": rng.standard_normal((n, p))}
