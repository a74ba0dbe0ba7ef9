"""Seed 004 (Alex Minnaar, "Google JAX Overview"): grad of tanh, the jitted selu, and a vmapped MLP `predict`.

The article shows `jax.grad(jnp.tanh)`, `jax.jit(selu)` (kernel fusion of an element-wise chain) and
`vmap(predict, in_axes=(None, 0))` for an MLP with tanh layers applied to a batch of inputs, and `pmap`, which
runs one function on several devices, one slice of the input each: the data-parallel operators of mlp_predict
(pmap_value) and mlp_loss (pmap_value, pmap_grad).
"""
from __future__ import annotations

import math

from adcompare import Shapes, grid, problem

ELEMENTWISE_SIZES = [10, 100, 1_000, 10_000, 1_000_000]
ELEMENTWISE_OPERATORS = ("value", "jvp", "vjp", "jacfwd", "jacrev")


@problem(sizes=ELEMENTWISE_SIZES, wrt="x", tags=("square",), operators=ELEMENTWISE_OPERATORS,
         complex_step_safe=True)
def tanh(x, /, *, xp):
    """tanh(x) element-wise: Rⁿ → Rⁿ with a diagonal Jacobian diag(1 − tanh²x).

    The article's `grad(tanh)` is the scalar case; jvp/vjp with a vector give the element-wise derivative times
    that vector in one sweep, while jacfwd/jacrev build the n × n diagonal (and fail the memory pre-flight at
    n = 10⁶).
    """
    return xp.tanh(x)


@tanh.inputs
def _(rng, n):
    return {"x": rng.standard_normal(n)}


@tanh.shapes
def _(n):
    return Shapes(wrt=(n,), output=(n,))


SELU_ALPHA = 1.67
SELU_LAMBDA = 1.05


@problem(sizes=ELEMENTWISE_SIZES, wrt="x", tags=("square",), operators=ELEMENTWISE_OPERATORS)
def selu(x, /, *, xp):
    """selu(x) = λ·where(x > 0, x, α eˣ − α) element-wise with α = 1.67, λ = 1.05 (the article's): Rⁿ → Rⁿ.

    The article's example for jax.jit: an element-wise chain a compiler fuses into one kernel, so compare the
    eager and compiled `value` cells. Not complex-step safe (the comparison x > 0).
    """
    return SELU_LAMBDA * xp.where(x > 0, x, SELU_ALPHA * xp.exp(x) - SELU_ALPHA)


@selu.inputs
def _(rng, n):
    return {"x": rng.standard_normal(n)}


@selu.shapes
def _(n):
    return Shapes(wrt=(n,), output=(n,))


MLP_LAYERS = 3
MLP_SIZES = grid(B=[16, 128], h=[4, 16, 64, 256])


def _predict(params, x, xp):
    """The article's `predict`: out = W x + b layer by layer, tanh between layers, no tanh after the last."""
    h = params.shape[1]
    out = x
    for layer in range(params.shape[0]):
        W, b = params[layer, :, :h], params[layer, :, h]
        out = xp.matmul(x, xp.matrix_transpose(W)) + b  # W x for one input (h,), X Wᵀ for a batch (B, h)
        x = xp.tanh(out)
    return out


def _mlp_params(rng, h):
    # Layer l is params[l] = [W_l | b_l], W_l (h, h) scaled by 1/√h so activations stay O(1) through the tanh.
    params = rng.standard_normal((MLP_LAYERS, h, h + 1)) / math.sqrt(h)
    params[:, :, h] = 0.1 * rng.standard_normal((MLP_LAYERS, h))
    return params


@problem(
    sizes=MLP_SIZES,
    wrt="params",
    batch="X",
    tags=("per-example", "wide"),
    operators=("value", "jvp", "vjp", "vmap_jacfwd", "vmap_jacrev", "pmap_value"),
    complex_step_safe=True,
)
def mlp_predict(params, X, /, *, xp):
    """predict(params, x): a 3-layer MLP with tanh between layers, x ∈ Rʰ → Rʰ, for a batch X (B, h).

    params (3, h, h + 1) packs each layer's [W | b] (the article's list of (W, b) pairs, as one array because
    `wrt` is one array; layers are square, h × h). Per-example operators give each input's Jacobian w.r.t. all
    3h(h + 1) parameters, (B, h, 3, h, h + 1): vmap of jacfwd against vmap of jacrev over the batch.
    """
    return _predict(params, X, xp)


@mlp_predict.inputs
def _(rng, B, h):
    return {"params": _mlp_params(rng, h), "X": rng.standard_normal((B, h))}


@problem(
    sizes=MLP_SIZES,
    wrt="params",
    batch="data",
    tags=("per-example", "wide"),
    operators=("value", "vjp", "vmap_grad", "pmap_value", "pmap_grad"),
    complex_step_safe=True,
)
def mlp_loss(params, data, /, *, xp):
    """ℓᵢ = ½‖predict(params, xᵢ) − yᵢ‖² per example, with data rows [xᵢ | yᵢ] ∈ R²ʰ: R^(3h(h+1)) → R^B.

    vmap_grad gives the per-example gradients (B, 3, h, h + 1), the workload of per-example clipping
    (DP-SGD); it extends the article's vmapped `predict` with a loss so there is a scalar per example.
    pmap_grad is the article's `pmap` as data-parallel training uses it: the batch (B = 16 or 128, divisible by
    1, 2, 4 and 8) split across D devices, each device's gradient of its slice's mean loss, averaged across them.
    """
    h = params.shape[1]
    r = _predict(params, data[..., :h], xp) - data[..., h:]
    return 0.5 * xp.sum(r * r, axis=-1)


@mlp_loss.inputs
def _(rng, B, h):
    return {"params": _mlp_params(rng, h), "data": rng.standard_normal((B, 2 * h))}
