"""The operator vocabulary: what each operator computes and the shape its result must have.

Shapes are checked here, generically, for every adapter. `tangent` v has the shape of `wrt`; `cotangent` u has the
shape of the output. Per-example operators map over the leading axis of the problem's batch argument with
`wrt` shared; for each example bᵢ they differentiate f(wrt, bᵢ) with respect to `wrt`.

Data-parallel operators (family "data-parallel", seed 004's `pmap`) take the same batch and split it across the
cell's D devices, one contiguous slice of B/D examples each, `wrt` replicated: `pmap_value` stacks the per-example
values, `pmap_grad` is each device's gradient of its slice's mean loss, averaged across devices (an all-reduce) —
which is the gradient of the whole batch's mean loss, the quantity its reference computes. They are the only
operators planned at D > 1.

Declared-only operators (`newton_dir`, the nested ones) are planned only for problems whose `operators=` lists them:
their result means what they say only under structure the problem vouches for (a diagonal Hessian; derivatives
taken inside the function), which no shape can tell.

Nested operators (family "nested", GradBench's `saddle` and `particle` functions `ff`, `fr`, `rf`, `rr`) evaluate a
problem that takes derivatives inside itself (`adcompare.grad`, model/nesting.py) with one nesting order in force:
the outer derivative's mode, then the inner one's. Their result is the function's own output.
"""
from __future__ import annotations

from dataclasses import dataclass

from adcompare.model.errors import unknown
from adcompare.model.nesting import OPERATOR_PREFIX, ORDERS
from adcompare.model.shapes import Shapes

DATA_PARALLEL = "data-parallel"
NESTED = "nested"
MODE_NAMES = {"f": "forward", "r": "reverse"}


@dataclass(frozen=True)
class OperatorSpec:
    name: str
    meaning: str
    order: int  # 0 value, 1 first derivative, 2 second derivative
    scalar_output: bool = False  # needs f (per example, for vmap_*) to return a scalar
    per_example: bool = False
    takes: str | None = None  # "tangent" or "cotangent": the extra seeded vector it is applied to
    family: str = "first-order"
    data_parallel: bool = False  # splits the batch across the cell's devices (the only operators with D > 1)
    declared_only: bool = False  # planned only for problems that list it in operators= (see the module docstring)


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
    OperatorSpec("pmap_value", "f(x, bᵢ) per example, the batch split across D devices; (B, *f(x, bᵢ).shape)", 0,
                 per_example=True, family=DATA_PARALLEL, data_parallel=True),
    OperatorSpec("pmap_grad", "∇_x of the batch's mean of f(x, bᵢ): per-device gradients of each slice's mean, "
                 "averaged across D devices; shape of x", 1, scalar_output=True, per_example=True,
                 family=DATA_PARALLEL, data_parallel=True),
    # GradBench's kmeans `dir`: J·H⁻¹ with H diagonal, H's diagonal taken as H·1 (exact only where H is diagonal).
    OperatorSpec("newton_dir", "∇f(x) ⊘ diag(∇²f(x)), Newton's step for scalar f whose Hessian is diagonal (as "
                 "the declaring problem vouches), diag(∇²f) computed as ∇²f·1; shape of x", 2, scalar_output=True,
                 family="second-order", declared_only=True),
    *(OperatorSpec(f"{OPERATOR_PREFIX}{order}", f"f(x) with every derivative f takes inside itself (adcompare.grad) "
                   f"in GradBench's order {order!r}: the outer one by {MODE_NAMES[order[0]]} mode, the inner one "
                   f"by {MODE_NAMES[order[1]]} mode; shape of f(x)", 2, family=NESTED, declared_only=True)
      for order in ORDERS),
]
OPERATORS: dict[str, OperatorSpec] = {s.name: s for s in _SPECS}


def spec(name: str) -> OperatorSpec:
    try:
        return OPERATORS[name]
    except KeyError:
        raise unknown("operator", name, OPERATORS) from None


def data_parallel(operator: str) -> bool:
    """Whether `operator` splits its batch across devices: the only operators planned for a device count D > 1."""
    return spec(operator).data_parallel


def devices_unfit(operator: str, devices: int, batch_size: int | None) -> str | None:
    """None when a cell of `operator` can run on `devices` devices with a batch of `batch_size`, else why not."""
    if devices < 1:
        return f"a device count must be at least 1, not {devices}"
    if not data_parallel(operator):
        return None if devices == 1 else f"{operator} runs on one device; only the data-parallel operators " \
                                          f"({', '.join(n for n, s in OPERATORS.items() if s.data_parallel)}) " \
                                          f"split across devices"
    if batch_size is not None and batch_size % devices:
        return f"{operator}: a batch of {batch_size} does not split evenly across {devices} devices; pick a size " \
               f"whose batch divides by {devices}"
    return None


def applicable(operator: str, *, out_shape: tuple[int, ...], example_out_shape: tuple[int, ...] | None,
               has_batch: bool, declared: tuple[str, ...] | None = None) -> str | None:
    """None when `operator` makes sense for a problem with these shapes and declared operators (`declared`: its
    `operators=`, None when it declares none), else why not (one line)."""
    s = spec(operator)
    if s.declared_only and operator not in (declared or ()):
        return (f"{operator} is planned only for a problem that declares it (operators=(..., {operator!r})): its "
                f"meaning rests on structure the problem vouches for")
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
    if operator == "pmap_grad":
        return wrt_shape
    if s.family == NESTED:
        return out_shape
    if operator == "pmap_value" or s.per_example:
        assert batch_size is not None, f"{operator}: the result's shape depends on batch_size; pass it"
        if operator == "pmap_value":
            return (batch_size, *tuple(example_out_shape or ()))
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
        "newton_dir": wrt_shape,
    }[operator]


def minimum_elements(operator: str, shapes: Shapes) -> int:
    """Array elements `operator` must hold at once by its nature, whatever the algorithm: the result, and for the
    Jacobian forms the identity of basis tangents (forward) or cotangents (reverse) that vmap materialises."""
    n_in, n_out = shapes.n_in, shapes.n_out
    if spec(operator).data_parallel:  # wrt replicated on each device, the per-example values, the gradient
        return (shapes.batch or 1) * shapes.n_example_out + 2 * n_in
    if spec(operator).per_example:
        n_ex = shapes.n_example_out
        basis = {"vmap_jacfwd": n_in * n_in, "vmap_jacrev": n_ex * n_ex}.get(operator, 0)
        return (shapes.batch or 1) * (n_ex * n_in + basis)  # vmap materialises one basis per example
    return {
        "jacfwd": n_out * n_in + n_in * n_in,
        "jacrev": n_out * n_in + n_out * n_out,
        "hessian": 2 * n_in * n_in,
    }.get(operator, n_in + n_out)
