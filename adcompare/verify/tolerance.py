"""How close is close enough: the one error measure and the tolerance policy by dtype.

`scaled_error` is the element-wise maximum of |a − b| / max(1, |a| + |b|): relative for large entries and absolute
for small ones, so a zero in the reference does not make every error infinite.

`tolerance(dtype, reference, expected)` is one tolerance per cell, the sum of four terms:

- a base by dtype (what a correct framework's rounding reaches in practice, with room for reduction order);
- `ROUNDING_SAFETY` times the measured rounding error of this derivative in this dtype, where the reference
  could measure it (float32 sums over 10⁴ terms lose far more than a fixed base allows);
- `REFERENCE_SAFETY` times the reference's own estimated error;
- the normwise term, `NORMWISE_STEPS · eps(dtype) · max|y| / max(1, 2·min|y|)` over the expected entries y:
  an entry computed by cancelling terms as large as the largest entry carries their rounding, about
  eps·max|y| absolute, however small the entry itself is — and the measure is absolute below 1, so that error
  shows in full (torch's float32 GMM gradient: an entry of 0.43 off by 1.2e-4 beside entries of 2,000, a
  normwise error of 3 ulps). Divided by max(1, 2·min|y|), the term is the largest scaled error that absolute
  error makes at any entry: it vanishes where every entry is large (a scalar value of 3·10⁴ is judged
  relatively, as before) and is eps·max|y| wherever some entry is below ½. In float64 it stays far below the
  1e-9 base unless max|y| nears 10⁶.

The price of one number per cell: in an array whose largest entry is M, an entry above 1 passes with a relative
error up to about 2 × the tolerance, NORMWISE_STEPS·eps·M included. docs/problems.md ("Tolerance policy") has the
measurements behind each constant. The same tolerance judges the reference error, the pairwise error and the
adjoint error (check.py), and it is printed beside each.

This module sits below both reference.py (which measures its own error in these units) and check.py.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

# float32: torch.func's float32 GMM gradients (sums over 10⁴ points) differ from the reference by up to 2.3e-5,
# 100× more than the complex64 rounding probe predicts along a direction, so the base stays at 1e-4. Because the
# measure is absolute below 1, a relative 1e-3 error is caught in elements larger than ~0.1 only.
BASE_TOLERANCE = {"float64": 1e-9, "float32": 1e-4}
SECOND_ORDER_BASE = {"float64": 1e-9, "float32": 1e-4}
REFERENCE_SAFETY = 10.0  # the Richardson estimate is about 3× the truncation error; 10× more for safety
ROUNDING_SAFETY = 10.0  # forward-mode rounding probes one order of summation; frameworks use others
NORMWISE_STEPS = 2.0  # ulps of the largest entry: one half-ulp rounding per cancelling term, ×2 for summation order


class ReferenceAccuracy(Protocol):
    """What the tolerance needs to know of a reference (reference.Reference has these fields)."""

    # Read-only members (properties), so that a frozen dataclass such as Reference satisfies the protocol.
    @property
    def order(self) -> int: ...  # 0 value, 1 first derivatives, 2 second derivatives
    @property
    def rounding_error(self) -> float: ...  # scaled error a correct derivative makes in the cell's dtype
    @property
    def error_bound(self) -> float: ...  # the reference's own estimated scaled error


def all_finite(array) -> bool:
    """No NaN and no ±inf in `array`. For floats, from its min and max (both propagate NaN and hold ±inf): two
    passes and no array of flags — a BA per-example Jacobian of 4·10⁷ floats in 27 ms against np.isfinite's 120 ms,
    and every cell's result is validated by it after its first call, and again by the check (a per-example result
    there chunk by chunk, as it is compared)."""
    a = np.asarray(array)
    if a.size == 0:
        return True
    if not np.issubdtype(a.dtype, np.floating):
        return bool(np.all(np.isfinite(a)))
    return bool(np.isfinite(a.min()) and np.isfinite(a.max()))


# Elements per block of a large comparison: its float64 temporaries (five, 512 KB each) stay in cache and are reused
# by the allocator. Whole, a BA per-example comparison (4·10⁶ entries) made five fresh 30 MB arrays: 0.22 s in a
# process's first check, most of it page faults, against 0.03 s in blocks.
BLOCK = 1 << 16


def _blocks(*arrays: np.ndarray):
    """Equal-size arrays, flattened, in aligned blocks of BLOCK elements."""
    flat = [a.reshape(-1) for a in arrays]
    for start in range(0, flat[0].size, BLOCK):
        yield tuple(a[start:start + BLOCK] for a in flat)


def scaled_error(a, b) -> float:
    """max over elements of |a − b| / max(1, |a| + |b|), in float64; NaN when either side has NaN."""
    a, b = np.asarray(a), np.asarray(b)
    if a.size == 0 and b.size == 0:
        return 0.0
    if a.shape != b.shape or a.size <= BLOCK:  # broadcast, or small: at once
        return _scaled_error(a, b)
    return float(np.max([_scaled_error(x, y) for x, y in _blocks(a, b)]))  # np.max: a NaN block stays NaN


def _scaled_error(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b) / np.maximum(1.0, np.abs(a) + np.abs(b))
    return float(np.max(diff))


def normwise_term(dtype: str, expected) -> float:
    """NORMWISE_STEPS·eps(dtype)·max|y| / max(1, 2·min|y|) over the expected entries y (0 when there are none):
    the scaled error a correct result rounded at the scale of its largest entry can show at its smallest.
    `expected` is an array, or a tuple of arrays whose entries are taken together."""
    parts = [np.asarray(e) for e in (expected if isinstance(expected, tuple) else (expected,))]
    largest, smallest = [], []
    for part in parts:
        for (block,) in _blocks(part):
            y = np.abs(np.asarray(block, dtype=np.float64))
            largest.append(np.max(y))
            smallest.append(np.min(y))
    if not largest:
        return 0.0
    eps = float(np.finfo(np.dtype(dtype)).eps) if np.dtype(dtype).kind == "f" else 0.0
    return NORMWISE_STEPS * eps * float(np.max(largest)) / max(1.0, 2.0 * float(np.min(smallest)))


def tolerance(dtype: str, reference: ReferenceAccuracy | None = None, expected=None) -> float:
    """The base for `dtype`, plus the reference's measured rounding error in `dtype` and its own error bound,
    plus the normwise term of the `expected` values the result is compared with (see the module docstring)."""
    table = SECOND_ORDER_BASE if reference is not None and reference.order == 2 else BASE_TOLERANCE
    base = table.get(dtype)
    if base is None:
        base = (10_000 if table is SECOND_ORDER_BASE else 1000) * float(np.finfo(np.dtype(dtype)).eps)
    if expected is not None:
        base += normwise_term(dtype, expected)
    if reference is None:
        return base
    return base + ROUNDING_SAFETY * reference.rounding_error + REFERENCE_SAFETY * reference.error_bound
