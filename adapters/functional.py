"""The JAX-style functional API that jax and torch.func share (grad, jvp, vjp, jacfwd, jacrev, hessian, vmap):
one table of transforms and one of algorithms, for the adapters that hand it their framework's API."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

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
    }
