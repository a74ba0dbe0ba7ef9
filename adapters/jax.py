"""JAX adapter: jax.grad/jvp/vjp/jacfwd/jacrev/hessian/vmap, eager (op-by-op) and compiled (jax.jit, ahead of time).

JAX is imported inside the worker only. x64 is switched on for float64 workers (a process-wide switch, which is
why each dtype gets its own worker); GPU memory pre-allocation is disabled by the worker's environment.
"""
from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import numpy as np

from adcompare import hookimpl
from adcompare.adapter import Adapter, Capability, Prepared, Request
from adcompare.errors import UnsupportedOperation

ALGORITHMS = {
    "value": "plain evaluation",
    "grad": "reverse mode (jax.grad)",
    "jvp": "forward mode (jax.jvp)",
    "vjp": "reverse mode (jax.vjp)",
    "jacfwd": "forward mode: vmap of JVPs over input basis (jax.jacfwd)",
    "jacrev": "reverse mode: vmap of VJPs over output basis (jax.jacrev)",
    "hessian": "forward-over-reverse (jax.hessian = jacfwd(jacrev))",
    "hvp": "forward-over-reverse (jax.jvp of jax.grad)",
    "vmap_grad": "jax.vmap of reverse-mode jax.grad",
    "vmap_jacfwd": "jax.vmap of jax.jacfwd",
    "vmap_jacrev": "jax.vmap of jax.jacrev",
}


def build_operator(jax: ModuleType, operator: str, f):
    """The transformed function for `operator`; f is f(w, consts) or, per-example, f(w, example, consts)."""
    per_example = (None, 0, None)
    return {
        "value": lambda: f,
        "grad": lambda: jax.grad(f),
        "jvp": lambda: lambda w, v, c: jax.jvp(lambda w_: f(w_, c), (w,), (v,))[1],
        "vjp": lambda: lambda w, u, c: jax.vjp(lambda w_: f(w_, c), w)[1](u)[0],
        "jacfwd": lambda: jax.jacfwd(f),
        "jacrev": lambda: jax.jacrev(f),
        "hessian": lambda: jax.hessian(f),
        "hvp": lambda: lambda w, v, c: jax.jvp(jax.grad(lambda w_: f(w_, c)), (w,), (v,))[1],
        "vmap_grad": lambda: jax.vmap(jax.grad(f), in_axes=per_example),
        "vmap_jacfwd": lambda: jax.vmap(jax.jacfwd(f), in_axes=per_example),
        "vmap_jacrev": lambda: jax.vmap(jax.jacrev(f), in_axes=per_example),
    }[operator]()


class JaxAdapter(Adapter):
    name = "jax"
    distribution = "jax"
    module = "jax"
    runtime_distributions = ("jaxlib",)
    variants = {"eager": "op-by-op dispatch, no jit", "compiled": "jax.jit, compiled ahead of time"}

    def setup(self, *, dtype: str, device: str, threads: int) -> None:
        import jax

        jax.config.update("jax_enable_x64", dtype == "float64")
        # float32 means IEEE float32 on every device: on GPUs JAX's default runs float32 matmuls in TF32 (about
        # 1e-3 relative error, seen on an H100), torch's does not, and a comparison would compare precisions.
        jax.config.update("jax_default_matmul_precision", "highest")
        if device != "cpu" and self.device_unavailable(device) is None:
            jax.config.update("jax_default_device", self._device(device))
        else:
            jax.config.update("jax_default_device", jax.devices("cpu")[0])

    def _device(self, device: str):
        import jax

        return jax.devices("cpu" if device == "cpu" else "gpu")[0]

    def device_unavailable(self, device: str) -> str | None:
        if device == "cpu":
            return None
        if device != "cuda":
            return f"jax: unknown device {device!r}; use cpu or cuda"
        import jax

        try:
            jax.devices("gpu")
        except RuntimeError as exc:
            return f"jax: no GPU backend ({str(exc).splitlines()[0]}); install jax[cuda12] on a CUDA machine"
        return None

    def device_name(self, device: str) -> str:
        return getattr(self._device(device), "device_kind", device)

    def namespace(self) -> ModuleType:
        import jax.numpy as jnp

        return jnp

    def capability(self, operator: str, variant: str) -> Capability:
        if variant not in self.variants:
            return Capability.unsupported(f"jax has no variant {variant!r}; use one of {sorted(self.variants)}")
        return Capability.native(ALGORITHMS[operator])

    def prepare(self, request: Request) -> Prepared:
        import jax

        capability = self.capability(request.operator, request.variant)
        if not capability.supported:
            raise UnsupportedOperation(capability.reason)
        xp = self.namespace()
        problem, inputs = request.problem, request.inputs
        device = self._device(request.device)

        def put(a: np.ndarray) -> Any:
            return jax.device_put(np.asarray(a), device)

        consts = {k: put(v) for k, v in inputs.constants.items()}
        if inputs.batch is not None:
            def f(w, example, c):
                return problem.bind(xp, c)(w, example)
        else:
            def f(w, c):
                return problem.bind(xp, c)(w)

        fn = build_operator(jax, request.operator, f)
        extra = inputs.tangent if inputs.tangent is not None else inputs.cotangent
        if inputs.batch is not None:
            extra = inputs.batch
        args = (put(inputs.wrt),) + ((put(extra),) if extra is not None else ()) + (consts,)

        if request.variant == "compiled":
            start = time.perf_counter()
            compiled = jax.jit(fn).lower(*args).compile()
            seconds = time.perf_counter() - start
            return Prepared(lambda: compiled(*args), seconds, "ahead of time: jax.jit(f).lower(...).compile()")
        return Prepared(lambda: fn(*args))

    def sync(self, out: Any) -> None:
        import jax

        jax.block_until_ready(out)

    def to_numpy(self, out: Any) -> np.ndarray:
        return np.asarray(out)

    def peak_device_memory(self, device: str) -> int | None:
        if device == "cpu":
            return None
        stats = self._device(device).memory_stats() or {}
        return stats.get("peak_bytes_in_use")



@hookimpl
def adcompare_adapters():
    return [JaxAdapter()]
