"""The JAX-style functional API that jax and torch.func share (grad, jvp, vjp, jacfwd, jacrev, hessian, vmap):
one table of transforms and one of algorithms, for the adapters that hand it their framework's API."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from adcompare.model import nesting
from adcompare.plugin.adapter import Transform

PER_EXAMPLE = (None, 0)  # vmap's in_axes / in_dims: wrt shared, the example argument mapped over its leading axis


def newton_dir(api: Any, f: Callable[..., Any]) -> Callable[..., Any]:
    """∇f ⊘ ∇²f·1, forward over reverse: one JVP of the gradient along ones gives the gradient (its primal) and
    H·1, which is diag(H) where H is diagonal (GradBench's kmeans tools: jvp(grad(cost), [C], [ones]))."""
    gradient = api.grad(f)

    def direction(w: Any) -> Any:
        ones = w * 0 + 1  # ones of w's type, dtype and device, built from w alone: jax and torch.func alike
        g, h_ones = api.jvp(gradient, (w,), (ones,))
        return g / h_ones

    return direction


def nested_derivative(api: Any, xp: Any, basis: Callable[[Any], Any]) -> nesting.Derivative:
    """`adcompare.grad` for a namespace of jax or torch.func: reverse, api.grad; forward, one api.jvp per basis
    vector of x (`basis(x)`: the identity of x's size, dtype and device), stacked — a Python loop, not jacfwd's
    vmap, because GradBench's nested evals test values inside the function, which no vmap allows. The
    transforms compose, so an outer api.grad or api.jvp differentiates through them."""
    def derivative(f: nesting.Scalar, x: Any, mode: str) -> Any:
        if mode == "reverse":
            return api.grad(f)(x)
        identity = basis(x)
        columns = [api.jvp(f, (x,), (xp.reshape(identity[i], x.shape),))[1] for i in range(identity.shape[0])]
        return xp.reshape(xp.stack(columns), x.shape)

    return derivative


def _nested(order: str) -> Transform:
    return lambda api, f: nesting.under(order, f)


# Every adapter's nested_* transform: the problem evaluated with the order in force; its adcompare.grad calls do
# the differentiating.
NESTED_TRANSFORMS: Mapping[str, Transform] = {f"{nesting.OPERATOR_PREFIX}{o}": _nested(o) for o in nesting.ORDERS}


def nested_algorithms(reverse: str, forward: str) -> dict[str, str]:
    """What each nested_* operator does, given how the adapter takes a reverse and a forward derivative."""
    mode = {"r": reverse, "f": forward}
    return {f"{nesting.OPERATOR_PREFIX}{order}": f"outer {mode[order[0]]} over inner {mode[order[1]]} "
            f"(adcompare.grad inside the problem)" for order in nesting.ORDERS}


TRANSFORMS: Mapping[str, Transform] = {  # f is f(w) or, per example, f(w, example), constants bound
    "value": lambda api, f: f,
    "grad": lambda api, f: api.grad(f),
    "jvp": lambda api, f: lambda w, v: api.jvp(f, (w,), (v,))[1],
    "vjp": lambda api, f: lambda w, u: api.vjp(f, w)[1](u)[0],
    "jacfwd": lambda api, f: api.jacfwd(f),
    "jacrev": lambda api, f: api.jacrev(f),
    "hessian": lambda api, f: api.hessian(f),
    "hvp": lambda api, f: lambda w, v: api.jvp(api.grad(f), (w,), (v,))[1],
    "newton_dir": newton_dir,
    "vmap_grad": lambda api, f: api.vmap(api.grad(f), PER_EXAMPLE),
    "vmap_jacfwd": lambda api, f: api.vmap(api.jacfwd(f), PER_EXAMPLE),
    "vmap_jacrev": lambda api, f: api.vmap(api.jacrev(f), PER_EXAMPLE),
    **NESTED_TRANSFORMS,
}


def algorithms(api: str) -> dict[str, str]:
    """What each of TRANSFORMS does, naming the functions of `api` ("jax", "torch.func")."""
    return {
        "value": "plain evaluation",
        "grad": f"reverse mode ({api}.grad)",
        "jvp": f"forward mode ({api}.jvp)",
        "vjp": f"reverse mode ({api}.vjp)",
        "jacfwd": f"forward mode: vmap of JVPs over input basis ({api}.jacfwd)",
        "jacrev": f"reverse mode: vmap of VJPs over output basis ({api}.jacrev)",
        "hessian": f"forward-over-reverse ({api}.hessian = jacfwd(jacrev))",
        "hvp": f"forward-over-reverse ({api}.jvp of {api}.grad)",
        "newton_dir": f"forward-over-reverse: {api}.jvp of {api}.grad along ones gives ∇f and ∇²f·1 in one pass; "
                      f"their quotient",
        "vmap_grad": f"{api}.vmap of reverse-mode {api}.grad",
        "vmap_jacfwd": f"{api}.vmap of {api}.jacfwd",
        "vmap_jacrev": f"{api}.vmap of {api}.jacrev",
        **nested_algorithms(f"reverse ({api}.grad)", f"forward ({api}.jvp per basis vector)"),
    }
