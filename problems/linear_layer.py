"""Seed 000 ("Understanding and benchmarking JAX's autodiff options"): the linear layer X @ W and the f, g examples.

The article times five ways of getting ∂(X @ W)/∂W over the grid n ∈ {5, 10}, p ∈ {8, 16, 64, 256, 512},
o ∈ {2, 5}. They map onto this suite's operators as follows (the article's trailing `.sum(axis=1)` is a reduction
after the derivative and is not timed here):

    test_jacfwd       jacfwd(forward)(W, X)                        → linear_layer, jacfwd       (n, o, p, o)
    test_jacrev       jacrev(forward)(W, X)                        → linear_layer, jacrev       (n, o, p, o)
    test_vmap_jacfwd  vmap over rows xᵢ of jacfwd(forward)(W, xᵢ)  → linear_layer, vmap_jacfwd  (n, o, p, o)
    test_vmap_jacrev  vmap over rows xᵢ of jacrev(forward)(W, xᵢ)  → linear_layer, vmap_jacrev  (n, o, p, o)
    test_vmap_grad    vmap over rows xᵢ and columns W₋ₖ of the
                      scalar grad of xᵢ·W₋ₖ w.r.t. W₋ₖ            → linear_layer_rowsum, vmap_grad (n, p, o)

The last one maps over both the rows of X and the columns of W, while the suite's per-example operators map over
the batch only and keep `wrt` whole. Output k depends on column k of W alone, so the gradient of the row sum
Σₖ (xᵢ W)ₖ with respect to W has, in column k, exactly the gradient of output k with respect to W₋ₖ: the result
[i, :, k] = xᵢ is the article's, entry for entry.
"""
from __future__ import annotations

import numpy as np

from adcompare import grid, problem

LINEAR_GRID = grid(n=[5, 10], p=[8, 16, 64, 256, 512], o=[2, 5])


@problem(
    sizes=LINEAR_GRID,
    wrt="W",
    batch="X",
    tags=("per-example", "wide"),
    operators=("value", "jvp", "vjp", "jacfwd", "jacrev", "vmap_jacfwd", "vmap_jacrev"),
    complex_step_safe=True,
)
def linear_layer(W, X, /, *, xp):
    """y = X @ W with X (n, p), W (p, o), differentiated w.r.t. W: R^(p·o) → R^(n·o) (seed 000's `forward`).

    The Jacobian (n·o) × (p·o) is wide for p > n, so the article expects jacrev to beat jacfwd, and it is sparse:
    output (i, k) depends only on column k of W. Per-example operators map over the rows xᵢ of X: ∂(xᵢ @ W)/∂W has
    shape (o, p, o) for each of the n rows.
    """
    return xp.matmul(X, W)  # not X @ W: TensorFlow's Tensor.__matmul__ rejects the 1-d row of one example


@linear_layer.inputs
def _(rng, n, p, o):
    # The article draws both from uniform(0, 1).
    return {"W": rng.uniform(0.0, 1.0, (p, o)), "X": rng.uniform(0.0, 1.0, (n, p))}


@problem(
    sizes=LINEAR_GRID,
    wrt="W",
    batch="X",
    tags=("per-example", "wide"),
    operators=("value", "vmap_grad"),
    complex_step_safe=True,
)
def linear_layer_rowsum(W, X, /, *, xp):
    """sᵢ = Σₖ (xᵢ @ W)ₖ with X (n, p), W (p, o): R^(p·o) → Rⁿ, a scalar per row; seed 000's `test_vmap_grad`.

    vmap_grad gives (n, p, o) with [i, :, k] = xᵢ: since output k of xᵢ @ W depends on column k of W only, column
    k of ∇_W sᵢ is the article's grad of xᵢ·W₋ₖ w.r.t. W₋ₖ, which it maps over rows and columns.
    """
    return xp.sum(xp.matmul(X, W), axis=-1)


@linear_layer_rowsum.inputs
def _(rng, n, p, o):
    return {"W": rng.uniform(0.0, 1.0, (p, o)), "X": rng.uniform(0.0, 1.0, (n, p))}


@problem(sizes=[2], wrt="xy", tags=("scalar-output", "small"), complex_step_safe=True)
def f_xy(xy, /, *, xp):
    """f(x, y) = x + y²: R² → R, seed 000's first grad example; ∇f = (1, 2y) = (1, 6) at the article's (3, 3)."""
    return xy[0] + xy[1] ** 2


@f_xy.inputs
def _(rng, n):
    # The article's point, so the report shows its numbers.
    return {"xy": np.array([3.0, 3.0])}


@problem(sizes=[2], wrt="xy", tags=("square", "small"), complex_step_safe=True)
def g_xy(xy, /, *, xp):
    """g(x, y) = (x − y, x + y²): R² → R², seed 000's Jacobian example; J = [[1, −1], [1, 2y]] = [[1, −1], [1, 6]] at (3, 3).

    `grad` does not apply (two outputs), which is the article's point: it gets a TypeError and switches to jacfwd.
    """  # noqa: E501 (the first line is `adcompare list`'s one-line summary)
    x, y = xy[0], xy[1]
    return xp.stack([x - y, x + y**2])


@g_xy.inputs
def _(rng, n):
    return {"xy": np.array([3.0, 3.0])}
