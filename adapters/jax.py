"""JAX adapter: jax.grad/jvp/vjp/jacfwd/jacrev/hessian/vmap, eager (op-by-op) and compiled (jax.jit, ahead of time).

JAX is imported inside the worker only. x64 is switched on for float64 workers (a process-wide switch, which is
why each dtype gets its own worker); GPU memory pre-allocation is disabled by the worker's environment.
"""
from __future__ import annotations

import functools
import time
from types import ModuleType
from typing import Any

import numpy as np

from adcompare import hookimpl, loops
from adcompare.adapter import Adapter, Bound, Capability, Prepared

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


COMPILE_METHOD = "ahead of time: jax.jit(f).lower(...).compile(); timed calls go through the same jax.jit"


@functools.cache
def staged_namespace() -> ModuleType:
    """jax.numpy for the compiled variant, as a module of its own whose `adcompare.fold` is `lax.scan`: jit then
    compiles a problem's loop body once instead of unrolling it. The eager variant gets jax.numpy itself, so its
    loops stay op by op."""
    import jax
    import jax.numpy as jnp

    ns = ModuleType("adcompare.adapters.jax.staged", "jax.numpy; adcompare.fold is jax.lax.scan")
    ns.__dict__.update({k: v for k, v in vars(jnp).items() if not k.startswith("__")})

    def scan(step, carry, xs):
        return jax.lax.scan(lambda c, x: (step(c, x), None), carry, xs)[0]

    loops.register(ns, scan)
    return ns


def build_operator(jax: ModuleType, operator: str, f):
    """The transformed function for `operator`; f is f(w) or, per-example, f(w, example), constants bound."""
    per_example = (None, 0)  # wrt shared, the batch argument mapped over its leading axis
    return {
        "value": lambda: f,
        "grad": lambda: jax.grad(f),
        "jvp": lambda: lambda w, v: jax.jvp(f, (w,), (v,))[1],
        "vjp": lambda: lambda w, u: jax.vjp(f, w)[1](u)[0],
        "jacfwd": lambda: jax.jacfwd(f),
        "jacrev": lambda: jax.jacrev(f),
        "hessian": lambda: jax.hessian(f),
        "hvp": lambda: lambda w, v: jax.jvp(jax.grad(f), (w,), (v,))[1],
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
    compiles = {"compiled": "eager"}  # jax.jit of the eager transform

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

    def gpu_unavailable(self, device: str) -> str | None:
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

    def operator_capability(self, operator: str, variant: str) -> Capability:
        return Capability.native(ALGORITHMS[operator])

    def place(self, array: np.ndarray, device: str) -> Any:
        import jax

        return jax.device_put(np.asarray(array), self._device(device))

    def build(self, bound: Bound) -> Prepared:
        import jax

        args = bound.args
        if bound.variant == "eager":
            fn = build_operator(jax, bound.operator, bound.f)
            return Prepared(lambda: fn(*args))
        # Compiled: the constants are positional arguments of the jitted function. Closed over, JAX would embed
        # them in the program as literals (megabytes at large sizes, and open to constant folding); a dict
        # argument costs a pytree flatten per call. AOT compilation fills jax.jit's own cache, so the timed
        # calls take jax.jit's C++ fast path, not the slower Python call of the AOT `Compiled` object.
        problem, xp, names, n = bound.request.problem, staged_namespace(), tuple(bound.constants), len(args)

        def staged(*flat: Any) -> Any:
            f = problem.bind(xp, dict(zip(names, flat[n:])))
            return build_operator(jax, bound.operator, f)(*flat[:n])

        jitted, flat = jax.jit(staged), (*args, *bound.constants.values())
        start = time.perf_counter()
        jitted.lower(*flat).compile()
        seconds = time.perf_counter() - start
        return Prepared(lambda: jitted(*flat), seconds, COMPILE_METHOD)

    def sync(self, out: Any) -> None:
        import jax

        jax.block_until_ready(out)

    def to_numpy(self, out: Any) -> np.ndarray:
        return np.asarray(out)

    def gpu_peak(self, device: str) -> int | None:
        stats = self._device(device).memory_stats() or {}
        return stats.get("peak_bytes_in_use")


@hookimpl
def adcompare_adapters():
    return [JaxAdapter()]
