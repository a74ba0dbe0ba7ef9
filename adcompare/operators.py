"""The operator vocabulary: what each operator computes and the shape its result must have.

Shapes are checked here, generically, for every adapter. `tangent` v has the shape of `wrt`; `cotangent` u has the
shape of the output. Per-example operators map over the leading axis of the problem's batch argument with
`wrt` shared; for each example bᵢ they differentiate f(wrt, bᵢ) with respect to `wrt`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only
    from .shapes import Shapes


@dataclass(frozen=True)
class OperatorSpec:
    name: str
    meaning: str
    order: int  # 0 value, 1 first derivative, 2 second derivative
    scalar_output: bool = False  # needs f (per example, for vmap_*) to return a scalar
    per_example: bool = False
    takes: str | None = None  # "tangent" or "cotangent": the extra seeded vector it is applied to
    family: str = "first-order"


_SPECS = [
    OperatorSpec("value", "f(x)", 0, family="value"),
    OperatorSpec("grad", "∇f(x) for scalar f; shape of x", 1, scalar_output=True),
    OperatorSpec("jvp", "J(x)·v, forward product with a tangent v; shape of f(x)", 1, takes="tangent"),
    OperatorSpec("vjp", "uᵀ·J(x), reverse product with a cotangent u; shape of x", 1, takes="cotangent"),
    OperatorSpec("jacfwd", "full Jacobian by forward mode; f(x).shape + x.shape", 1, family="jacobian"),
    OperatorSpec("jacrev", "full Jacobian by reverse mode; f(x).shape + x.shape", 1, family="jacobian"),
    OperatorSpec("hessian", "∇²f(x) for scalar f; x.shape + x.shape", 2, scalar_output=True, family="second-order"),
    OperatorSpec("hvp", "∇²f(x)·v for scalar f; shape of x", 2, scalar_output=True, takes="tangent",
                 family="second-order"),
    OperatorSpec("vmap_grad", "per-example gradients ∇_x f(x, bᵢ); (B, *x.shape)", 1, scalar_output=True,
                 per_example=True, family="per-example"),
    OperatorSpec("vmap_jacfwd", "per-example Jacobians by forward mode; (B, *f(x, bᵢ).shape, *x.shape)", 1,
                 per_example=True, family="per-example"),
    OperatorSpec("vmap_jacrev", "per-example Jacobians by reverse mode; (B, *f(x, bᵢ).shape, *x.shape)", 1,
                 per_example=True, family="per-example"),
]
OPERATORS: dict[str, OperatorSpec] = {s.name: s for s in _SPECS}


def spec(name: str) -> OperatorSpec:
    try:
        return OPERATORS[name]
    except KeyError:
        from .errors import unknown

        raise unknown("operator", name, OPERATORS) from None


def applicable(operator: str, *, out_shape: tuple[int, ...], example_out_shape: tuple[int, ...] | None,
               has_batch: bool) -> str | None:
    """None when `operator` makes sense for a problem with these shapes, else why not (one line)."""
    s = spec(operator)
    if s.per_example:
        if not has_batch:
            return f"{operator} needs a batch argument (declare batch=... on the problem)"
        if s.scalar_output and example_out_shape != ():
            return f"{operator} needs a scalar per example, f(x, bᵢ) has shape {example_out_shape}"
        return None
    if s.scalar_output and out_shape != ():
        return f"{operator} needs a scalar-valued function, f(x) has shape {out_shape}"
    return None


def expected_shape(operator: str, *, wrt_shape: tuple[int, ...], out_shape: tuple[int, ...],
                   example_out_shape: tuple[int, ...] | None = None, batch_size: int | None = None
                   ) -> tuple[int, ...]:
    """The shape `operator`'s result must have."""
    s = spec(operator)
    if s.per_example:
        tail = () if s.scalar_output else tuple(example_out_shape or ())
        return (batch_size, *tail, *wrt_shape)
    return {
        "value": out_shape,
        "grad": wrt_shape,
        "jvp": out_shape,
        "vjp": wrt_shape,
        "jacfwd": (*out_shape, *wrt_shape),
        "jacrev": (*out_shape, *wrt_shape),
        "hessian": (*wrt_shape, *wrt_shape),
        "hvp": wrt_shape,
    }[operator]


def applicable_operators(problem, size=None) -> list[str]:
    """The problem's operators (its declared subset, or the whole vocabulary) that its output shapes admit."""
    from .problem import example_output_shape, output_shape

    size = size or problem.smallest_size
    out_shape = output_shape(problem, size)
    ex_shape = example_output_shape(problem, size) if problem.batch else None
    return [op for op in (problem.operators or OPERATORS)
            if applicable(op, out_shape=out_shape, example_out_shape=ex_shape, has_batch=problem.batch is not None)
            is None]


def minimum_elements(operator: str, shapes: "Shapes") -> int:
    """Array elements `operator` must hold at once by its nature, whatever the algorithm: the result, and for the
    Jacobian forms the identity of basis tangents (forward) or cotangents (reverse) that vmap materialises."""
    n_in, n_out = shapes.n_in, shapes.n_out
    if spec(operator).per_example:
        n_ex = shapes.n_example_out
        basis = {"vmap_jacfwd": n_in * n_in, "vmap_jacrev": n_ex * n_ex}.get(operator, 0)
        return (shapes.batch or 1) * (n_ex * n_in + basis)  # vmap materialises one basis per example
    return {
        "jacfwd": n_out * n_in + n_in * n_in,
        "jacrev": n_out * n_in + n_out * n_out,
        "hessian": 2 * n_in * n_in,
    }.get(operator, n_in + n_out)
