"""The seeded NumPy inputs of one cell: problem inputs plus the tangent/cotangent every adapter shares."""
from __future__ import annotations

import numpy as np

from adcompare.model.operators import spec
from adcompare.model.problem import Problem, Size, output_shape
from adcompare.plugin.adapter import CellInputs

VECTOR_SEED = 1234


_LAST: list[tuple[Problem, tuple, dict]] = []  # a worker's last inputs, for its next cell at the same size


def cell_inputs(problem: Problem, size: Size, operator: str, dtype: str, seed: int | None = None, *,
                reuse: bool = False) -> CellInputs:
    """Same seed, same arrays in every worker and on every machine, so cells are comparable (the size's seed or
    input file unless `seed` is given).

    `reuse` (a worker's cells): the arrays of the last call with `reuse` at the same problem, size, dtype and seed
    are given again instead of built again (BA's largest inputs are 3.9 GB: seconds to build, for every variant
    and operator of the size), read-only. Any other call drops them first."""
    wanted = (size, dtype, seed)
    # the arrays problem.inputs makes of these, the same in every worker of a run (its contract): their identity
    origin = repr((problem.name, size.label, dtype, seed, sorted(size.provenance().items()))) if reuse else ""
    if reuse and held(problem, size, dtype, seed):
        values = dict(_LAST[0][2])
    else:
        _LAST.clear()  # before building: two sizes' arrays are never held at once
        values = problem.inputs(size, dtype, seed)
        if reuse:
            for value in values.values():
                if isinstance(value, np.ndarray):
                    value.flags.writeable = False  # the next cells get these very arrays: none may change them
            _LAST.append((problem, wanted, dict(values)))
    wrt = values.pop(problem.wrt)
    op = spec(operator)
    batch = None
    if op.per_example:
        assert problem.batch is not None, f"{operator} is planned only for problems with a batch argument"
        batch = values.pop(problem.batch)
    tangent = seeded_vector(np.shape(wrt), dtype) if op.takes == "tangent" else None
    cotangent = seeded_vector(output_shape(problem, size), dtype) if op.takes == "cotangent" else None
    return CellInputs(wrt=wrt, constants=values, batch=batch, tangent=tangent, cotangent=cotangent, origin=origin)


def held(problem: Problem, size: Size, dtype: str, seed: int | None = None) -> bool:
    """Whether `cell_inputs(..., reuse=True)` would give these arrays again rather than build them."""
    return bool(_LAST) and _LAST[0][0] is problem and _LAST[0][1] == (size, dtype, seed)


def seeded_vector(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """The tangent (shape of wrt) or cotangent (shape of f(wrt)) every cell of that shape and dtype is given."""
    return np.asarray(np.random.default_rng(VECTOR_SEED).standard_normal(shape)).astype(dtype)
