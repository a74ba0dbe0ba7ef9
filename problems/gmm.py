"""The Gaussian mixture model benchmark in its two published conventions (Srajer, Kukelova & Fitzgibbon 2018).

- `gmm`: ADBench's objective (src/cpp/shared/gmm.h, gmm_objective; data/gmm/gmm_d*_K*.txt): the log-likelihood
  of n points under K Gaussians with precision factors Q_k = diag(exp(q_k)) + L_k, *plus* ADBench's Wishart term
  ½γ²‖Q_k‖²_F − m Σ q_k − C. ADBench's tests publish 8.07380408004975791 for data/gmm/test.txt.
- `gmm_posterior`: GradBench's current `gmm` (evals/gmm/README.md, "log posterior"): the same log-likelihood plus
  the log of the Wishart prior density, −½γ²‖Q_k‖²_F + m Σ q_k + C, i.e. ADBench's prior term with its sign
  flipped (GradBench's fix of ADBench's sign error); it differs from `gmm` by 1–92% depending on the size.

Both are differentiated w.r.t. all parameters (alphas, means, icf). Log-sum-exp is written with max/exp/log/sum;
the log-gamma term depends on the sizes and the Wishart parameters only and is computed with math.lgamma. The
Wishart parameters γ and m are GradBench's `--gamma` and `-m` options (defaults γ = 1, m = 0, as in every ADBench
file and the generators here); an input file with other values passes them as the constant `wishart`
(`[γ, m, C]`, C the log normaliser per component, computed in NumPy). Conventions: ADBench's text files are `gmm`'s
inputs and GradBench's JSON inputs `gmm_posterior`'s; each refuses the other's format, so a GradBench file is
never run through ADBench's objective (they differ by the prior's sign). Generators: `gmm` follows
ADBench's data/gmm/gmm-data-gen.py (alphas, icf and x standard normal, means uniform on [0, 1)); `gmm_posterior`
follows GradBench's evals/gmm/run.py `generate`, draw for draw (x, alpha, mu, q, l from one
numpy.random.default_rng), so `--seed 31337`, GradBench's default seed, gives GradBench's inputs.
"""
from __future__ import annotations

import math

import numpy as np

from adcompare import Shapes, grid, problem
from adcompare.model.problem import first_lines

from .json_inputs import is_json, read_json_object

WISHART_GAMMA = 1.0  # ADBench's generator fixes γ = 1, m = 0
WISHART_M = 0
GMM_SIZES = grid(d=[2, 10, 20, 32, 64], K=[5, 10, 25, 50, 100, 200], n=[1_000, 10_000])  # ADBench's 1k and 10k
GRADBENCH_SIZES = grid(d=[2, 10, 20, 32, 64], K=[5, 10, 25, 50, 100], n=[1_000])  # GradBench's default grid


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


def log_likelihood(params, x, xp):
    """Σᵢ log Σₖ φₖ N(xᵢ; μₖ, (QₖᵀQₖ)⁻¹) with φ = softmax(α): the likelihood both conventions share."""
    d = x.shape[-1]
    n = x.shape[0]
    alphas = params[:, 0]
    means = params[:, 1:1 + d]
    q = params[:, 1 + d:1 + 2 * d]
    off = params[:, 1 + 2 * d:]
    qdiag = xp.exp(q)
    L = _lower_triangle(q, off, xp)

    # Layout (K, d, n). Lₖ(xᵢ − μₖ) is written Lₖxᵢ − Lₖμₖ: with jaxlib 0.10.2 on CPU, the jitted JVP through
    # Lₖ @ (xᵢ − μₖ) becomes one YNNPACK reduce fusion (__ynn_fusion) that returns NaN or garbage in float32
    # (0.10.1 is right); see docs/framework-bugs/jax_ynn_gmm_jvp.md for the reproducer and the workaround flag.
    xt = xp.matrix_transpose(x)
    centred = xp.expand_dims(xt, axis=0) - xp.expand_dims(means, axis=-1)
    qx = xp.expand_dims(qdiag, axis=-1) * centred + (L @ xt - L @ xp.expand_dims(means, axis=-1))
    inner = xp.expand_dims(alphas + xp.sum(q, axis=1), axis=-1) - 0.5 * xp.sum(qx * qx, axis=1)  # (K, n)
    constant = -n * d * 0.5 * math.log(2 * math.pi)
    return constant + xp.sum(logsumexp(inner, 0, xp)) - n * logsumexp(alphas, 0, xp)


def wishart_constants(gamma: float, m: int, d: int) -> np.ndarray:
    """[γ, m, C] with C = n′d(log γ − ½ log 2) − log Γ_d(n′/2), n′ = d + m + 1: the constant `wishart` an input
    file with GradBench's -m/--gamma passes (C needs lgamma, which the Array API lacks, so NumPy computes it)."""
    n_prime = d + m + 1
    return np.array([gamma, m, n_prime * d * (math.log(gamma) - 0.5 * math.log(2))
                     - log_gamma_distrib(0.5 * n_prime, d)])


def adbench_wishart_term(params, d, xp, wishart=None):
    """ADBench's Σₖ [½γ²(‖exp(qₖ)‖² + ‖lₖ‖²) − m Σ qₖ] − K C, C = n′d(log γ − ½ log 2) − log Γ_d(n′/2),
    n′ = d + m + 1: minus the log Wishart density of the precision matrices (gmm.h, log_wishart_prior, which
    ADBench adds to the log-likelihood). `wishart` = [γ, m, C] (see wishart_constants); None: γ = 1, m = 0."""
    K = params.shape[0]
    q = params[:, 1 + d:1 + 2 * d]
    off = params[:, 1 + 2 * d:]
    qdiag = xp.exp(q)
    squares = xp.sum(qdiag * qdiag, axis=1) + xp.sum(off * off, axis=1)
    gamma, m, c = wishart_parameters(d, wishart)
    return xp.sum(0.5 * gamma * gamma * squares - m * xp.sum(q, axis=1)) - K * c


def wishart_parameters(d: int, wishart=None):
    """(γ, m, C) from the `wishart` constant; None: the defaults as Python numbers (generated cells carry no extra
    constant)."""
    if wishart is None:
        return WISHART_GAMMA, WISHART_M, float(wishart_constants(WISHART_GAMMA, WISHART_M, d)[2])
    return wishart[0], wishart[1], wishart[2]


@problem(sizes=GMM_SIZES, wrt="params", tags=("classic", "scalar-output", "wide"),
         operators=("value", "grad", "jvp", "vjp", "hvp"))
def gmm(params, /, *, x, xp, wishart=None):
    """ADBench's GMM objective (gmm.h; GradBench's log posterior is gmm_posterior): R^(K(1+d+d(d+1)/2)) → R.

    params (K, 1 + d + d(d+1)/2) holds, per component k, [αₖ | μₖ (d) | qₖ (d) | lₖ (d(d−1)/2)] (ADBench's
    alphas, means and icf = [q | l]); x (n, d) are the data points. With Qₖ = diag(exp(qₖ)) + Lₖ (Lₖ strictly
    lower triangular, filled column-major from lₖ):

        f = −(nd/2) log 2π + Σᵢ logsumexpₖ(αₖ + Σ qₖ − ½‖Qₖ(xᵢ − μₖ)‖²) − n logsumexp(α)
            + Σₖ [½γ²(‖exp(qₖ)‖² + ‖lₖ‖²) − m Σ qₖ] − K [n′d(log γ − ½ log 2) − log Γ_d(n′/2)],  n′ = d + m + 1

    with γ = 1, m = 0 unless the file says otherwise. The Wishart term's sign is ADBench's (gmm.h and every ADBench
    tool; ADBench's tests give 8.07380408004975791 on data/gmm/test.txt); GradBench's log posterior, which
    subtracts it, is `gmm_posterior`.
    Sizes: ADBench's grid d ∈ {2, 10, 20, 32, 64}, K ∈ {5, …, 200}, n ∈ {1,000, 10,000} (data/gmm/1k, 10k); the
    gradient has K(1 + d + d(d+1)/2) entries.
    """
    return log_likelihood(params, x, xp) + adbench_wishart_term(params, x.shape[-1], xp, wishart)


@gmm.inputs
def _(rng, d, K, n):
    # ADBench (data/gmm/gmm-data-gen.py): alphas, icf and x standard normal, means uniform(0, 1).
    alphas = rng.standard_normal((K, 1))
    means = rng.uniform(0.0, 1.0, (K, d))
    icf = rng.standard_normal((K, d + d * (d - 1) // 2))
    return {"params": np.concatenate([alphas, means, icf], axis=1),
            "x": rng.standard_normal((n, d))}


@gmm.shapes
def gmm_shapes(d, K, n):
    """Both conventions' shapes and work: L @ x dominates the work; the column loop of _lower_triangle
    dispatches ~4 operations per dimension."""
    return Shapes(wrt=(K, 1 + d + d * (d + 1) // 2), output=(), flops=2 * K * d * d * n + 12 * K * d * n,
                  operations=40 + 4 * d)


@problem(sizes=GRADBENCH_SIZES, wrt="params", tags=("classic", "scalar-output", "wide"),
         operators=("value", "grad", "jvp", "vjp", "hvp"))
def gmm_posterior(params, /, *, x, xp, wishart=None):
    """GradBench's GMM log posterior (evals/gmm/README.md; ADBench's prior sign flipped): R^(K(1+d+d(d+1)/2)) → R.

    Same parameters and likelihood as `gmm`; the prior is the log Wishart density of the precision matrices QₖᵀQₖ
    with V = I/γ², n′ = d + m + 1:

        f = −(nd/2) log 2π + Σᵢ logsumexpₖ(αₖ + Σ qₖ − ½‖Qₖ(xᵢ − μₖ)‖²) − n logsumexp(α)
            − Σₖ [½γ²‖Qₖ‖²_F − m Σ qₖ] + K [n′d log(γ/√2) − log Γ_d(n′/2)]

    with γ = 1, m = 0 unless the input file says otherwise (GradBench's -m/--gamma): ADBench's objective with its
    Wishart term's sign flipped. Sizes: GradBench's default grid
    d ∈ {2, 10, 20, 32, 64}, K ∈ {5, 10, 25, 50, 100}, n = 1,000; inputs are GradBench's recipe (`--seed 31337`
    reproduces GradBench's own).
    """
    return log_likelihood(params, x, xp) - adbench_wishart_term(params, x.shape[-1], xp, wishart)


@gmm_posterior.inputs
def _(rng, d, K, n):
    # GradBench (evals/gmm/run.py, generate): x, alpha, mu, q, l in this order from one default_rng(seed).
    x = rng.normal(size=(n, d))
    alphas = rng.normal(size=(K, 1))
    means = rng.uniform(size=(K, d))
    q = rng.normal(size=(K, d))
    lower = rng.normal(size=(K, d * (d - 1) // 2))
    return {"params": np.concatenate([alphas, means, q, lower], axis=1), "x": x}


gmm_posterior.shapes(gmm_shapes)


# ---------------------------------------------------------------------------------------------------------------
# Closed forms for the float64 reference


POINTS_A_BLOCK = 2048  # data points a pass of the closed forms holds: K·2048 floats of exponents, (2048, d) blocks


def _closed_form(params, x, wishart, prior_sign: float, gradient: bool):
    """The objective (and its gradient) by hand in NumPy float64, a component at a time: for component k and a
    block of points, Zₖ = (X − μₖ)Qₖᵀ is one (points, d) × (d, d) product, and with rₖᵢ the responsibilities
    (softmaxₖ of the exponents αₖ + Σ qₖ − ½‖zₖᵢ‖²) the likelihood's gradient is

        ∂/∂αₖ = Σᵢ rₖᵢ − n softmax(α)ₖ      ∂/∂μₖ = Qₖᵀ Σᵢ rₖᵢ zₖᵢ      Gₖ = −Σᵢ rₖᵢ zₖᵢ (xᵢ − μₖ)ᵀ
        ∂/∂qₖⱼ = Σᵢ rₖᵢ + Gₖⱼⱼ exp(qₖⱼ)      ∂/∂lₖ = Gₖ's strictly lower entries, column-major,

    plus the Wishart term's γ² exp(2qₖ) − m and γ² lₖ, signed by `prior_sign`. Evaluating the objective itself
    through NumPy builds (K, d, n) arrays (1 GB each at ADBench's d = 64, K = 200, n = 10,000): its value
    reference took 8.6-10 s there and a differenced direction of its gradient 21 s, where a framework's call took
    1-11 s. This
    holds a block of points at a time, and there takes 0.8 s for the value and 2.5 s for the whole gradient (one
    core); the gradient's pass costs a second product a component and block."""
    params = np.asarray(params, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    K = params.shape[0]
    alphas, means, q, off = params[:, 0], params[:, 1:1 + d], params[:, 1 + d:1 + 2 * d], params[:, 1 + 2 * d:]
    cols, rows = np.triu_indices(d, 1)  # Lₖ's entries column-major, as lₖ holds them: column j, rows j+1 … d−1
    factors = np.zeros((K, d, d))
    factors[:, np.arange(d), np.arange(d)] = np.exp(q)
    factors[:, rows, cols] = off
    offsets = alphas + q.sum(axis=1)
    total = 0.0
    grad = np.zeros_like(params) if gradient else None
    for start in range(0, n, POINTS_A_BLOCK):
        block = x[start:start + POINTS_A_BLOCK]
        exponents = np.empty((K, len(block)))
        for k in range(K):
            z = (block - means[k]) @ factors[k].T
            exponents[k] = offsets[k] - 0.5 * np.einsum("ij,ij->i", z, z)
        top = exponents.max(axis=0)
        weights = np.exp(exponents - top)
        sums = weights.sum(axis=0)
        total += float(np.sum(top + np.log(sums)))
        if grad is None:
            continue
        weights /= sums  # the responsibilities rₖᵢ
        weights[weights < np.finfo(np.float64).tiny] = 0.0  # subnormals (most, at d = 64) ran the pass 2.3× slower
        for k in range(K):  # with cₖᵢ = xᵢ − μₖ and zₖᵢ = Qₖcₖᵢ, Gₖ = −Qₖ Σᵢ rₖᵢcₖᵢcₖᵢᵀ: one product a component
            centred = block - means[k]
            weighted = weights[k][:, None] * centred
            g = -(factors[k] @ (weighted.T @ centred))
            share = weights[k].sum()
            grad[k, 0] += share
            grad[k, 1:1 + d] += factors[k].T @ (factors[k] @ weighted.sum(axis=0))
            grad[k, 1 + d:1 + 2 * d] += share + np.diagonal(g) * np.exp(q[k])
            grad[k, 1 + 2 * d:] += g[rows, cols]
    lse_alpha = float(logsumexp(alphas, 0, np))
    if grad is None:
        prior = float(adbench_wishart_term(params, d, np, wishart))
        return np.float64(-n * d * 0.5 * math.log(2 * math.pi) + total - n * lse_alpha + prior_sign * prior)
    gamma, m, _ = (float(v) for v in wishart_parameters(d, wishart))
    grad[:, 0] -= n * np.exp(alphas - lse_alpha)
    grad[:, 1 + d:1 + 2 * d] += prior_sign * (gamma * gamma * np.exp(2 * q) - m)
    grad[:, 1 + 2 * d:] += prior_sign * gamma * gamma * off
    return grad


@gmm.analytic("value")
def gmm_value(params, /, *, x, wishart=None):
    """ADBench's objective by hand (_closed_form): the reference's value."""
    return _closed_form(params, x, wishart, 1.0, gradient=False)


@gmm.analytic("grad")
def gmm_gradient(params, /, *, x, wishart=None):
    """ADBench's objective's gradient by hand (_closed_form): the reference's gradient, all of it."""
    return _closed_form(params, x, wishart, 1.0, gradient=True)


@gmm_posterior.analytic("value")
def gmm_posterior_value(params, /, *, x, wishart=None):
    """GradBench's log posterior by hand (_closed_form, the prior's sign flipped): the reference's value."""
    return _closed_form(params, x, wishart, -1.0, gradient=False)


@gmm_posterior.analytic("grad")
def gmm_posterior_gradient(params, /, *, x, wishart=None):
    """GradBench's log posterior's gradient by hand (_closed_form): the reference's gradient, all of it."""
    return _closed_form(params, x, wishart, -1.0, gradient=True)


def _wishart(gamma: float, m: int, d: int) -> dict[str, np.ndarray]:
    """The `wishart` constant for a file's γ and m ({} at the defaults, so the cell is the generated one's)."""
    if gamma <= 0 or m < 0:
        raise ValueError(f"Wishart parameters γ = {gamma:g}, m = {m}: γ must be above 0 and m at least 0")
    return {} if (gamma, m) == (WISHART_GAMMA, WISHART_M) else {"wishart": wishart_constants(gamma, m, d)}


def _adbench_header(path: str) -> dict[str, int]:
    """`d K n` from the first line of ADBench's text format; GradBench's JSON is refused (another convention)."""
    if is_json(path):
        raise ValueError("GradBench's gmm input (JSON), whose objective is the log posterior: it is "
                         "gmm_posterior's input, not gmm's (ADBench's objective adds the Wishart term); use "
                         "--problem gmm_posterior")
    with open(path, encoding="utf-8") as f:  # `d K n` and one alpha tell it from BA's and LSTM's
        first, second = first_lines(f)
    if len(first) != 3 or not all(v.isdigit() for v in first) or len(second) != 1:
        raise ValueError("not ADBench's GMM format (first line `d K n`, then K lines of one alpha)")
    d, K, n = (int(v) for v in first)
    return {"d": d, "K": K, "n": n}


def _read_adbench(path: str):
    """ADBench's format (src/python/shared/input_utils.py, read_gmm_instance): `d K n`, K alphas, K means, K icf
    rows, n points (or one point, replicated n times, as in data/gmm/2.5M), then `γ m`."""
    dims = _adbench_header(path)
    d, K, n = dims["d"], dims["K"], dims["n"]
    lines = [line.split() for line in open(path, encoding="utf-8").read().splitlines() if line.strip()]
    points = len(lines) - 2 - 3 * K
    widths = [1] * K + [d] * K + [d * (d + 1) // 2] * K
    if points not in (1, n) or [len(v) for v in lines[1:1 + 3 * K]] != widths or any(
            len(v) != d for v in lines[1 + 3 * K:-1]) or len(lines[-1]) != 2:
        raise ValueError(f"{path}: not ADBench's GMM format for d={d}, K={K}, n={n} (K alphas, K means of d, K icf "
                         f"rows of d(d+1)/2, n points of d, then `γ m`); the body does not match its header")
    rows = np.array([[float(v) for v in line] for line in lines[1 + 2 * K:1 + 3 * K]])
    alphas = np.array([[float(v[0])] for v in lines[1:1 + K]])
    means = np.array([[float(v) for v in line] for line in lines[1 + K:1 + 2 * K]])
    x = np.array([[float(v) for v in line] for line in lines[1 + 3 * K:-1]])
    return dims, {"params": np.concatenate([alphas, means, rows], axis=1),
                  "x": np.tile(x, (n, 1)) if points == 1 else x,
                  **_wishart(float(lines[-1][0]), int(lines[-1][1]), d)}


def _gradbench_json(path: str) -> dict:
    """GradBench's gmm input as JSON (the `input` its evals/gmm/run.py sends); ADBench's text is refused."""
    if not is_json(path):
        raise ValueError("not GradBench's gmm input (JSON); an ADBench text file follows ADBench's "
                         "objective: it is gmm's input, not gmm_posterior's; use --problem gmm")
    return read_json_object(path, "GradBench's gmm input (a JSON object with d, k, n, x, m, gamma, alpha, mu, q, l)",
                            ("d", "k", "n", "x", "alpha", "mu", "q", "l"))


def _gradbench_header(path: str) -> dict[str, int]:
    data = _gradbench_json(path)  # JSON has no header: parsed, but no arrays built
    return {"d": int(data["d"]), "K": int(data["k"]), "n": int(data["n"])}


def _read_gradbench(path: str):
    """GradBench's gmm input as JSON: d, k, n, x, m, gamma, alpha, mu, q, l (m and γ default to 0 and 1)."""
    data = _gradbench_json(path)
    d, K, n = int(data["d"]), int(data["k"]), int(data["n"])
    parts = [np.reshape(np.asarray(data["alpha"], float), (K, 1)), np.reshape(np.asarray(data["mu"], float), (K, d)),
             np.reshape(np.asarray(data["q"], float), (K, d)),
             np.reshape(np.asarray(data["l"], float), (K, d * (d - 1) // 2))]
    return {"d": d, "K": K, "n": n}, {"params": np.concatenate(parts, axis=1),
                                      "x": np.reshape(np.asarray(data["x"], float), (n, d)),
                                      **_wishart(float(data.get("gamma", 1.0)), int(data.get("m", 0)), d)}


gmm.reads(_read_adbench)
gmm.reads_header(_adbench_header)
gmm_posterior.reads(_read_gradbench)
gmm_posterior.reads_header(_gradbench_header)
