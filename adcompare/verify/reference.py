"""Independent float64 reference results, computed through the NumPy namespace and never through an AD framework.

A framework's derivative is only worth timing if it is right, and "right" has to be decided by something that
shares none of its code: the problem evaluated by NumPy (an Array API namespace since NumPy 2) and differenced.

- The point is float64 of the cell's inputs (float64(float32(x)) for float32 cells): the point the framework saw.
- First derivatives: complex step (exact to rounding) when the problem declares `complex_step_safe` *and* a
  seeded complex-step directional derivative agrees with central differences (complex step is silently wrong
  through `abs`, `maximum`, `where`, or NumPy's conjugating `vecdot(x, x)`); otherwise central differences with
  a step per input scale, h = eps^(1/3)·max(1, |xᵢ|), and a Richardson error estimate (the same difference at 2h).
- Second derivatives: central differences of that gradient (outer step eps^(1/3) over a complex-step gradient,
  eps^(1/4) over a central-difference one), again with a Richardson estimate; Hessians are symmetrised.
- Analytic: where the problem declares its own closed form of the operator (`@<problem>.analytic(operator)`,
  hand-written NumPy at float64), that is the reference, with a rounding-level error bound; it shares no code
  with a framework. kmeans does for `newton_dir`: its minimum's kinks lie closer than a second difference's step;
  det for `value` and `grad`: its ℓ! recursion in NumPy took as long as a framework's call (5 s at ℓ = 10, past the
  cell's timeout beside autograd's 56 s call at ℓ = 11), where LU takes microseconds; gmm and gmm_posterior for
  `value` and `grad`: their objective through NumPy builds (K, d, n) arrays (8.6-10 s a value at d64-K200-n10000),
  the closed forms a component and a block of points at a time (0.8 s and 2.5 s), the whole gradient checked.
- `newton_dir` (∇f ⊘ diag ∇²f) without a closed form: per coordinate, the gradient entry by the first-derivative
  route and the Hessian's diagonal entry by a second central difference along that coordinate,
  (f(x + t·eᵢ) − 2f(x) + f(x − t·eᵢ)) / t² with t = eps^(1/4)·max(1, |xᵢ|) (rounding ~eps·|f|/t², truncation
  O(t²)); its error estimate is the quotient at t against the quotient at 2t. The true diagonal, not ∇²f·1 as
  the frameworks compute it: where the problem's claim of a diagonal Hessian is false, the two differ and the
  cell fails. Past the budget it checks a seeded subset of coordinates (R·eᵢ).
- Cost: the number of evaluations a full reference needs times the measured time of one NumPy evaluation
  (best of three). Counting elements or flops was tried and misjudged by 50× (GMM's evaluation is dominated by
  n·K·d² work on data that a size count does not see; small problems by ~35 µs of call overhead). A full
  reference that would take more than `FULL_REFERENCE_BUDGET` seconds falls back to directional checks against
  seeded vectors (J·v; for second order H·v, then wᵀ·H·v) and `Reference.method` says so. Near the budget,
  two machines may choose differently; the method is recorded with every check.
- Rounding: for cells below float64, `rounding_error` estimates what the cell's own precision costs a correct
  derivative: the complex step evaluated in the matching complex precision (complex64 for float32), which
  propagates derivatives like forward mode, compared with the float64 reference along seeded directions. It is
  measured only where the complex step is verified against central differences at float64, whatever the
  problem declares (it only widens the tolerance; it never replaces the reference).
- Per-example and data-parallel operators: every example's derivative from evaluations of the whole batch,
  f(w, batch), whose row i is f(w, bᵢ) (checked at the point and nearby for the first, last and seeded rows;
  a large batch is evaluated in blocks of rows, and checked on one block of such rows):
  differencing it along v gives every Jᵢ·v at once, the same numbers as differencing each example (the step
  depends on w and v only), at the price of a few NumPy evaluations instead of one Python call per example.
  Where the batch is not evaluated that way (a problem that mixes examples), a seeded subset of examples is
  checked, each against its slice of the result; a data-parallel mean then calls every example.
- Every path honours the budget: directional checks too are cut to what it buys (never fewer than one). A value
  with a large batch whose rows are the examples' own (checked as above) is evaluated in blocks of rows, which
  NumPy does 3-4× faster than the whole batch at once; past the budget, on seeded blocks (BA's largest value:
  29 million observations). So is a per-example derivative whose one direction of the whole batch is past it:
  Jᵢ·v along one seeded v for the examples of seeded blocks (BA's per-example Jacobians at p = 4-5 million).
- Nested operators (`nested_ff` …, derivatives taken inside the problem): the problem's closed form where it
  declares one (saddle, particle: the same algorithm with exact derivatives); otherwise the problem through NumPy,
  whose `adcompare.grad` takes central differences, with a stated error bound of 1e-5 (differences of differences).

Results are cached per (problem, size, operator, dtype, inputs) within the process: every adapter and variant of
a worker checks against the same reference, computed once; and across a run's workers through its cache directory
(shared_references.py), so that each is differenced once per run. The differencing itself (J·v, Jacobians, second
orders, the price of an evaluation, complex step or not) is differencing.py's.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import pickle
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from adcompare.model.operators import NESTED, spec
from adcompare.model.problem import Problem, Size
from adcompare.plugin.adapter import CellInputs
from adcompare.verify import shared_references
from adcompare.verify.differencing import (
    DIRECTION_SEED,
    EPS,
    FLOOR,
    Differ,
    Function,
    SecondOrder,
    central,
    choose,
    choose_along,
    complex_step_works,
    jacobian,
    seconds_per_evaluation,
)
from adcompare.verify.tolerance import all_finite, scaled_error

FULL_REFERENCE_BUDGET = 2.0  # seconds of differencing above which only directional checks are made
BATCH_BLOCK = 10_000  # rows of a large batch (4 blocks or more) evaluated at once
T = TypeVar("T")  # what evaluating a block of a large batch gives (_PricedBlocks)
DIRECTIONS = 3  # seeded directions per directional check
NEWTON_COORDINATES = 64  # the most coordinates a directional newton_dir reference checks (each one a Direction)


class ReferenceError(ValueError):
    """The float64 reference itself cannot be computed (not finite at the point, wrong output kind)."""


@dataclass(frozen=True, eq=False)
class Direction:
    """One directional comparison: contract the result with `left` over its leading axes and `right` over its
    trailing axes, then compare with `expected` (computed from the differenced function, not from a Jacobian)."""

    expected: np.ndarray
    right: np.ndarray | None = None
    left: np.ndarray | None = None
    rows: np.ndarray | None = None  # indices along the leading axis, taken first (a value checked on seeded rows)

    def apply(self, result: np.ndarray, examples: slice | None = None) -> np.ndarray:
        """The contraction of `result`; with `examples`, of those examples (leading-axis entries) of a result
        taken in parts, whose left contraction then is its part of the whole's (check.py streams so)."""
        out = np.asarray(result, dtype=np.float64)
        if self.rows is not None:
            if out.ndim == 0 or out.shape[0] <= int(self.rows[-1]):
                raise ValueError(f"result of shape {out.shape} has no row {int(self.rows[-1])} to compare")
            out = out[self.rows]
        if self.right is not None:
            out = np.tensordot(out, self.right, axes=self.right.ndim)
        if self.left is not None:
            left = self.left if examples is None else self.left[examples]
            out = np.tensordot(left, out, axes=left.ndim)
        return np.asarray(out)

    def rows_between(self, start: int, end: int) -> slice:
        """Which of `rows` (sorted, as the references make them) lie in [start, end): a streamed check's part of
        `expected` for the result's examples start … end − 1."""
        assert self.rows is not None
        lo, hi = np.searchsorted(self.rows, [start, end])
        return slice(int(lo), int(hi))


@dataclass(frozen=True, eq=False)
class Reference:
    """The expected result of one operator at one point, or directional facts about it, and how good it is."""

    value: np.ndarray | None  # the operator's expected result in float64; None when only directional
    method: str  # e.g. "complex step, full Jacobian"; says "directional" when that is what was done
    error_bound: float  # estimated scaled truncation/rounding error of the reference (tolerance.scaled_error units)
    directional: tuple[Direction, ...] = ()
    cost: float = 0.0  # estimated seconds of differencing, from the timed evaluation (what the budget judged)
    seconds: float = 0.0  # wall time this process spent computing it
    rounding_error: float = 0.0  # estimated scaled error of a correct derivative computed in the cell's dtype
    order: int = 1  # 0 value, 1 first derivatives, 2 second derivatives (tolerances differ)
    shared: bool = False  # read from another worker of this run (shared_references.py), not differenced here


# ---------------------------------------------------------------------------------------------------------------
# The point


@dataclass(frozen=True, eq=False)
class _Point:
    """The cell's inputs in float64, bound through NumPy."""

    x: np.ndarray
    constants: dict[str, Any]
    batch: np.ndarray | None
    cell: CellInputs  # the same inputs in the cell's dtype, for the rounding probe
    tangent: np.ndarray | None
    cotangent: np.ndarray | None
    digest: str  # of everything, tangent and cotangent included
    where: str  # of the point alone (wrt, constants, batch): keys what several operators share

    # cell_inputs gives every cell of an operator that needs v, u or a batch one (a cell without is a harness bug)
    @property
    def v(self) -> np.ndarray:
        """The tangent of a jvp or hvp cell."""
        assert self.tangent is not None, "a jvp or hvp cell has a tangent"
        return self.tangent

    @property
    def u(self) -> np.ndarray:
        """The cotangent of a vjp cell."""
        assert self.cotangent is not None, "a vjp cell has a cotangent"
        return self.cotangent

    @property
    def examples_batch(self) -> np.ndarray:
        """The batch of a per-example or data-parallel cell."""
        assert self.batch is not None, "a per-example or data-parallel cell has a batch"
        return self.batch

    def function(self, problem: Problem) -> Function:
        return problem.bind(np, self.constants)

    def example(self, problem: Problem, i: int) -> Function:
        """f(w, bᵢ): example i of the batch alone."""
        fn, b = problem.bind(np, self.constants), self.examples_batch[i]
        return lambda w: fn(w, b)

    def whole_batch(self, problem: Problem) -> Function:
        """f(w, batch): the whole batch's per-example outputs stacked, where the problem broadcasts over its batch
        (`_batched` checks that it does before relying on it); a large batch in blocks of rows, which keeps
        NumPy's temporaries in cache (BA at 5.2 million observations: 1.5 s against 5.8 s at once)."""
        fn, b = problem.bind(np, self.constants), self.examples_batch
        if len(b) < 4 * BATCH_BLOCK:
            return lambda w: fn(w, b)
        edges = _block_edges(len(b))
        return lambda w: np.concatenate([np.asarray(fn(w, b[a:z])) for a, z in zip(edges, edges[1:])])


def _block_edges(count: int) -> list[int]:
    """Where a large batch's blocks start, and its end: blocks of BATCH_BLOCK rows, the last one up to twice
    that (never a block of a few rows)."""
    return [*range(0, count - BATCH_BLOCK, BATCH_BLOCK), count]


def _float64(value: Any) -> Any:
    array = np.asarray(value)
    return array.astype(np.float64, copy=False) if np.issubdtype(array.dtype, np.floating) else value


_BYTES_DIGESTS: dict[int, tuple[weakref.ref, str]] = {}  # large input arrays' digests while the arrays live
DIGEST_KEPT_ABOVE = 2**20  # bytes: a smaller array is hashed again, about as fast as looked up


def _bytes_digest(array: np.ndarray) -> str:
    """sha256 of a contiguous array's bytes (SHA-NI: 1.6× blake2b's here); a large read-only array's once while it
    lives: a cell's reference and check both build its point, and a worker's cells at one size share their
    read-only inputs (cell_inputs' `reuse`). BA's largest hold 3.9 GB, 6 s of hashing."""
    if array.dtype.hasobject:  # references, not values: the objects' pickle
        return hashlib.sha256(pickle.dumps(array.tolist())).hexdigest()
    large = array.nbytes > DIGEST_KEPT_ABOVE and not array.flags.writeable  # a writable one may change in place
    kept = _BYTES_DIGESTS.get(id(array)) if large else None
    if kept is not None and kept[0]() is array:
        return kept[1]
    digest = hashlib.sha256(array.reshape(-1).view(np.uint8).data).hexdigest()  # the bytes, uncopied
    if large:
        if len(_BYTES_DIGESTS) >= 16:
            _BYTES_DIGESTS.pop(next(iter(_BYTES_DIGESTS)))
        _BYTES_DIGESTS[id(array)] = (weakref.ref(array), digest)  # weak: never keeps a size's inputs alive
    return digest


def _digests(inputs: CellInputs) -> tuple[str, str]:
    """A digest of every input's name, dtype, shape and bytes, and one of the point alone (before the tangent).

    Where a worker built the point from its size and holds it read-only (`CellInputs.origin`), the point's digest
    is that of its origin, not of its bytes: every worker of a run builds the same arrays from it, and hashing
    them cost each worker's first cell at a size 2.3-2.9 s at BA's p = 28,987,644 (3.9 GB), 0.4 s at 5,213,733.
    The tangent and cotangent are hashed (seeded vectors: a wrt's or an output's size)."""
    point = [("wrt", inputs.wrt), ("batch", inputs.batch), *sorted(inputs.constants.items())]
    h = hashlib.sha256()
    if inputs.origin and not any(isinstance(v, np.ndarray) and v.flags.writeable for _, v in point):
        h.update(f"origin:{inputs.origin};".encode())
        point = []
    for name, value in [*point, ("tangent", inputs.tangent), ("cotangent", inputs.cotangent)]:
        if name == "tangent":
            where = h.hexdigest()
        array = np.ascontiguousarray(value) if value is not None else np.zeros(0)
        h.update(f"{name}:{array.dtype}:{array.shape}:{_bytes_digest(array)};".encode())
    return h.hexdigest(), where


def _point(inputs: CellInputs, digests: tuple[str, str] | None = None) -> _Point:
    """The float64 point of `inputs` (copies of float32 inputs: made only where a reference is differenced, not
    where it is found cached — BA's largest in float32 took 0.35 s to convert again for the check)."""
    digest, where = _digests(inputs) if digests is None else digests
    opt = lambda a: None if a is None else np.asarray(a, dtype=np.float64)  # noqa: E731
    return _Point(
        x=np.asarray(inputs.wrt, dtype=np.float64),
        constants={k: _float64(v) for k, v in inputs.constants.items()},
        batch=opt(inputs.batch), tangent=opt(inputs.tangent), cotangent=opt(inputs.cotangent),
        digest=digest, where=where, cell=inputs,
    )


def _rounding_error(problem: Problem, pt: _Point, operator: str, differ: Differ,
                    directions: list[np.ndarray]) -> float:
    """Scaled error of J·v computed by complex step in the cell's precision, against the float64 reference."""
    cell = pt.cell
    dtype = np.asarray(cell.wrt).dtype
    if dtype == np.float64 or not np.issubdtype(dtype, np.floating):
        return 0.0
    per_example = spec(operator).per_example
    f64 = pt.example(problem, 0) if per_example else pt.function(problem)
    if not differ.complex_step:
        key = (problem, pt.where, "complex step works", per_example)
        if key not in _SHARED:
            _SHARED[key] = complex_step_works(f64, pt.x)
        if _SHARED[key] is not None:
            return 0.0
    f_cell = problem.bind(np, dict(cell.constants))
    if per_example:
        example = np.asarray(cell.batch)[0]
        f_cell = (lambda fn: lambda w: fn(w, example))(f_cell)
    worst = 0.0
    h = float(np.finfo(dtype).eps) ** 2  # small enough that h² vanishes, large enough not to underflow
    for v in directions:
        v_cell = np.asarray(v).astype(dtype)
        try:
            with np.errstate(all="ignore"):
                low = np.imag(np.asarray(f_cell(np.asarray(cell.wrt) + (1j * h) * v_cell))).astype(np.float64) / h
        except Exception:
            return 0.0
        exact, _ = differ.along(f64, pt.x, v_cell.astype(np.float64), estimate=False)
        worst = max(worst, scaled_error(low, exact))
    return worst if math.isfinite(worst) else 0.0


def _directions(shape: tuple[int, ...], salt: int) -> list[np.ndarray]:
    rng = np.random.default_rng([DIRECTION_SEED, salt])
    return [rng.standard_normal(shape) for _ in range(DIRECTIONS)]


def _affordable(budget: float, each: float, most: int) -> int:
    """How many checks of `each` seconds the budget buys: at most `most`, at least one (a cell is never timed
    unchecked; one check over the budget is the least a reference can cost)."""
    return max(1, min(most, int(budget // each) if each > 0 else most))


def _shared(key: tuple, compute: Any) -> Any:
    """An intermediate result kept for the other operators at the same point (full Jacobians, batch checks)."""
    if key not in _SHARED:
        if len(_SHARED) >= _CACHE_LIMIT // 8:
            _SHARED.pop(next(iter(_SHARED)))
        _SHARED[key] = compute()
    return _SHARED[key]


# ---------------------------------------------------------------------------------------------------------------
# The batch: every example at once


def _batched(problem: Problem, pt: _Point) -> tuple[Function | None, str]:
    """(f(w, batch), "") where one evaluation of the whole batch gives every example's output, stacked; else
    (None, why not). Differencing it along v gives every example's Jᵢ·v at once, exactly as differencing each
    f(w, bᵢ) does (the step depends on w and v alone, shared by all examples), in one NumPy evaluation instead of
    one Python call per example (BA's 182,072 examples: 323 s before)."""
    why_not = _shared((problem, pt.where, "batched"), lambda: _batch_mismatch(problem, _probe(pt, pt.examples_batch)))
    return (None, why_not) if why_not else (pt.whole_batch(problem), "")


def _probe(pt: _Point, batch: np.ndarray) -> _Point:
    """The point with `batch` as its batch, or, where it is large, with one block of its rows: the first and last
    2,500 and 5,000 seeded ones between. A batch mean or norm shows in any rows; a statistic of a few rows
    (a maximum over the batch) shows only where the probe holds them, which a problem's contract rules out
    anyway (docs/problems.md: row i of f(w, batch) is f(w, bᵢ)), and a large batch is evaluated in blocks."""
    count = len(batch)
    if count >= 4 * BATCH_BLOCK:
        ends = BATCH_BLOCK // 4
        between = np.random.default_rng([DIRECTION_SEED, 9]).choice(np.arange(ends, count - ends), 2 * ends,
                                                                     replace=False)
        batch = batch[np.concatenate([np.arange(ends), np.sort(between), np.arange(count - ends, count)])]
    return dataclasses.replace(pt, batch=batch)


BATCH_PROBE_TOLERANCE = 1e-10  # scaled: rounding of a batched against a single evaluation (BLAS paths) is far below


def _batch_mismatch(problem: Problem, pt: _Point) -> str:
    """Why row i of f(w, batch) is not f(w, bᵢ), at the point and at a seeded nearby point, for the first, last
    and a few seeded examples; "" when it is. A problem that mixes examples (a batch norm, a mean over the batch)
    fails here and is referenced example by example instead."""
    count = len(pt.examples_batch)
    rng = np.random.default_rng([DIRECTION_SEED, 6])
    rows = sorted({0, count - 1, *(int(i) for i in rng.integers(0, count, size=min(count, 3)))})
    nearby = pt.x + 1e-3 * np.maximum(1.0, np.abs(pt.x)) * rng.standard_normal(pt.x.shape)
    whole_fn = pt.whole_batch(problem)
    for where, w in (("the point", pt.x), ("a nearby point", nearby)):
        try:
            with np.errstate(all="ignore"):
                whole = np.asarray(whole_fn(w), dtype=np.float64)
                ones = [np.asarray(pt.example(problem, i)(w), dtype=np.float64) for i in rows]
        except Exception as exc:  # e.g. a function written for one example only
            return f"f(w, batch) raised {type(exc).__name__}: {exc}"
        if whole.shape != (count, *ones[0].shape):
            return f"f(w, batch) has shape {whole.shape}, not (batch, *f(w, bᵢ).shape) = {(count, *ones[0].shape)}"
        for i, one in zip(rows, ones):
            gap = scaled_error(np.nan_to_num(whole[i]), np.nan_to_num(one))
            if not gap <= BATCH_PROBE_TOLERANCE:
                return f"row {i} of f(w, batch) differs from f(w, b{i}) by {gap:.1e} at {where}"
    return ""


# ---------------------------------------------------------------------------------------------------------------
# Per-operator references


def _value(problem: Problem, pt: _Point, operator: str, budget: float) -> Reference:
    if spec(operator).per_example:  # pmap_value: the per-example values
        whole, why_not = _batched(problem, pt)
        if whole is not None:
            value = np.asarray(whole(pt.x), dtype=np.float64)
            return Reference(value, "exact (per-example values by NumPy at float64, the whole batch at once)", 0.0)
        value = np.stack([np.asarray(pt.example(problem, i)(pt.x), dtype=np.float64)
                          for i in range(len(pt.examples_batch))])
        return Reference(value, f"exact (per-example values by NumPy at float64, one example at a time: "
                                f"{why_not})", 0.0)
    rows = _value_rows(problem, pt, budget)
    if rows is not None:
        return rows
    value = np.asarray(pt.function(problem)(pt.x), dtype=np.float64)
    return Reference(value, "exact (value by NumPy at float64)", 0.0)


VALUE_BLOCKS_SALT = 8  # the seeded order of a value reference's blocks


def _value_rows(problem: Problem, pt: _Point, budget: float) -> Reference | None:
    """The value of a problem whose batch is large (row i of f(w, batch) is f(w, bᵢ), checked as for per-example
    references, on a probe block) evaluated in blocks of rows (`_Point.whole_batch`): all of them where the
    budget allows, else seeded blocks, as many as it buys; None where there is no such batch, or its rows mix
    examples.

    Blocks of 10,000 rows keep NumPy's temporaries in cache: BA's value at 5.2 million observations takes 1.5 s
    that way, the same numbers, against 5.8 s for the whole batch at once. Its largest, 29 million, would take
    8 s or more, and 40 s whole (a framework's compiled call: 8 s), past a 60 s cell timeout; there seeded blocks
    are compared with those rows of the result, and the cross-check still compares every framework's whole
    result (its projection) with the others'. Slices of the batch are views: no row is copied."""
    if problem.batch is None or problem.batch not in pt.constants:
        return None
    batch = np.asarray(pt.constants[problem.batch])
    count = len(batch) if batch.ndim else 0
    if count < 4 * BATCH_BLOCK:
        return None
    rest = {k: v for k, v in pt.constants.items() if k != problem.batch}
    fn = problem.bind(np, rest)
    batched = dataclasses.replace(pt, constants=rest, batch=batch)
    if _batch_mismatch(problem, _probe(batched, batch)):
        return None  # rows that mix examples: only the whole batch at once gives the value
    def block(a: int) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(fn(pt.x, batch[a:a + BATCH_BLOCK]), dtype=np.float64)

    blocks = _PricedBlocks.price(count, VALUE_BLOCKS_SALT, block)
    whole = blocks.whole
    if whole <= budget:
        with np.errstate(all="ignore"):
            value = np.asarray(batched.whole_batch(problem)(pt.x), dtype=np.float64)
        return Reference(value, f"exact (value by NumPy at float64, in blocks of {BATCH_BLOCK:,} rows of the "
                                f"batch's {count:,}: its rows are the examples' own)", 0.0, cost=whole)
    rows, parts = blocks.within(budget)
    chosen = len(parts)
    seeded = f"{chosen} seeded block{'s' * (chosen > 1)}"
    return Reference(None, f"exact on {len(rows):,} rows of {count:,}, {seeded} of {BATCH_BLOCK:,} (value by NumPy "
                           f"at float64; all its blocks would take ~{whole:.2g} s > {budget:.2g} s, and its rows "
                           f"are the examples' own)",
                     0.0, (Direction(expected=np.concatenate(parts), rows=rows),), cost=whole * len(rows) / count)


def _seeded_block_starts(count: int, salt: int) -> np.ndarray:
    """The first rows of a batch's blocks of BATCH_BLOCK rows (a last partial block left out), in a seeded order."""
    return np.random.default_rng([DIRECTION_SEED, salt]).permutation(count // BATCH_BLOCK) * BATCH_BLOCK


@dataclass(frozen=True)
class _PricedBlocks(Generic[T]):
    """A large batch's blocks of BATCH_BLOCK rows in a seeded order, for a reference that may be past its budget
    (a value; a per-example derivative along one direction): the first two evaluated, the faster of them pricing
    every block (the first may find the caches cold)."""

    starts: np.ndarray  # each block's first row, in the seeded order
    done: dict[int, T]  # the evaluations made, by first row
    whole: float  # seconds all the blocks would take
    evaluate: Callable[[int], T]  # a block's evaluation, from its first row

    @classmethod
    def price(cls, count: int, salt: int, evaluate: Callable[[int], T]) -> _PricedBlocks[T]:
        starts = _seeded_block_starts(count, salt)
        done, seconds = {}, []
        for a in (int(a) for a in starts[:2]):
            began = time.perf_counter()
            done[a] = evaluate(a)
            seconds.append(time.perf_counter() - began)
        return cls(starts, done, min(seconds) * count / BATCH_BLOCK, evaluate)

    def within(self, budget: float) -> tuple[np.ndarray, list[T]]:
        """The rows of as many blocks as `budget` buys (two at least), ascending, and each block's evaluation."""
        chosen = np.sort(self.starts[:max(2, int(len(self.starts) * budget / self.whole))])
        parts = [self.done[a] if a in self.done else self.evaluate(a) for a in (int(a) for a in chosen)]
        return (chosen[:, None] + np.arange(BATCH_BLOCK)).ravel(), parts


def _first_order(problem: Problem, pt: _Point, operator: str, budget: float) -> Reference:
    op = spec(operator)
    if op.data_parallel:  # pmap_grad: the whole batch's mean on one machine, never split (the same quantity)
        return _batch_mean_gradient(problem, pt, budget)
    if op.per_example:
        f, why_not = _batched(problem, pt)
        if f is None:
            return _example_subset(problem, pt, operator, budget, why_not)
        blocks = _example_blocks(problem, pt, operator, budget)
        if blocks is not None:
            return blocks
        count = len(pt.examples_batch)
    else:
        f = pt.function(problem)
    x = pt.x
    seeded = _directions(x.shape, salt=1)
    along = pt.v if operator == "jvp" else seeded[0]  # the first J·v kept: jvp's, or the first seeded direction's
    differ, how, confirmed = choose_along(problem, f, x, along)  # the complex step, confirmed along that J·v
    if confirmed is not None:
        first, first_err, timed = confirmed.jv, differ.floor, confirmed.seconds
    else:
        started = time.perf_counter()
        first, first_err = differ.along(f, x, along, estimate=True)
        timed = time.perf_counter() - started
    if operator == "grad":  # its J·v has f's shape: f is scalar (other operators evaluate f to find out)
        _require_scalar(problem, operator, np.shape(first))
    price = seconds_per_evaluation(differ, f, x, timed=timed / differ.evaluations(True))

    if operator == "jvp":
        jv, err = first, first_err
        rounding = _rounding_error(problem, pt, operator, differ, [pt.v])
        return Reference(jv, f"J·v by {how}", err, cost=differ.evaluations(True) * price, rounding_error=rounding)

    rounding = _rounding_error(problem, pt, operator, differ, _directions(x.shape, salt=4))
    full_cost = x.size * differ.evaluations(True) * price
    if full_cost <= budget:
        # grad, vjp, jacfwd and jacrev all derive from the same Jacobian (per example: the stacked ones)
        jac, err = _shared((problem, pt.where, "jacobians", op.per_example, differ),
                           lambda: jacobian(f, x, differ, estimate=True))
        value = np.tensordot(pt.u, jac, axes=pt.u.ndim) if operator == "vjp" else jac
        what = "uᵀ·J from the full Jacobian" if operator == "vjp" else "full Jacobian"
        if op.per_example:
            what += f", one per example ({count}), all from each evaluation of the whole batch"
        return Reference(value, f"{how}, {what}", err, cost=full_cost, rounding_error=rounding)

    per_direction = differ.evaluations(True) * price
    vs = seeded[:_affordable(budget, per_direction, DIRECTIONS)]
    directions, worst = [], 0.0
    for k, v in enumerate(vs):
        # per example: every example's Jᵢ·v, stacked; the first one priced the differencing (operator ≠ jvp)
        jv, err = (first, first_err) if k == 0 else differ.along(f, x, v, estimate=True)
        worst = max(worst, err)
        if operator == "vjp":  # ⟨uᵀJ, v⟩ = ⟨u, J·v⟩
            jv = np.tensordot(pt.u, jv, axes=pt.u.ndim)
        directions.append(Direction(expected=np.asarray(jv), right=v))
    lhs = "⟨R, v⟩ vs ⟨u, J·v⟩" if operator == "vjp" else "R·v vs J·v"
    if op.per_example:
        lhs += f" for every example ({count}) from each evaluation of the whole batch"
    return Reference(None, f"directional: {lhs} by {how} for {len(vs)} seeded v (the full Jacobian would take "
                           f"~{full_cost:.2g} s > {budget:.2g} s of differencing)", worst, tuple(directions),
                     len(vs) * per_direction, rounding_error=rounding)


EXAMPLE_BLOCKS_SALT = 10  # the seeded order of a per-example reference's blocks (a value's: 8)


def _example_blocks(problem: Problem, pt: _Point, operator: str, budget: float) -> Reference | None:
    """A per-example derivative of a large batch whose rows are the examples' own, where one direction of the
    whole batch already costs more than the budget: every Jᵢ·v along one seeded v for the examples of seeded
    blocks of rows, as many blocks as the budget buys (two at least), compared with those rows of the result, as
    a value past its budget is. BA's per-example references at p = 4-5 million took 2.7-8 s for their one
    direction, shared by the one or two cells a corpus run's budget let run at those sizes. Two blocks, differenced
    first, price the whole; None (every example checked, as before) where a direction of the whole fits."""
    batch = pt.examples_batch
    count = len(batch)
    if count < 4 * BATCH_BLOCK:
        return None
    fn = problem.bind(np, pt.constants)

    def block(a: int) -> Function:
        return lambda w: fn(w, batch[a:a + BATCH_BLOCK])

    differ, how = choose(problem, block(int(_seeded_block_starts(count, EXAMPLE_BLOCKS_SALT)[0])), pt.x)
    v = _directions(pt.x.shape, salt=1)[0]
    blocks = _PricedBlocks.price(count, EXAMPLE_BLOCKS_SALT, lambda a: differ.along(block(a), pt.x, v, estimate=True))
    whole = blocks.whole
    if whole <= budget:
        return None
    rows, parts = blocks.within(budget)
    expected = np.concatenate([np.asarray(jv) for jv, _ in parts])
    rounding = _rounding_error(problem, pt, operator, differ, _directions(pt.x.shape, salt=4))
    return Reference(None, f"directional: R·v vs J·v for the examples of {len(parts)} seeded blocks of "
                           f"{BATCH_BLOCK:,} ({len(rows):,} of {count:,}) by {how} for 1 seeded v (a direction of "
                           f"the whole batch would take ~{whole:.2g} s > {budget:.2g} s of differencing)",
                     max(err for _, err in parts), (Direction(expected=expected, right=v, rows=rows),),
                     whole * len(rows) / count, rounding_error=rounding)


EXAMPLES_CHECKED = 8  # the most examples a per-example reference checks where the batch cannot be evaluated at once


def _example_subset(problem: Problem, pt: _Point, operator: str, budget: float, why_not: str) -> Reference:
    """Per-example operators of a problem whose f(w, batch) is not the examples' outputs stacked: a seeded subset
    of examples, each one's full Jacobian (or Jᵢ·v past the budget) compared with that example's slice of the
    result, so the reference's cost does not grow with the batch."""
    x, count = pt.x, len(pt.examples_batch)
    g0 = pt.example(problem, 0)
    differ, how = choose(problem, g0, x)
    price = seconds_per_evaluation(differ, g0, x)
    rounding = _rounding_error(problem, pt, operator, differ, _directions(x.shape, salt=4))
    per_example = x.size * differ.evaluations(True) * price
    full = per_example <= budget
    n = min(count, _affordable(budget, per_example if full else differ.evaluations(True) * price,
                               EXAMPLES_CHECKED))
    chosen = sorted(int(i) for i in np.random.default_rng([DIRECTION_SEED, 7]).choice(count, n, replace=False))
    vs = _directions(x.shape, salt=1)
    directions, worst = [], 0.0
    for k, i in enumerate(chosen):
        left = np.zeros(count)
        left[i] = 1.0
        if full:
            expected, err = jacobian(pt.example(problem, i), x, differ, estimate=True)
            directions.append(Direction(expected=expected, left=left))
        else:  # one seeded v per example, in turn
            v = vs[k % len(vs)]
            expected, err = differ.along(pt.example(problem, i), x, v, estimate=True)
            directions.append(Direction(expected=np.asarray(expected), right=v, left=left))
        worst = max(worst, err)
    what = "its full Jacobian" if full else "Jᵢ·v for a seeded v"
    cost = n * (per_example if full else differ.evaluations(True) * price)
    return Reference(None, f"directional: {n} seeded examples of {count}, each {what}, by {how} (the batch is not "
                           f"evaluated at once: {why_not})", worst, tuple(directions), cost, rounding_error=rounding)


def _batch_mean_gradient(problem: Problem, pt: _Point, budget: float) -> Reference:
    """∇ of the batch's mean loss by differencing that mean in float64; directional past the budget."""
    x, count = pt.x, len(pt.examples_batch)
    whole, why_not = _batched(problem, pt)
    if whole is not None:
        f = (lambda F: lambda w: np.sum(F(w), axis=0) / count)(whole)  # complex through, for the complex step
        what = f"gradient of the whole batch's mean over {count} examples (unsplit, the batch at once)"
    else:  # the mean needs every example: one call each, the budget counting them all through the price
        examples = [pt.example(problem, i) for i in range(count)]
        f = lambda w: sum(g(w) for g in examples) / count  # noqa: E731
        what = f"gradient of the whole batch's mean over {count} examples (unsplit, one example at a time: {why_not})"
    differ, how = choose(problem, f, x)
    price = seconds_per_evaluation(differ, f, x)
    rounding = _rounding_error(problem, pt, "pmap_grad", differ, _directions(x.shape, salt=4))  # per example
    full_cost = x.size * differ.evaluations(True) * price
    if full_cost <= budget:
        value, err = jacobian(f, x, differ, estimate=True)
        return Reference(value, f"{how}, {what}", err, cost=full_cost, rounding_error=rounding)
    per_direction = differ.evaluations(True) * price
    directions, worst = [], 0.0
    vs = _directions(x.shape, salt=1)[:_affordable(budget, per_direction, DIRECTIONS)]
    for v in vs:
        jv, err = differ.along(f, x, v, estimate=True)
        worst = max(worst, err)
        directions.append(Direction(expected=np.asarray(jv), right=v))
    return Reference(None, f"directional: R·v vs ∇·v by {how}, {what}, for {len(vs)} seeded v", worst,
                     tuple(directions), len(vs) * per_direction, rounding_error=rounding)


def _second_order(problem: Problem, pt: _Point, operator: str, budget: float) -> Reference:
    f, x = pt.function(problem), pt.x
    differ, inner_how = choose(problem, f, x)
    so = SecondOrder(differ)
    how = f"central differences of the {'complex-step' if differ.complex_step else 'central-difference'} " \
          f"gradient ({inner_how})"
    price = seconds_per_evaluation(differ, f, x)
    per_hv = 4 * so.gradient_evaluations(x.size) * price  # outer difference at t and 2t, each two gradients
    per_bilinear = 4 * differ.evaluations(False) * price
    n_right = 1 if operator == "hvp" else x.size
    full_cost = n_right * per_hv
    if full_cost <= budget:
        if operator == "hvp":
            value, err = so.hvp(f, x, pt.v)
            return Reference(value, f"H·v by {how}", err, cost=full_cost)
        value, err = so.hessian(f, x)
        return Reference(value, f"{how}, full Hessian (symmetrised)", err, cost=full_cost)

    vs = _directions(x.shape, salt=2)
    if operator == "hessian" and len(vs) * per_hv <= budget:
        directions, worst = [], 0.0
        for v in vs:
            hv, err = so.hvp(f, x, v)
            directions.append(Direction(expected=hv, right=v))
            worst = max(worst, err)
        return Reference(None, f"directional: R·v vs H·v by {how} for {len(vs)} seeded v (the full Hessian "
                               f"would take ~{full_cost:.2g} s > {budget:.2g} s of differencing)",
                         worst, tuple(directions), len(vs) * per_hv)

    ws = _directions(x.shape, salt=3)
    rights = [pt.v] if operator == "hvp" else vs
    # every (w, v) pair, ordered so that a budget that buys only some still varies both sides
    pairs = [(ws[i], rights[(i + k) % len(rights)]) for k in range(len(rights)) for i in range(len(ws))]
    pairs = pairs[:_affordable(budget, per_bilinear, len(pairs))]
    directions, worst = [], 0.0
    for w, v in pairs:
        whv, err = so.bilinear(f, x, w, v)
        worst = max(worst, err)
        if operator == "hvp":
            directions.append(Direction(expected=whv, left=w))
        else:
            directions.append(Direction(expected=whv, left=w, right=v))
    lhs = "⟨w, R⟩ vs wᵀ·H·v" if operator == "hvp" else "wᵀ·R·v vs wᵀ·H·v"
    return Reference(None, f"directional: {lhs} by mixed differences ({inner_how}) for "
                           f"{len(directions)} seeded (w, v) (H·v would take ~{per_hv:.2g} s > {budget:.2g} s "
                           f"of differencing)", worst, tuple(directions), len(directions) * per_bilinear)


def _nested(problem: Problem, pt: _Point) -> Reference:
    """A nested_* operator without the problem's closed form: the problem through NumPy, its adcompare.grad calls
    by central differences (model/nesting.py), differences of differences where they nest."""
    value = np.asarray(pt.function(problem)(pt.x), dtype=np.float64)
    return Reference(value, "the problem through NumPy at float64, adcompare.grad by central differences (no closed "
                            "form declared)", FLOOR["nested central differences"])


def _newton_coordinate(f: Function, x: np.ndarray, fx: float, i: int, differ: Differ) -> tuple[float, float]:
    """(∂f/∂xᵢ ⊘ ∂²f/∂xᵢ², scaled error estimate): the quotient at step t against the quotient at 2t."""
    basis = np.zeros(x.size)
    basis[i] = 1.0
    e = basis.reshape(x.shape)
    scale = max(1.0, abs(float(x.flat[i])))
    g = float(differ.along(f, x, e, estimate=False)[0])  # complex step: exact to rounding at any step
    g2 = g if differ.complex_step else float(central(f, x, e, 2 * EPS ** differ.exponent * scale))
    t = EPS ** 0.25 * scale

    def second(step: float) -> float:
        return (float(f(x + step * e)) - 2 * fx + float(f(x - step * e))) / (step * step)

    q, q2 = g / second(t), g2 / second(2 * t)
    return q, max(scaled_error(q, q2), FLOOR["newton direction"])


def _newton_direction(problem: Problem, pt: _Point, budget: float) -> Reference:
    """∇f ⊘ diag(∇²f) coordinate by coordinate (see the module docstring); a seeded subset past the budget."""
    f, x = pt.function(problem), pt.x
    differ, how = choose(problem, f, x)
    price = seconds_per_evaluation(differ, f, x)
    per_coordinate = (2 * differ.evaluations(False) + 4) * price
    fx = float(f(x))
    what = f"gradient by {how}, diagonal by second central differences (step eps^(1/4)·max(1,|xᵢ|))"
    full_cost = x.size * per_coordinate
    if full_cost <= budget:
        pairs = [_newton_coordinate(f, x, fx, i, differ) for i in range(x.size)]
        value = np.array([q for q, _ in pairs]).reshape(x.shape)
        return Reference(value, f"∇f ⊘ diag(∇²f), every coordinate: {what}", max(e for _, e in pairs),
                         cost=full_cost)
    count = min(x.size, _affordable(budget, per_coordinate, NEWTON_COORDINATES))
    chosen = np.random.default_rng([DIRECTION_SEED, 5]).choice(x.size, size=count, replace=False)
    directions, worst = [], 0.0
    for i in sorted(int(c) for c in chosen):
        q, err = _newton_coordinate(f, x, fx, i, differ)
        e = np.zeros(x.size)
        e[i] = 1.0
        directions.append(Direction(expected=np.asarray(q), right=e.reshape(x.shape)))
        worst = max(worst, err)
    return Reference(None, f"directional: R·eᵢ vs ∂ᵢf ⊘ ∂ᵢ²f at {count} seeded coordinates of {x.size}: {what} "
                           f"(every coordinate would take ~{full_cost:.2g} s > {budget:.2g} s of differencing)",
                     worst, tuple(directions), count * per_coordinate)


# ---------------------------------------------------------------------------------------------------------------
# Entry point and cache

_CACHE: dict[tuple, Reference] = {}
_SHARED: dict[tuple, Any] = {}  # intermediate results shared between operators (full Jacobians)
_CACHE_LIMIT = 256
# Operators whose cells are checked against one reference (the same Jacobian, or the same directions): a cell of
# either reads the other's from this worker's cache or the run's shared files. A --max-time run's rounds often put
# a size's jacfwd and jacrev in different workers: each differenced its own (an H100's per-example BA cells, 1-2 s
# of reference apiece).
SHARED_REFERENCE = {"jacfwd": "jacobian", "jacrev": "jacobian", "vmap_jacfwd": "per-example jacobian",
                    "vmap_jacrev": "per-example jacobian"}


def _reference_name(problem: Problem, operator: str) -> str:
    """What `operator`'s reference is cached under: its pair's shared name, unless the problem declares a closed
    form for the operator itself."""
    shared = SHARED_REFERENCE.get(operator)
    return operator if shared is None or operator in dict(problem.analytic) else shared


def reference(problem: Problem, size: Size | str, operator: str, inputs: CellInputs, *,
              budget: float | None = None) -> Reference:
    """The float64 reference for `operator` of `problem` at the cell's inputs (cached within the process).

    `budget` is the differencing cost above which a full reference gives way to directional checks (default
    `FULL_REFERENCE_BUDGET`, read at call time); raise it to time the full reference.
    """
    budget = FULL_REFERENCE_BUDGET if budget is None else budget
    label = size.label if isinstance(size, Size) else str(size)
    digests = _digests(inputs)
    dtype = str(np.asarray(inputs.wrt).dtype)
    name = _reference_name(problem, operator)
    key = (problem, label, name, dtype, digests[0], budget)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    run_key = (problem.name, label, name, dtype, digests[0], budget)
    ref = shared_references.load(run_key)
    if ref is not None:
        ref = dataclasses.replace(ref, shared=True)
    else:
        started = time.perf_counter()
        ref = _compute(problem, operator, _point(inputs, digests), budget)
        ref = dataclasses.replace(ref, seconds=time.perf_counter() - started, order=spec(operator).order)
        _verify_finite(problem, label, operator, ref)
        shared_references.keep(run_key, ref, _arrays_bytes(ref))
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = ref
    return ref


def _arrays_bytes(ref: Reference) -> int:
    arrays = [ref.value, *(a for d in ref.directional for a in (d.expected, d.left, d.right, d.rows))]
    return sum(a.nbytes for a in arrays if a is not None)


def _compute(problem: Problem, operator: str, pt: _Point, budget: float) -> Reference:
    op = spec(operator)
    closed_form = dict(problem.analytic).get(operator)
    if closed_form is not None:
        value = np.asarray(closed_form(pt.x, **pt.constants), dtype=np.float64)
        return Reference(value, f"analytic: the closed form problem {problem.name!r} declares (NumPy, float64)",
                         FLOOR["analytic"])
    if op.order == 0:
        return _value(problem, pt, operator, budget)
    if op.takes == "tangent" and pt.tangent is None or op.takes == "cotangent" and pt.cotangent is None:
        raise ReferenceError(f"problem {problem.name!r}: operator {operator!r} needs a seeded {op.takes}, and the "
                             f"cell's inputs have none; build them with adcompare.verify.cell_inputs.cell_inputs")
    if op.per_example and pt.batch is None:
        raise ReferenceError(f"problem {problem.name!r}: per-example operator {operator!r} needs the batch "
                             f"argument in CellInputs.batch")
    if op.scalar_output and operator != "grad":  # grad's first directional derivative tells (_first_order)
        g = pt.example(problem, 0) if op.per_example else pt.function(problem)
        _require_scalar(problem, operator, np.shape(g(pt.x)))
    if operator == "newton_dir":
        return _newton_direction(problem, pt, budget)
    if op.family == NESTED:
        return _nested(problem, pt)
    if op.order == 2:
        return _second_order(problem, pt, operator, budget)
    return _first_order(problem, pt, operator, budget)


def _require_scalar(problem: Problem, operator: str, shape: tuple[int, ...]) -> None:
    if shape != ():
        raise ReferenceError(f"problem {problem.name!r}: operator {operator!r} needs a scalar-valued function, f(x) "
                             f"has shape {shape}")


def _verify_finite(problem: Problem, label: str, operator: str, ref: Reference) -> None:
    parts = [ref.value] if ref.value is not None else [d.expected for d in ref.directional]
    if not all(all_finite(p) for p in parts) or not math.isfinite(ref.error_bound):
        raise ReferenceError(f"problem {problem.name!r} at {label}: the float64 reference for {operator!r} "
                             f"({ref.method}) is not finite; the function is not differentiable or not finite "
                             f"near the seeded point — change its inputs generator")


@functools.lru_cache(maxsize=64)
def reference_value(problem: Problem, size: Size) -> float | None:
    """f(x) in float64 at the size's own inputs (the file's numbers, not rounded to a cell's dtype), for a
    scalar-valued problem; None otherwise. What a user holds against a published objective value."""
    inputs = problem.inputs(size, "float64")
    w = inputs.pop(problem.wrt)
    value = np.asarray(problem.bind(np, inputs)(w))
    return float(value) if value.shape == () else None


def clear_cache() -> None:
    _CACHE.clear()
    _SHARED.clear()
    _BYTES_DIGESTS.clear()
