"""A pre-flight memory estimate: cells that cannot fit are marked `too_large` instead of being run.

The estimate is the largest array the operator must materialise, times a safety factor for framework temporaries:
a full Jacobian or Hessian, and for forward mode the identity of basis tangents (n×n at n = 10⁴ is 800 MB in float64).
"""
from __future__ import annotations

import math
import os

from .operators import spec
from .problem import Problem, Size, example_output_shape, input_shapes, output_shape

SAFETY_FACTOR = 4


def available_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


def estimate_bytes(problem: Problem, size: Size, operator: str, dtype: str) -> int:
    shapes = input_shapes(problem, size)
    itemsize = 4 if dtype == "float32" else 8
    n_in = int(math.prod(shapes[problem.wrt]))
    s = spec(operator)
    if s.per_example:
        batch = shapes[problem.batch][0]
        n_out = int(math.prod(example_output_shape(problem, size)))
        basis = {"vmap_jacfwd": n_in * n_in, "vmap_jacrev": n_out * n_out}.get(operator, 0)
        elements = batch * (n_out * n_in + basis)  # vmap materialises one basis per example
    else:
        n_out = int(math.prod(output_shape(problem, size)))
        elements = {
            "jacfwd": n_out * n_in + n_in * n_in,
            "jacrev": n_out * n_in + n_out * n_out,
            "hessian": 2 * n_in * n_in,
        }.get(operator, n_in + n_out)
    return SAFETY_FACTOR * itemsize * elements


def too_large(problem: Problem, size: Size, operator: str, dtype: str, limit: int | None = None) -> str | None:
    """Why the cell cannot fit, or None."""
    limit = limit or available_memory_bytes() // 2
    need = estimate_bytes(problem, size, operator, dtype)
    if need > limit:
        return (f"estimated {need / 2**30:.1f} GiB for {operator} at {size.label} exceeds the "
                f"{limit / 2**30:.1f} GiB limit (default: half the machine's memory; --memory-limit GIB to change)")
    return None
