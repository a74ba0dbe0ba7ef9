"""GradBench's `kmeans` eval: the k-means cost and its Newton direction (evals/kmeans/README.md, commit f26651a7)."""
from __future__ import annotations

import numpy as np

from adcompare import Shapes, grid, problem

from .gradbench_draws import replay
from .json_inputs import read_json_object

KMEANS_K = (10, 100, 1000)  # run.py's -k default
KMEANS_N = (1000, 10000)  # run.py's -n default
KMEANS_D = (8, 16)  # run.py's -d default
# GradBench draws the sizes sorted by k·n·d (Python's stable sort of [(k, n, d) for k in K for n in N for d in D]).
KMEANS_ORDER = sorted(((k, n, d) for k in KMEANS_K for n in KMEANS_N for d in KMEANS_D),
                      key=lambda v: v[0] * v[1] * v[2])
INPUT_KEYS = ("points", "centroids")  # GradBench's KMeansInput


@problem(sizes=grid(k=KMEANS_K, n=KMEANS_N, d=KMEANS_D), wrt="centroids", tags=("classic", "scalar-output", "wide"),
         operators=("value", "grad", "newton_dir"))
def kmeans(centroids, /, *, points, xp):
    """GradBench's k-means cost (evals/kmeans/README.md; cpp/gradbench/evals/kmeans.hpp): R^(k×d) → R,

        f(C) = Σᵢ minⱼ |Cⱼ − Pᵢ|²

    over n points Pᵢ (the constant `points`, (n, d)) and k centroids Cⱼ (`centroids`, (k, d), differentiated).
    Written as GradBench's jax and pytorch tools write it (tools/jax/kmeans.py `costfun`): the squared distances
    all at once as |Pᵢ|² + |Cⱼ|² − 2·Pᵢ·Cⱼ, one (n, k) matrix product, then the minimum over centroids and the sum
    over points (not the manual tool's loop, which differs from it in rounding only). GradBench's functions:
    `cost` (`value`) and `dir` (`newton_dir`): J ⊘ diag(H), Newton's step for this cost, whose Hessian is
    diagonal (each centroid's coordinates enter only their own squared distances: ∂²f/∂Cⱼₗ² = 2·|Sⱼ|, Sⱼ the points
    nearest Cⱼ), so dir = Cⱼ − mean(Sⱼ), what GradBench's manual tool computes. Its tools take diag(H) as H·1 (the
    JVP of the gradient along ones), valid because H is diagonal; the adapters do the same. `grad` is J alone.
    Inputs: GradBench's generator (python/gradbench/gradbench/evals/kmeans/run.py), `np.random.seed(31337)`, then
    per size in order of k·n·d `points = np.random.rand(n, d)` and `centroids = points[-k:]` (so every centroid
    has a point, and H is invertible), replayed draw for draw (problems/gradbench_draws.py); or GradBench's JSON
    input (`--inputs FILE.json`: points and centroids as lists of rows). Sizes: its defaults, k = 10, 100, 1000 ×
    n = 1000, 10000 × d = 8, 16. A point equidistant from two centroids makes f non-differentiable there (the
    minimum's derivative picks one); GradBench's inputs have none.
    """
    points_sq = xp.sum(points * points, axis=1)  # (n,)
    centroids_sq = xp.sum(centroids * centroids, axis=1)  # (k,)
    cross = xp.matmul(points, xp.permute_dims(centroids, (1, 0)))  # (n, k): Pᵢ·Cⱼ
    distances = xp.expand_dims(points_sq, axis=1) + xp.expand_dims(centroids_sq, axis=0) - 2 * cross
    return xp.sum(xp.min(distances, axis=1))


@kmeans.inputs
def _(rng, k, n, d):
    points = replay(rng, KMEANS_ORDER, [n_ * d_ for _, n_, d_ in KMEANS_ORDER], (k, n, d)).reshape(n, d)
    return {"centroids": points[-k:].copy(), "points": points}


@kmeans.analytic("newton_dir")
def newton_direction(centroids, /, *, points):
    """Cⱼ − mean(Sⱼ) (GradBench's manual tool's `dir`): J ⊘ diag(H) with Jⱼ = Σ_{i∈Sⱼ} 2(Cⱼ − Pᵢ), diag(H)ⱼ = 2|Sⱼ|,
    Sⱼ the points nearest Cⱼ by NumPy's argmin (the first of tied centroids). The float64 reference, since
    second differences cross the minimum's kinks at GradBench's sizes."""
    # (n, k) squared distances as the cost computes them: an (n, k, d) difference would take 1.3 GB at the largest size
    distances = (points * points).sum(axis=1)[:, None] + (centroids * centroids).sum(axis=1)[None, :] \
        - 2 * points @ centroids.T
    nearest = distances.argmin(axis=1)
    counts = np.bincount(nearest, minlength=len(centroids)).astype(np.float64)
    sums = np.zeros_like(centroids)
    np.add.at(sums, nearest, points)
    return centroids - sums / counts[:, None]


@kmeans.shapes
def _(k, n, d):
    return Shapes(wrt=(k, d), output=(), flops=3 * n * k * d, operations=9)


def _rows_of_one_width(data: dict) -> bool:
    """points and centroids are non-empty lists of rows whose first rows have the same d ≥ 1 (what the header
    reads; the reader checks every row when it builds the arrays)."""
    points, centroids = data["points"], data["centroids"]
    return all(isinstance(rows, list) and rows and isinstance(rows[0], list) for rows in (points, centroids)) \
        and len(points[0]) == len(centroids[0]) > 0


def _gradbench_json(path: str) -> dict:
    """GradBench's kmeans input: a JSON object with `points` (n rows of d) and `centroids` (k rows of d)."""
    return read_json_object(path, "GradBench's kmeans input (a JSON object with points, n ≥ 1 rows of d ≥ 1 "
                                  "numbers, and centroids, k ≥ 1 rows of the same d)", INPUT_KEYS,
                            valid=_rows_of_one_width)


@kmeans.reads_header
def read_header(path):
    """k, n, d from GradBench's JSON (it has no header: parsed, but no arrays built)."""
    data = _gradbench_json(path)
    points, centroids = data["points"], data["centroids"]
    return {"k": len(centroids), "n": len(points), "d": len(points[0])}


@kmeans.reads
def read_gradbench(path):
    """GradBench's kmeans input as JSON: points (n × d) and centroids (k × d), row-major lists of rows."""
    data = _gradbench_json(path)
    points, centroids = np.asarray(data["points"], dtype=np.float64), np.asarray(data["centroids"], dtype=np.float64)
    if points.ndim != 2 or centroids.ndim != 2 or points.shape[1] != centroids.shape[1] or not len(centroids):
        raise ValueError(f"{path}: GradBench's kmeans input needs points (n rows of d numbers) and centroids (k ≥ 1 "
                         f"rows of the same d); found shapes {points.shape} and {centroids.shape}")
    k, n, d = centroids.shape[0], *points.shape
    return {"k": k, "n": n, "d": d}, {"centroids": centroids, "points": points}
