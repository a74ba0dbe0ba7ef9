"""How close is close enough: the one error measure and the tolerance policy by dtype.

`scaled_error` is the element-wise maximum of |a − b| / max(1, |a| + |b|): relative for large entries and absolute
for small ones, so a zero in the reference does not make every error infinite.

`tolerance(dtype, reference)` is one tolerance per cell: a base by dtype (what a correct framework's rounding
reaches in practice, with room for reduction order), plus `ROUNDING_SAFETY` times the measured rounding error of
this derivative in this dtype where the reference could measure it (float32 sums over 10⁴ terms lose far more
than a fixed base allows), plus `REFERENCE_SAFETY` times the reference's own estimated error. The same tolerance
judges the reference error, the pairwise error and the adjoint error (check.py), and it is printed beside each.

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


class ReferenceAccuracy(Protocol):
    """What the tolerance needs to know of a reference (reference.Reference has these fields)."""

    order: int  # 0 value, 1 first derivatives, 2 second derivatives
    rounding_error: float  # scaled error a correct derivative makes in the cell's dtype
    error_bound: float  # the reference's own estimated scaled error


def scaled_error(a, b) -> float:
    """max over elements of |a − b| / max(1, |a| + |b|), in float64; NaN when either side has NaN."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.size == 0 and b.size == 0:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b) / np.maximum(1.0, np.abs(a) + np.abs(b))
    return float(np.max(diff))


def tolerance(dtype: str, reference: ReferenceAccuracy | None = None) -> float:
    """The base for `dtype`, plus the reference's measured rounding error in `dtype` and its own error bound."""
    table = SECOND_ORDER_BASE if reference is not None and reference.order == 2 else BASE_TOLERANCE
    base = table.get(dtype)
    if base is None:
        base = (10_000 if table is SECOND_ORDER_BASE else 1000) * float(np.finfo(np.dtype(dtype)).eps)
    if reference is None:
        return base
    return base + ROUNDING_SAFETY * reference.rounding_error + REFERENCE_SAFETY * reference.error_bound
