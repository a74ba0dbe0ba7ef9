"""ADBench's Gaussian mixture model objective (Srajer, Kukelova & Fitzgibbon 2018; also GradBench's `gmm`).

Definition and input generator follow ADBench (src/cpp/shared/gmm.h, data/gmm/gmm-data-gen.py): the objective
is the log-likelihood of n points under K Gaussians with precision factors Q_k = diag(exp(q_k)) + L_k, plus
ADBench's Wishart prior term, differentiated w.r.t. all parameters (alphas, means, icf). Log-sum-exp is written
with max/exp/log/sum, the log-gamma term depends on the sizes only and is computed with math.lgamma.
"""
from __future__ import annotations

import math

import numpy as np

from adcompare import Shapes, grid, problem

WISHART_GAMMA = 1.0  # ADBench's generator fixes γ = 1, m = 0
WISHART_M = 0
GMM_SIZES = grid(d=[2, 10, 20, 32, 64], K=[5, 10, 25, 50, 100, 200], n=[1_000, 10_000])


def logsumexp(a, axis, xp):
    """log Σ exp(a) along `axis`, shifted by the maximum so exp cannot overflow (the shift cancels in the
    derivative, so any subgradient of max gives the same result)."""
    top = xp.max(a, axis=axis)
    return top + xp.log(xp.sum(xp.exp(a - xp.expand_dims(top, axis=axis)), axis=axis))


def log_gamma_distrib(a: float, p: int) -> float:
    """log Γ_p(a), the multivariate log-gamma function, from sizes only."""
    return 0.25 * p * (p - 1) * math.log(math.pi) + sum(math.lgamma(a + 0.5 * (1 - j)) for j in range(1, p + 1))


def _lower_triangle(q, off, xp):
    """L (K, d, d), strictly lower triangular, from off (K, d(d−1)/2) in ADBench's column-major order.

    Built column by column with concat and stack (as ADBench's PyTorch version does): the Array API has no
    scatter, and a Python loop over d static columns unrolls under every compiler. The zeros come from
    `zeros_like` of a slice of q (K, d), which carries dtype and device: JAX tracers have no `.device`.
    """
    d = q.shape[1]
    columns, start = [], 0
    for j in range(d):
        zeros = xp.zeros_like(q[:, :j + 1])
        length = d - j - 1
        columns.append(xp.concat([zeros, off[:, start:start + length]], axis=1) if length else zeros)
        start += length
    return xp.stack(columns, axis=-1)


@problem(sizes=GMM_SIZES, wrt="params", tags=("classic", "scalar-output", "wide"),
         operators=("value", "grad", "jvp", "vjp", "hvp"))
def gmm(params, /, *, x, xp):
    """ADBench's GMM objective: R^(K(1 + d + d(d+1)/2)) → R.

    params (K, 1 + d + d(d+1)/2) holds, per component k, [αₖ | μₖ (d) | qₖ (d) | lₖ (d(d−1)/2)] (ADBench's
    alphas, means and icf = [q | l]); x (n, d) are the data points. With Qₖ = diag(exp(qₖ)) + Lₖ (Lₖ strictly
    lower triangular, filled column-major from lₖ):

        f = −(nd/2) log 2π + Σᵢ logsumexpₖ(αₖ + Σ qₖ − ½‖Qₖ(xᵢ − μₖ)‖²) − n logsumexp(α)
            + Σₖ [½γ²(‖exp(qₖ)‖² + ‖lₖ‖²) − m Σ qₖ] − K [n′d(log γ − ½ log 2) − log Γ_d(n′/2)],  n′ = d + m + 1

    with γ = 1, m = 0. The prior's sign is ADBench's (its C++ and Python sources and GradBench's Adroit spec);
    GradBench's JAX tool negates the prior. Sizes: ADBench's grid d ∈ {2, 10, 20, 32, 64},
    K ∈ {5, …, 200}, n ∈ {1,000, 10,000}; the gradient has K(1 + d + d(d+1)/2) entries.
    """
    d = x.shape[-1]
    n = x.shape[0]
    K = params.shape[0]
    alphas = params[:, 0]
    means = params[:, 1:1 + d]
    q = params[:, 1 + d:1 + 2 * d]
    off = params[:, 1 + 2 * d:]
    qdiag = xp.exp(q)
    sum_qs = xp.sum(q, axis=1)
    L = _lower_triangle(q, off, xp)

    # Layout (K, d, n). Lₖ(xᵢ − μₖ) is written Lₖxᵢ − Lₖμₖ: jax 0.10.2's jit of a JVP through Lₖ @ (xᵢ − μₖ), whose
    # tangent is broadcast along n, returns NaN or segfaults on CPU for n ≥ 500 (docs/problems.md).
    xt = xp.matrix_transpose(x)
    centred = xp.expand_dims(xt, axis=0) - xp.expand_dims(means, axis=-1)
    qx = xp.expand_dims(qdiag, axis=-1) * centred + (L @ xt - L @ xp.expand_dims(means, axis=-1))
    inner = xp.expand_dims(alphas + sum_qs, axis=-1) - 0.5 * xp.sum(qx * qx, axis=1)  # (K, n)
    slse = xp.sum(logsumexp(inner, 0, xp))

    constant = -n * d * 0.5 * math.log(2 * math.pi)
    n_prime = d + WISHART_M + 1
    c = n_prime * d * (math.log(WISHART_GAMMA) - 0.5 * math.log(2)) - log_gamma_distrib(0.5 * n_prime, d)
    prior = xp.sum(0.5 * WISHART_GAMMA**2 * (xp.sum(qdiag * qdiag, axis=1) + xp.sum(off * off, axis=1))
                   - WISHART_M * sum_qs) - K * c
    return constant + slse - n * logsumexp(alphas, 0, xp) + prior


@gmm.inputs
def _(rng, d, K, n):
    # ADBench: alphas, icf and x standard normal, means uniform(0, 1).
    alphas = rng.standard_normal((K, 1))
    means = rng.uniform(0.0, 1.0, (K, d))
    icf = rng.standard_normal((K, d + d * (d - 1) // 2))
    return {"params": np.concatenate([alphas, means, icf], axis=1),
            "x": rng.standard_normal((n, d))}


@gmm.shapes
def _(d, K, n):
    # L @ x dominates the work; the column loop of _lower_triangle dispatches ~4 operations per dimension.
    return Shapes(wrt=(K, 1 + d + d * (d + 1) // 2), output=(), flops=2 * K * d * d * n + 12 * K * d * n,
                  operations=40 + 4 * d)
