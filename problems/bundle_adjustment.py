"""ADBench's bundle adjustment (Srajer, Kukelova & Fitzgibbon 2018; also GradBench's `ba`): the reprojection-error
Jacobian, whose sparsity is exploited by differentiating one observation at a time.

Residuals follow ADBench (src/cpp/shared/ba.h, computeReprojError and computeZachWeightError): per observation i of
point Xⱼ by camera c = [r (Rodrigues rotation, 3) | C (centre, 3) | f | x₀ (2) | κ (2)] with weight wᵢ and
feature uᵢ,

    p = R(r)(Xⱼ − C),  q = p₀,₁ / p₂,  eᵢ = wᵢ (f q (1 + κ₀‖q‖² + κ₁‖q‖⁴) + x₀ − uᵢ) ∈ R²,  w_errᵢ = 1 − wᵢ²

with R(r)x by Rodrigues' formula for θ = ‖r‖ and, near zero rotation, by ADBench's θ = 0 branch x + r × x
(rodrigues_rotate_point). The branch is a `where` between the two forms with a safe θ in the discarded one, so it
compiles without a graph break and its derivative has no NaN; it is taken for θ ≤ 1e-12, where the two forms and
their first derivatives agree to float64 rounding (Rodrigues' formula differs from x + r × x by O(θ²) in value and
O(θ) in derivative), and where ADBench's own branch (θ² ≠ 0) computes the same numbers.

Inputs follow ADBench's data files (data/ba/ba*_n*_m*_p*.txt): every file holds one camera, one point, one weight
and one feature, and ADBench's reader replicates them over n cameras, m points and p observations, observation i
seeing camera i mod n and point i mod m. At ADBench's sizes ba1-ba20 (n, m, p) the generator does exactly that
with the row all of ADBench's files hold, so those inputs do not depend on the seed. The small sizes n3-m10-p30
(what tests and quick checks run), n5-m50-p300 and n10-m200-p3000 (the full suite's scaling) deliberately differ:
a seeded scene of distinct cameras, points, weights and features, well conditioned in float32 — ADBench's row
(pixel-scale focal length and features) gives float32 Jacobians ~1.5e-4 off in relative terms, above the float32
tolerance, and identical rows test less. `--inputs`
reads ADBench's files and GradBench's `ba` inputs as JSON (its evals/ba/run.py sends the same numbers as
{n, m, p, cam, x, w, feat}). Sizes come from each file's header, not its name: ba20's name says p = 2,987,644,
its header (which ADBench's and GradBench's readers use) 28,987,644. Planning reads the header only.

Jacobian sparsity: with all parameters θ = [cams (11n) | X (3m) | w (p)], the 3p × (11n + 3m + p) Jacobian has, in
the three rows of observation i, non-zeros only in the 11 columns of camera i mod n, the 3 columns of point i mod m
and the column of wᵢ (w_errᵢ depends on wᵢ alone): 15 of 11n + 3m + p columns. ADBench computes exactly these
p dense 3 × 15 blocks.
"""
from __future__ import annotations

import numpy as np

from adcompare import Shapes, problem
from adcompare.model.problem import first_lines

from .json_inputs import is_json, read_json_object

CAMERA_PARAMS = 11
BLOCK = CAMERA_PARAMS + 3 + 1  # camera, point, weight: the parameters one observation depends on
SMALL_ANGLE_SQ = 1e-24  # θ² at or below which ADBench's θ = 0 form x + r × x is used (representable in float32)
# The one camera, point, weight and feature of every ADBench ba1-ba20 file (e.g. data/ba/ba1_n49_m7776_p31843.txt).
ADBENCH_CAMERA = (-0.758453, -1.109613, -0.845551, 34.556073, 39.676747, 53.881673, 419.194514, 5.864426, -8.518870,
                  0.087812, 0.002739)
ADBENCH_POINT = (7.203245, 0.001144, 3.023326)
ADBENCH_WEIGHT = 0.417022
ADBENCH_FEATURE = (271.760969, 834.209256)
ADBENCH_SIZES = (
    (49, 7776, 31843), (21, 11315, 36455), (161, 48126, 182072), (372, 47423, 204472), (257, 65132, 225911),
    (539, 65220, 277273), (93, 61203, 287451), (88, 64298, 383937), (810, 88814, 393775), (1197, 126327, 563734),
    (1723, 156502, 678718), (253, 163691, 899155), (245, 198739, 1091386), (356, 226730, 1255268),
    (1102, 780462, 4052340), (1544, 942409, 4750193), (1778, 993923, 5001946), (1936, 649673, 5213733),
    (4585, 1324582, 9125125), (13682, 4456117, 28987644))  # ba1 … ba20 as (n, m, p), from each file's header
BA_SIZES = [dict(n=3, m=10, p=30), dict(n=5, m=50, p=300), dict(n=10, m=200, p=3000)] + [
    dict(n=n, m=m, p=p) for n, m, p in ADBENCH_SIZES]


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
    sq = xp.expand_dims(xp.sum(rot * rot, axis=-1), axis=-1)
    small = sq <= SMALL_ANGLE_SQ
    theta = xp.sqrt(xp.where(small, xp.ones_like(sq), sq))  # safe in the discarded branch: no 0/0, no NaN gradient
    axis = rot / theta
    cos, sin = xp.cos(theta), xp.sin(theta)
    along = xp.expand_dims(xp.vecdot(axis, x), axis=-1)
    rodrigues = x * cos + _cross(axis, x, xp) * sin + axis * along * (1.0 - cos)
    p = xp.where(small, x + _cross(rot, x, xp), rodrigues)

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
    """ADBench's BA residuals per observation, r(θᵢ + δ, uᵢ): R¹⁵ → R³ per observation, R¹⁵ → R^(p×3) for all.

    observations (p, 17) holds each observation's gathered parameters θᵢ = [camera (11) | point (3) | wᵢ] and its
    feature uᵢ (2). The suite's per-example operators keep `wrt` shared, so θᵢ is differentiated through a
    shift δ ∈ R¹⁵ at δ = 0: vmap_jacfwd / vmap_jacrev give ADBench's p dense 3 × 15 blocks ∂rᵢ/∂θᵢ, by
    forward or reverse mode under vmap. On the whole batch, jacfwd w.r.t. δ gives the same (p, 3, 15) from 15
    JVPs — the column-compressed (graph-coloured) sparse Jacobian — while jacrev needs 3p VJPs (small size only).
    Where each block goes in the full sparse Jacobian is stated in the module docstring.
    """
    return residual(observations[..., :BLOCK] + delta, observations[..., BLOCK:], xp)


def replicate(camera, point, weight, feature, n, m, p):
    """ADBench's reader (src/python/shared/input_utils.py, read_ba_instance): one camera, point, weight and
    feature repeated over n cameras, m points and p observations; observation i sees camera i mod n, point i mod m.
    Returns cams (n, 11), X (m, 3), w (p,), feats (p, 2), cam_idx, point_idx."""
    cams = np.tile(np.asarray(camera, dtype=np.float64), (n, 1))
    X = np.tile(np.asarray(point, dtype=np.float64), (m, 1))
    w = np.full(p, float(weight))
    feats = np.tile(np.asarray(feature, dtype=np.float64), (p, 1))
    return cams, X, w, feats, np.arange(p) % n, np.arange(p) % m


def generate(rng, n, m, p):
    """cams (n, 11), X (m, 3), w (p,), feats (p, 2), cam_idx, point_idx: a scene of distinct cameras, points,
    weights and features, with points in front of every camera (depth 3 to 6) so the projections are well
    conditioned in float32 — for sizes that are not ADBench's."""
    cams = np.concatenate([
        0.1 * rng.standard_normal((n, 3)),  # small rotations
        0.1 * rng.standard_normal((n, 3)),  # centres near the origin
        rng.uniform(0.8, 1.2, (n, 1)),  # focal length
        0.05 * rng.standard_normal((n, 2)),  # principal point
        0.01 * rng.standard_normal((n, 2)),  # radial distortion
    ], axis=1)
    X = np.concatenate([rng.uniform(-1.0, 1.0, (m, 2)), rng.uniform(3.0, 6.0, (m, 1))], axis=1)
    w = rng.uniform(0.5, 1.5, p)
    feats = rng.uniform(-0.3, 0.3, (p, 2))
    return cams, X, w, feats, np.arange(p) % n, np.arange(p) % m


GATHER_ROWS = 1 << 20  # rows gathered at once: the temporaries stay small (BA's largest rows are 3.9 GB)


def gather(cams, X, w, feats, cam_idx, point_idx):
    """The (p, 17) per-observation rows [camera | point | weight | feature]."""
    p = len(cam_idx)
    rows = np.empty((p, 17), dtype=np.result_type(cams, X, w, feats))
    for a in range(0, p, GATHER_ROWS):
        b = min(p, a + GATHER_ROWS)
        rows[a:b] = np.concatenate([cams[cam_idx[a:b]], X[point_idx[a:b]], w[a:b, None], feats[a:b]], axis=1)
    return rows


@bundle_adjustment.inputs
def _(rng, n, m, p):
    if (n, m, p) in ADBENCH_SIZES:  # ADBench's recipe: the one row all its ba1-ba20 files hold, replicated
        rows = np.empty((p, 17))  # what gather(*replicate(..., n, m, p)) gives, written without gathering
        rows[...] = gather(*replicate(ADBENCH_CAMERA, ADBENCH_POINT, ADBENCH_WEIGHT, ADBENCH_FEATURE, 1, 1, 1))
    else:  # deliberately not ADBench's (see the module docstring): a seeded, float32-friendly scene
        rows = gather(*generate(rng, n, m, p))
    return {"delta": np.zeros(BLOCK), "observations": rows}


GRADBENCH_KEYS = ("n", "m", "p", "cam", "x", "w", "feat")  # GradBench's evals/ba/run.py `parse` of an ADBench file


def _gradbench_json(path: str) -> dict | None:
    """GradBench's ba input as JSON (n, m, p, cam, x, w, feat: ADBench's file as its evals/ba/run.py sends it), or
    None when the file is not JSON."""
    if not is_json(path):
        return None
    return read_json_object(path, f"GradBench's ba input (a JSON object with {', '.join(GRADBENCH_KEYS)})",
                            GRADBENCH_KEYS)


@bundle_adjustment.reads_header
def read_header(path):
    """`n m p`: the first line of ADBench's text format (the body is not read), or GradBench's JSON's n, m, p."""
    data = _gradbench_json(path)
    if data is not None:
        return {k: int(data[k]) for k in ("n", "m", "p")}
    with open(path, encoding="utf-8") as f:  # `n m p` and the camera's 11 numbers tell it from GMM's and LSTM's
        first, second = first_lines(f)
    if len(first) != 3 or not all(v.isdigit() for v in first) or len(second) != CAMERA_PARAMS:
        raise ValueError(f"not ADBench's BA format (first line `n m p`; then one camera of 11 numbers, one "
                         f"point of 3, one weight, one feature of 2) nor GradBench's ba input (JSON with "
                         f"{', '.join(GRADBENCH_KEYS)})")
    return dict(zip(("n", "m", "p"), (int(v) for v in first)))


@bundle_adjustment.reads
def read_adbench(path):
    """ADBench's text format: `n m p`, then one camera (11 numbers), one point (3), one weight, one feature (2); or
    GradBench's JSON of the same numbers."""
    data = _gradbench_json(path)
    if data is None:
        lines = [line.split() for line in open(path, encoding="utf-8").read().splitlines() if line.strip()]
        counts = [3, CAMERA_PARAMS, 3, 1, 2]
        if [len(line) for line in lines] != counts:
            raise ValueError(f"{path}: not ADBench's BA format (lines of {counts} numbers: n m p, camera, point, "
                             f"weight, feature); found lines of {[len(line) for line in lines][:8]} numbers")
        n, m, p = (int(v) for v in lines[0])
        camera, point, weights, feature = ([float(v) for v in line] for line in lines[1:])
        weight = weights[0]
    else:
        n, m, p = (int(data[k]) for k in ("n", "m", "p"))
        camera, point, weight, feature = data["cam"], data["x"], float(data["w"]), data["feat"]
        if (len(camera), len(point), len(feature)) != (CAMERA_PARAMS, 3, 2):
            raise ValueError(f"{path}: GradBench's ba input needs cam of 11 numbers, x of 3 and feat of 2")
    rows = gather(*replicate(camera, point, weight, feature, n, m, p))
    return {"n": n, "m": m, "p": p}, {"delta": np.zeros(BLOCK), "observations": rows}


@bundle_adjustment.shapes
def _(n, m, p):
    return Shapes(wrt=(BLOCK,), output=(p, 3), batch=p, example_output=(3,), flops=120 * p, operations=60)
