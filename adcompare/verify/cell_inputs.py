"""The seeded NumPy inputs of one cell: problem inputs plus the tangent/cotangent every adapter shares."""
from __future__ import annotations

import numpy as np

from adcompare.model.operators import spec
from adcompare.model.problem import Problem, Size, output_shape
from adcompare.plugin.adapter import CellInputs

VECTOR_SEED = 1234


def cell_inputs(problem: Problem, size: Size, operator: str, dtype: str, seed: int | None = None) -> CellInputs:
    """Same seed, same arrays in every worker and on every machine, so cells are comparable (the size's seed or
    input file unless `seed` is given)."""
    values = problem.inputs(size, dtype, seed)
    wrt = values.pop(problem.wrt)
    op = spec(operator)
    batch = None
    if op.per_example:
        assert problem.batch is not None, f"{operator} is planned only for problems with a batch argument"
        batch = values.pop(problem.batch)
    rng = np.random.default_rng(VECTOR_SEED)
    tangent = cotangent = None
    if op.takes == "tangent":
        tangent = rng.standard_normal(np.shape(wrt)).astype(dtype)
    elif op.takes == "cotangent":
        cotangent = np.asarray(rng.standard_normal(output_shape(problem, size))).astype(dtype)
    return CellInputs(wrt=wrt, constants=values, batch=batch, tangent=tangent, cotangent=cotangent)
