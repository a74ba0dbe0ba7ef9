"""Agreement of a cell's result: against the float64 reference, across adapters, and by the adjoint identity.

The error measure (`scaled_error`) and the tolerance policy by dtype (`tolerance`) live in tolerance.py;
`check_result` hands it the values the result is compared with, for its normwise term. The same
tolerance judges the reference error, the pairwise error and the adjoint error, so `status_of` gives the same
verdict whoever calls it and the tolerance printed beside each error is the one that was applied.

Dtype drift (a float64 result from a float32 cell) is reported in `Check.dtype_drift` and `describe`, not cast
away and not a mismatch: the values are compared as returned, in float64, and are right; the drift is a finding
about the framework (and about its timings) that the report shows next to the cell.

Pairwise agreement and the adjoint test compare one seeded scalar per cell, `Check.projection` (e.g. uᵀ·R·v),
so cells computed in different workers, runs or machines can be compared without keeping their arrays.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache, partial

import numpy as np

from adcompare.model.measurement import Check, Measurement
from adcompare.model.operators import NESTED, spec
from adcompare.model.problem import Problem, Size, output_shape, shapes_of
from adcompare.model.status import Status
from adcompare.plugin.adapter import CellInputs
from adcompare.verify.cell_inputs import seeded_vector
from adcompare.verify.reference import Direction, Reference, reference
from adcompare.verify.tolerance import all_finite, scaled_error, tolerance

PROJECTION_SEED = 7_000_001  # weights of the per-example projections: the same in every process


def check_result(problem: Problem, size: Size | str, operator: str, dtype: str, inputs: CellInputs,
                 result: np.ndarray) -> Check:
    """Compare one cell's result with the float64 reference; fill the projection used by `cross_check`."""
    size = problem.size(size) if isinstance(size, str) else size
    result = np.asarray(result)
    ref = reference(problem, size, operator, inputs)
    if ref.value is not None and tuple(result.shape) != tuple(ref.value.shape):
        raise ValueError(f"problem {problem.name!r} at {size.label}: {operator} result has shape "
                         f"{tuple(result.shape)}, the reference {tuple(ref.value.shape)}")
    output_dtype = str(result.dtype)
    # What the result is compared with, for the tolerance's normwise term: the full reference or the directional values
    expected = ref.value if ref.value is not None else tuple(d.expected for d in ref.directional)
    checked = partial(Check, tolerance=tolerance(dtype, ref, expected), reference_method=ref.method,
                      output_dtype=output_dtype, dtype_drift=output_dtype != dtype)
    if not np.issubdtype(result.dtype, np.floating):
        return checked(error=None, nonfinite=True)
    if weighs_rows(operator, result.shape) and _streamable(ref, result.shape):  # finiteness too, chunk by chunk
        streamed = _per_example_check(result, ref)
        if streamed is None:
            return checked(error=None, nonfinite=True)
        return checked(error=streamed[0], projection=streamed[1], projection_weights=PER_EXAMPLE_WEIGHTS)
    if not all_finite(result):
        return checked(error=None, nonfinite=True)
    r64 = result.astype(np.float64, copy=False)  # a float64 result as it is: a copy of BA's cost 1 s
    if ref.value is not None:
        error = scaled_error(r64, ref.value)
    else:
        error = max(scaled_error(d.apply(r64), d.expected) for d in ref.directional)
    return checked(error=error, projection=projection(problem, size, operator, dtype, r64, np.shape(inputs.wrt)),
                   projection_weights=PER_EXAMPLE_WEIGHTS if weighs_rows(operator, r64.shape) else "")


def status_of(check: Check) -> Status:
    """NAN for a non-finite result; MISMATCH when any error (reference, pairwise, adjoint) exceeds the tolerance."""
    if check.nonfinite:
        return Status.NAN
    worst = worst_error(check)
    if worst is not None and not worst <= check.tolerance:  # `not <=` also catches NaN
        return Status.MISMATCH
    return Status.OK


def worst_error(check: Check) -> float | None:
    """The largest of the reference, pairwise and adjoint errors that were computed (None when none was)."""
    errors = [e for e in (check.error, check.pairwise_error, check.adjoint_error) if e is not None]
    if not errors:
        return None
    return math.nan if any(math.isnan(e) for e in errors) else max(errors)


def describe(check: Check) -> str:
    """One line for messages and tables: each error beside the tolerance, the method, and any dtype drift."""
    if check.nonfinite:
        text = "result contains NaN or Inf"
    else:
        parts = [f"{name} {value:.2e}" for name, value in (("error", check.error), ("pairwise", check.pairwise_error),
                                                            ("adjoint", check.adjoint_error)) if value is not None]
        text = f"{', '.join(parts) or 'not compared'} (tolerance {check.tolerance:.1e}; {check.reference_method})"
    if check.dtype_drift:
        text += f"; dtype drift: result is {check.output_dtype}"
    return text


# ---------------------------------------------------------------------------------------------------------------
# The seeded projection


@lru_cache(maxsize=64)
def _seeded_vectors(out_shape: tuple[int, ...], wrt_shape: tuple[int, ...], dtype: str
                    ) -> tuple[np.ndarray, np.ndarray]:
    """u (shape of f(x)) and v (shape of wrt): the very cotangent and tangent the vjp and jvp cells are given,
    drawn without building those cells' inputs (two builds of BA's largest inputs cost its value cell 3.5 s)."""
    return (np.asarray(seeded_vector(out_shape, dtype), dtype=np.float64),
            np.asarray(seeded_vector(wrt_shape, dtype), dtype=np.float64))


def _contract(left: np.ndarray | None, r: np.ndarray, right: np.ndarray | None) -> float:
    if right is not None:
        r = np.tensordot(r, right, axes=right.ndim)
    if left is not None:
        r = np.tensordot(left, r, axes=left.ndim)
    return float(r)


# Check.projection_weights of a per-example result: weight aᵢ·bⱼ for entry j of example i (a, b seeded normals), so
# the projection is a·(R·b). Before schema 4 each entry drew its own normal: 56 M draws, 1.3 s, for BA's per-example
# Jacobian at p = 1,255,268, more than the rest of its check; a·(R·b) takes 0.05 s and, for a and b random, still
# tells any two different results apart (almost surely). A value with rows is weighed so too, row i as example i.
PER_EXAMPLE_WEIGHTS = "per example × per entry"


def weighs_rows(operator: str, shape: tuple[int, ...]) -> bool:
    """Whether a result's projection is a·(R·b) (PER_EXAMPLE_WEIGHTS): a per-example result, its rows its examples,
    or a value of two axes or more, row by row (BA's (p, 3) residuals: ⟨u, f⟩ drew 87 M normals at p = 28,987,644,
    2-3 s of its first value cell in each worker, where a·(R·b) draws p + 3 and its check streams)."""
    return spec(operator).per_example or (operator == "value" and len(shape) >= 2)


def _per_example_weights(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(PROJECTION_SEED)
    return rng.standard_normal(shape[0]), rng.standard_normal(int(np.prod(shape[1:], dtype=np.int64)))


# A per-example result is the largest a check sees (BA's vmap_jacfwd at p = 1,255,268: 56 M floats). Made float64
# whole, it was a fresh 450 MB array (0.55-0.83 s here, most of it the page faults of the new allocation) read four
# times more (each direction's R·v, the error, the projection), and each comparison made arrays of p entries more.
# Taken STREAM_ELEMENTS at a time along its examples, each chunk made float64 once and compared where it lies, it
# is read once, for the same comparisons, in cache-sized temporaries: 0.6 s → 0.1 s.
STREAM_ELEMENTS = 1 << 17


def _streamable(ref: Reference, shape: tuple[int, ...]) -> bool:
    """Whether every comparison of `ref` splits along the leading (example) axis of a result of `shape`: a full
    reference elementwise (its shape checked before), a direction contracting trailing axes only and, on the left,
    at most the example axis, with as many examples as the result, or picking seeded rows (examples, ascending)
    the result has (pmap_grad's directions contract the whole result: those take the whole-array path, as does a
    result short of a direction's rows, which fails there)."""
    if not shape:
        return False
    if ref.value is not None:
        return True
    return all(_splits_by_example(d, shape) for d in ref.directional)


def _splits_by_example(d: Direction, shape: tuple[int, ...]) -> bool:
    """Whether one direction's comparison splits along a result's examples (`_streamable`)."""
    if d.right is not None and d.right.ndim >= len(shape):
        return False
    if d.rows is not None:
        return d.left is None and len(d.rows) > 0 and int(d.rows[-1]) < shape[0] and bool(np.all(np.diff(d.rows) > 0))
    if d.left is not None:
        return d.left.shape == shape[:1]
    return np.shape(d.expected)[:1] == shape[:1]


def _per_example_check(result: np.ndarray, ref: Reference) -> tuple[float, float] | None:
    """The reference error and the projection a·(R·b) of a per-example result, in one pass over its examples:
    the same numbers as the whole-array path (the error is a maximum over entries, taken chunk by chunk; a
    direction with a left contraction sums its chunks first; the projection, summed by chunk, equal to rounding).
    None when the result holds a NaN or an infinity."""
    rows = np.atleast_1d(result)
    by_example, by_entry = _per_example_weights(rows.shape)
    value = None if ref.value is None else np.atleast_1d(ref.value)
    step = max(1, STREAM_ELEMENTS // max(1, by_entry.size))
    errors: list[float] = []
    sums: list[np.ndarray | float] = [0.0] * len(ref.directional)  # Σᵢ leftᵢ·(R·v)ᵢ, for directions with a left
    fingerprint = 0.0
    for start in range(0, max(rows.shape[0], 1), step):  # one pass even over no example
        end = start + step
        chunk = rows[start:end].astype(np.float64)
        if not all_finite(chunk):
            return None
        fingerprint += float(by_example[start:end] @ (chunk.reshape(len(chunk), by_entry.size) @ by_entry))
        if value is not None:  # a full reference is what the result is compared with, as in the whole-array path
            errors.append(scaled_error(chunk, value[start:end]))
            continue
        for k, d in enumerate(ref.directional):
            if d.rows is not None:  # seeded rows: those of this chunk, against their part of `expected`
                part = d.rows_between(start, end)
                if part.stop > part.start:
                    picked = replace(d, rows=d.rows[part] - start).apply(chunk)
                    errors.append(scaled_error(picked, d.expected[part]))
                continue
            piece = d.apply(chunk, slice(start, end))
            if d.left is None:
                errors.append(scaled_error(piece, d.expected[start:end]))
            else:
                sums[k] = sums[k] + piece
    if value is None:
        errors += [scaled_error(sums[k], d.expected) for k, d in enumerate(ref.directional) if d.left is not None]
    return float(np.max(errors)), fingerprint  # np.max: a NaN error stays NaN


def projection(problem: Problem, size: Size, operator: str, dtype: str, result: np.ndarray,
               wrt_shape: tuple[int, ...] | None = None) -> float:
    """A seeded scalar fingerprint of a result, equal across processes and machines for equal results.

    Built from the cell's own seeded u and v so that jvp gives ⟨u, J·v⟩ and vjp gives ⟨uᵀ·J, v⟩ (the adjoint
    identity), jacfwd/jacrev give uᵀ·J·v (the same number), hvp ⟨H·v, v⟩ and hessian vᵀ·H·v (the same number).
    A per-example result, or a value with rows, is a·(R·b) instead (`weighs_rows`).
    """
    r = np.asarray(result, dtype=np.float64)
    if weighs_rows(operator, r.shape):
        rows = np.atleast_1d(r)  # pmap_grad's result has x's shape, a scalar x included
        by_example, by_entry = _per_example_weights(rows.shape)
        return float(by_example @ (rows.reshape(rows.shape[0], -1) @ by_entry))
    wrt_shape = shapes_of(problem, size).wrt if wrt_shape is None else tuple(wrt_shape)
    u, v = _seeded_vectors(output_shape(problem, size), wrt_shape, dtype)
    if spec(operator).family == NESTED:  # the function's own output, its derivatives taken inside it
        return _contract(u, r, None)
    left, right = {
        "value": (u, None), "jvp": (u, None), "vjp": (None, v), "grad": (None, v),
        "jacfwd": (u, v), "jacrev": (u, v), "hvp": (None, v), "hessian": (v, v), "newton_dir": (None, v),
    }[operator]
    return _contract(left, r, right)


# ---------------------------------------------------------------------------------------------------------------
# Across cells


def _comparable(m: Measurement) -> bool:
    return (m.status in (Status.OK, Status.MISMATCH) and m.check is not None and m.check.projection is not None
            and math.isfinite(m.check.projection))


def _check(m: Measurement) -> Check:
    """The check of a cell `_comparable` admitted."""
    assert m.check is not None, f"{m.cell.id} has no check: only comparable cells are cross-checked"
    return m.check


def _projection(m: Measurement) -> float:
    """The seeded projection of a cell `_comparable` admitted."""
    projection = _check(m).projection
    assert projection is not None, f"{m.cell.id} has no projection: only comparable cells are cross-checked"
    return projection


def _failed_reference(m: Measurement) -> bool:
    """The cell's own reference check already failed: it is wrong, so it must not outvote or blame a right cell."""
    check = _check(m)
    return check.error is not None and not check.error <= check.tolerance  # `not <=` also catches NaN


def _voter(m: Measurement) -> bool:
    return _comparable(m) and not _failed_reference(m)


def _name(m: Measurement) -> str:
    return f"{m.cell.adapter}/{m.cell.variant}/{m.cell.device}"


def cross_check(measurements: Sequence[Measurement]) -> list[Measurement]:
    """Pairwise agreement and the adjoint identity across finished cells; same order, updated copies.

    Pairwise: among cells with equal `Cell.comparable`, a cell's pairwise error is the smallest error within
    which it agrees with at least half of the others — with three or more cells the odd one out is flagged and
    the majority is not; two that disagree are both flagged, since nothing says which is right.
    Adjoint: an adapter's jvp and vjp cells (same variant, device, dtype, problem, size) must give
    ⟨u, J·v⟩ = ⟨Jᵀ·u, v⟩ for the seeded u, v. An `ok` cell beyond its tolerance becomes `mismatch`.
    A cell that failed its own reference check takes part in neither: it is known wrong, and counting it made
    a right cell `mismatch` for disagreeing with it (JAX's eager jacrev of bundle_adjustment against the
    compiled cell that jaxlib 0.10.2 computes wrongly). It keeps its reference verdict.
    """
    out = list(measurements)
    notes: dict[int, list[str]] = defaultdict(list)
    updates: dict[int, dict] = defaultdict(dict)

    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, m in enumerate(out):
        if _voter(m):  # across machines too: a derivative is the same everywhere; alike weights only
            groups[(m.cell.comparable, _check(m).projection_weights)].append(i)
    for members in groups.values():
        if len(members) < 2:
            continue
        for i in members:
            p, tol = _projection(out[i]), _check(out[i]).tolerance
            others = sorted((scaled_error(p, _projection(out[j])), j) for j in members if j != i)
            error = others[math.ceil(len(others) / 2) - 1][0]
            updates[i]["pairwise_error"] = error
            if not error <= tol:
                away = [(e, j) for e, j in others if not e <= tol]
                named = ", ".join(f"{_name(out[j])} ({_projection(out[j]):.10g}, error {e:.1e})"
                                  for e, j in away[-3:][::-1])
                notes[i].append(f"disagrees with {len(away)} of {len(others)} other cells on the seeded projection "
                                f"({p:.10g}): {named}; tolerance {tol:.1e}")

    pairs: dict[tuple, dict[str, int]] = defaultdict(dict)
    for i, m in enumerate(out):
        if m.cell.operator in ("jvp", "vjp") and _voter(m):
            pairs[m.twin_key(operator="jvp")][m.cell.operator] = i  # a jvp cell and its vjp twin
    for pair in pairs.values():
        if len(pair) != 2:
            continue
        i, j = pair["jvp"], pair["vjp"]
        error = scaled_error(_projection(out[i]), _projection(out[j]))
        for a, b in ((i, j), (j, i)):
            updates[a]["adjoint_error"] = error
            if not error <= _check(out[a]).tolerance:
                notes[a].append(f"adjoint identity fails against {out[b].cell.id}: ⟨u, J·v⟩ = "
                                f"{_projection(out[i]):.10g}, ⟨Jᵀ·u, v⟩ = {_projection(out[j]):.10g}, "
                                f"error {error:.1e} > tolerance {_check(out[a]).tolerance:.1e}")

    for i, fields in updates.items():
        m = out[i]
        check = replace(_check(m), **fields)
        status = Status.MISMATCH if m.status is Status.OK and status_of(check) is Status.MISMATCH else m.status
        message = "; ".join([m.message, *notes[i]] if m.message else notes[i])
        out[i] = replace(m, check=check, status=status, message=message)
    return out
