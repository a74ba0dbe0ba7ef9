"""ADBench's bundle adjustment (Srajer, Kukelova & Fitzgibbon 2018; also GradBench's `ba`): the reprojection-error
Jacobian, whose sparsity is exploited by differentiating one observation at a time.

Residuals follow ADBench (src/python/modules/PyTorch/ba_objective.py): per observation i of point Xⱼ by camera
c = [r (Rodrigues rotation, 3) | C (centre, 3) | f | x₀ (2) | κ (2)] with weight wᵢ and feature uᵢ,

    p = R(r)(Xⱼ − C),  q = p₀,₁ / p₂,  eᵢ = wᵢ (f q (1 + κ₀‖q‖² + κ₁‖q‖⁴) + x₀ − uᵢ) ∈ R²,  w_errᵢ = 1 − wᵢ²

(R(r) by Rodrigues' formula; ADBench's θ = 0 branch is left out: a data-dependent branch does not compile and the
generated rotations are never zero). Observation i sees camera i mod n and point i mod m, ADBench's replication
pattern, at ADBench's published sizes ba1-ba5 (n cameras, m points, p observations) plus a small one.

Jacobian sparsity: with all parameters θ = [cams (11n) | X (3m) | w (p)], the 3p × (11n + 3m + p) Jacobian has, in
the three rows of observation i, non-zeros only in the 11 columns of camera i mod n, the 3 columns of point i mod m
and the column of wᵢ (w_errᵢ depends on wᵢ alone): 15 of 11n + 3m + p columns. ADBench computes exactly these
p dense 3 × 15 blocks.
"""
from __future__ import annotations

import numpy as np

from adcompare import Shapes, problem

CAMERA_PARAMS = 11
BLOCK = CAMERA_PARAMS + 3 + 1  # camera, point, weight: the parameters one observation depends on
BA_SIZES = [
    dict(n=3, m=10, p=30),
    dict(n=49, m=7776, p=31843),  # ba1
    dict(n=21, m=11315, p=36455),  # ba2
    dict(n=161, m=48126, p=182072),  # ba3
    dict(n=372, m=47423, p=204472),  # ba4
    dict(n=257, m=65132, p=225911),  # ba5
]


def _cross(a, b, xp):
    """a × b along the last axis (cross is not in the Array API core)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return xp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def residual(block, feat, xp):
    """[eᵢ (2) | w_errᵢ] (…, 3) from block (…, 15) = [camera (11) | point (3) | weight] and feature (…, 2)."""
    rot, centre, f = block[..., 0:3], block[..., 3:6], block[..., 6:7]
    x0, kappa = block[..., 7:9], block[..., 9:11]
    point, w = block[..., 11:14], block[..., 14:15]

    x = point - centre
    theta = xp.expand_dims(xp.sqrt(xp.sum(rot * rot, axis=-1)), axis=-1)
    axis = rot / theta
    cos, sin = xp.cos(theta), xp.sin(theta)
    along = xp.expand_dims(xp.vecdot(axis, x), axis=-1)
    p = x * cos + _cross(axis, x, xp) * sin + axis * along * (1.0 - cos)

    q = p[..., 0:2] / p[..., 2:3]
    rsq = xp.expand_dims(xp.sum(q * q, axis=-1), axis=-1)
    distortion = 1.0 + kappa[..., 0:1] * rsq + kappa[..., 1:2] * rsq * rsq
    reprojection = w * (q * distortion * f + x0 - feat)
    return xp.concat([reprojection, 1.0 - w * w], axis=-1)


@problem(
    sizes=BA_SIZES,
    wrt="delta",
    batch="observations",
    tags=("classic", "per-example", "tall"),
    operators=("value", "jacfwd", "jacrev", "vmap_jacfwd", "vmap_jacrev"),
    complex_step_safe=False,
)
def bundle_adjustment(delta, observations, /, *, xp):
    """Per-observation BA residuals r(θᵢ + δ, uᵢ): R¹⁵ → R³ per observation, R¹⁵ → R^(p×3) for all.

    observations (p, 17) holds each observation's gathered parameters θᵢ = [camera (11) | point (3) | wᵢ] and its
    feature uᵢ (2). The suite's per-example operators keep `wrt` shared, so θᵢ is differentiated through a
    shift δ ∈ R¹⁵ at δ = 0: vmap_jacfwd / vmap_jacrev give ADBench's p dense 3 × 15 blocks ∂rᵢ/∂θᵢ, by
    forward or reverse mode under vmap. On the whole batch, jacfwd w.r.t. δ gives the same (p, 3, 15) from 15
    JVPs — the column-compressed (graph-coloured) sparse Jacobian — while jacrev needs 3p VJPs (small size only).
    Where each block goes in the full sparse Jacobian is stated in the module docstring.
    """
    return residual(observations[..., :BLOCK] + delta, observations[..., BLOCK:], xp)


def generate(rng, n, m, p):
    """cams (n, 11), X (m, 3), w (p,), feats (p, 2), cam_idx, point_idx: a scene with points in front of every
    camera (depth 3 to 6) so the projections are well conditioned in float32."""
    cams = np.concatenate([
        0.1 * rng.standard_normal((n, 3)),  # small rotations, never zero
        0.1 * rng.standard_normal((n, 3)),  # centres near the origin
        rng.uniform(0.8, 1.2, (n, 1)),  # focal length
        0.05 * rng.standard_normal((n, 2)),  # principal point
        0.01 * rng.standard_normal((n, 2)),  # radial distortion
    ], axis=1)
    X = np.concatenate([rng.uniform(-1.0, 1.0, (m, 2)), rng.uniform(3.0, 6.0, (m, 1))], axis=1)
    w = rng.uniform(0.5, 1.5, p)
    cam_idx, point_idx = np.arange(p) % n, np.arange(p) % m
    feats = rng.uniform(-0.3, 0.3, (p, 2))
    return cams, X, w, feats, cam_idx, point_idx


def gather(cams, X, w, feats, cam_idx, point_idx):
    """The (p, 17) per-observation rows [camera | point | weight | feature]."""
    return np.concatenate([cams[cam_idx], X[point_idx], w[:, None], feats], axis=1)


@bundle_adjustment.inputs
def _(rng, n, m, p):
    return {"delta": np.zeros(BLOCK), "observations": gather(*generate(rng, n, m, p))}


@bundle_adjustment.shapes
def _(n, m, p):
    return Shapes(wrt=(BLOCK,), output=(p, 3), batch=p, example_output=(3,), flops=120 * p, operations=60)
