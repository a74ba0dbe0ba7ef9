"""GradBench's `det` eval: the determinant by expansion by minors, from cmpad's `det_by_minor`
(evals/det/README.md)."""
from __future__ import annotations

import math

import numpy as np

from adcompare import Shapes, problem

from .gradbench_draws import replay
from .json_inputs import exact_keys, read_json_object

DET_ELL = (5, 6, 7, 8, 9, 10, 11)  # run.py's -l default


def det_of_minor(entries, rows, columns):
    """The determinant of the minor of `entries` (a list of rows of scalars) on `rows` × `columns` (tuples of
    indices), expanded along its first row as det.hpp's det_of_minor does: Σⱼ (−1)ʲ M₀ⱼ det(Sⱼ), Sⱼ the sub-minor
    without row 0 and column j, accumulated left to right, each term added or subtracted by its sign."""
    top = entries[rows[0]]
    if len(rows) == 1:
        return top[columns[0]]
    total = None
    for j, column in enumerate(columns):
        term = top[column] * det_of_minor(entries, rows[1:], columns[:j] + columns[j + 1:])
        if total is None:
            total = term  # det.hpp starts from detM = 0; 0 + term is term exactly
        else:
            total = total + term if j % 2 == 0 else total - term
    return total


@problem(sizes=[{"ell": ell} for ell in DET_ELL], wrt="A", tags=("classic", "scalar-output", "wide"),
         operators=("value", "grad"), complex_step_safe=True)
def det(A, /, *, xp):
    """GradBench's determinant by expansion by minors (evals/det/README.md; cmpad's det_by_minor;
    cpp/gradbench/evals/det.hpp): R^(ℓ×ℓ) → R,

        det(M) = Σⱼ (−1)ʲ M₀ⱼ det(M without row 0 and column j),   det of a 1 × 1 minor = its entry,

    recursively from the whole matrix down to 1 × 1 minors: about e·ℓ! scalar multiply-adds (ℓ = 11: 10⁸), each
    on one scalar, which is the point of the eval — nothing vectorises, and a tracing compiler sees every scalar
    operation (GradBench: "extremely scalar-oriented, and based on recursion"). The entries are read once as
    scalars (A[i, j]); the recursion then only multiplies, adds and subtracts them, in det.hpp's order (the first
    row of each minor, columns left to right, alternating signs). The gradient w.r.t. A is the cofactor matrix
    (GradBench's manual tool computes it so), returned here in A's (ℓ, ℓ) shape; GradBench's A and gradient are
    the same numbers row-major flattened. GradBench's functions: `primal` (the value) and `gradient` (`grad`).
    Inputs: GradBench's generator (python/gradbench/gradbench/evals/det/run.py), `np.random.seed(31337)` then
    `np.random.rand(ℓ·ℓ)` for ℓ = 5 … 11 in turn, replayed draw for draw (problems/gradbench_draws.py), reshaped
    row-major. Sizes: those ℓ; eager frameworks dispatch each scalar operation (~µs each), so ℓ ≥ 9 takes seconds
    to hours a call, and compilers trace ℓ!-sized graphs: expect timeouts from ℓ ≈ 8 on.
    """
    ell = A.shape[0]
    entries = [[A[i, j] for j in range(ell)] for i in range(ell)]
    return det_of_minor(entries, tuple(range(ell)), tuple(range(ell)))


@det.analytic("value")
def determinant_by_lu(A, /):
    """The reference's value: det(A) by LU (LAPACK through NumPy), the expansion by minors' number to rounding
    (2·10⁻¹⁶ to 3·10⁻¹⁵ relative at ℓ = 5 … 9) in O(ℓ³). The recursion itself through NumPy took 5 s at ℓ = 10 and
    about as long as autograd's own call at ℓ = 11, where the two together ran past the cell's timeout."""
    return np.linalg.det(A)


@det.analytic("grad")
def cofactors(A, /):
    """The reference's gradient: the cofactor matrix, Cᵢⱼ = (−1)^(i+j) det(A without row i and column j), each
    minor's determinant by LU (ℓ² of them: no inverse, so no trouble where A is near singular). GradBench's manual
    tool computes the same cofactors."""
    ell = A.shape[0]
    keep = [np.delete(np.arange(ell), i) for i in range(ell)]
    return np.array([[(-1) ** (i + j) * np.linalg.det(A[np.ix_(keep[i], keep[j])]) for j in range(ell)]
                     for i in range(ell)])


@det.inputs
def _(rng, ell):
    return {"A": replay(rng, [(k,) for k in DET_ELL], [k * k for k in DET_ELL], (ell,)).reshape(ell, ell)}


def minor_expansion_operations(ell: int) -> int:
    """Scalar operations of the recursion: ℓ!/k! minors of size k × k are expanded (k ≥ 2), each with k products
    and k − 1 additions, after ℓ² reads of the entries."""
    return sum(math.perm(ell, ell - k) * (2 * k - 1) for k in range(2, ell + 1)) + ell * ell


@det.shapes
def _(ell):
    ops = minor_expansion_operations(ell)
    return Shapes(wrt=(ell, ell), output=(), flops=ops, operations=ops)


@det.reads
def read_gradbench(path):
    """GradBench's det input as JSON (its DetInput: A, the ℓ × ℓ matrix's ℓ² entries row-major, and ℓ as `ell`;
    min_runs and min_seconds, if present, are ignored), plain or gzipped."""
    data = read_json_object(path, "GradBench's det input (a JSON object with A, a list of ell² numbers, and ell)",
                            valid=exact_keys(("A", "ell")))
    entries, ell = np.asarray(data["A"], dtype=np.float64), data["ell"]
    if not isinstance(ell, int) or ell < 1 or entries.shape != (ell * ell,):
        raise ValueError(f"{path}: GradBench's det input needs A with ell² numbers for ell ≥ 1; found ell = {ell!r} "
                         f"and A of shape {entries.shape}")
    return {"ell": ell}, {"A": entries.reshape(ell, ell)}
