"""A pre-flight memory estimate: cells that cannot fit are marked `too_large` instead of being run.

The estimate is the most array elements the adapter's algorithm materialises (`Adapter.materialised_elements`,
by default the operator's own need: a full Jacobian or Hessian, and for forward mode the identity of basis tangents,
n×n at n = 10⁴ is 800 MB in float64), times the item size and a safety factor for framework temporaries. It reads
the problem's shapes (`problem.shapes_of`), computed once per (problem, size), so planning costs O(cells).
"""
from __future__ import annotations

import os

from adcompare.model.operators import minimum_elements
from adcompare.model.problem import Problem, Size, shapes_of
from adcompare.plugin.adapter import Adapter

SAFETY_FACTOR = 4


def available_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


def estimate_bytes(problem: Problem, size: Size, operator: str, dtype: str, adapter: Adapter | None = None,
                   variant: str = "eager") -> int:
    """Bytes the cell is expected to need; without an adapter, the operator's own need."""
    shapes = shapes_of(problem, size)
    itemsize = 4 if dtype == "float32" else 8
    elements = minimum_elements(operator, shapes)
    if adapter is not None:
        elements = max(elements, int(adapter.materialised_elements(operator, variant, shapes)))
    return SAFETY_FACTOR * itemsize * elements


def too_large(problem: Problem, size: Size, operator: str, dtype: str, limit: int | None = None,
              adapter: Adapter | None = None, variant: str = "eager") -> str | None:
    """Why the cell cannot fit, or None."""
    limit = limit or available_memory_bytes() // 2
    need = estimate_bytes(problem, size, operator, dtype, adapter, variant)
    if need > limit:
        return (f"estimated {need / 2**30:.1f} GiB for {operator} at {size.label} exceeds the "
                f"{limit / 2**30:.1f} GiB limit (default: half the machine's memory; --memory-limit GIB to change)")
    return None
