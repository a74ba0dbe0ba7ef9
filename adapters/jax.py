"""JAX adapter: jax.grad/jvp/vjp/jacfwd/jacrev/hessian/vmap, eager (op-by-op) and compiled (jax.jit, ahead of time).

JAX is imported inside the worker only. x64 is switched on for float64 workers (a process-wide switch, which is
why each dtype gets its own worker); GPU memory pre-allocation is disabled by the worker's environment. The
data-parallel operators (jax.pmap, jax.jit of jax.shard_map) are in jax_data_parallel.py.
"""
from __future__ import annotations

import functools
import math
import time
from types import ModuleType
from typing import Any

import numpy as np

from adcompare import hookimpl
from adcompare.model import nesting
from adcompare.model.operators import data_parallel
from adcompare.plugin.adapter import Adapter, Bound, Prepared, derived_namespace

from . import functional
from . import jax_data_parallel as parallel

COMPILE_METHOD = "ahead of time: jax.jit(f).lower(...).compile(); timed calls go through the same jax.jit"


@functools.cache
def staged_namespace() -> ModuleType:
    """jax.numpy for the compiled variant, as a module of its own whose `adcompare.fold` is `lax.scan`: jit then
    compiles a problem's loop body once instead of unrolling it. The eager variant gets jax.numpy itself, so its
    loops stay op by op."""
    import jax

    def scan(step, carry, xs):
        return jax.lax.scan(lambda c, x: (step(c, x), None), carry, xs)[0]

    staged = derived_namespace("adcompare.adapters.jax.staged", "jax.numpy; adcompare.fold is jax.lax.scan",
                               jax.numpy, fold=scan)
    nesting.register(staged, nested_derivative(jax, staged))
    return staged


def nested_derivative(jax: ModuleType, xp: ModuleType) -> nesting.Derivative:
    """`adcompare.grad` under JAX: jax.grad, or jax.jvp per basis vector (functional.nested_derivative)."""
    return functional.nested_derivative(jax, xp, lambda x: jax.numpy.eye(math.prod(x.shape), dtype=x.dtype))


def compiled(jax: ModuleType, bound: Bound) -> Prepared:
    """jax.jit of the operator's transform, compiled ahead of time. The constants are positional arguments of the
    jitted function: closed over, JAX would embed them in the program as literals (megabytes at large sizes, and
    open to constant folding); a dict argument costs a pytree flatten per call. AOT compilation fills jax.jit's
    own cache, so the timed calls take jax.jit's C++ fast path, not the slower Python call of the AOT `Compiled`
    object."""
    problem, xp, names, n = bound.request.problem, staged_namespace(), tuple(bound.constants), len(bound.args)

    def staged(*flat: Any) -> Any:
        f = problem.bind(xp, dict(zip(names, flat[n:])))
        return functional.TRANSFORMS[bound.operator](jax, f)(*flat[:n])

    jitted, flat = jax.jit(staged), (*bound.args, *bound.constants.values())
    start = time.perf_counter()
    jitted.lower(*flat).compile()
    seconds = time.perf_counter() - start
    return Prepared(lambda: jitted(*flat), seconds, COMPILE_METHOD)


class JaxAdapter(Adapter):
    name = distribution = module = "jax"
    runtime_distributions = ("jaxlib",)
    variants = {"eager": "op-by-op dispatch, no jit", "compiled": "jax.jit, compiled ahead of time"}
    compiles = {"compiled": "eager"}  # jax.jit of the eager transform
    algorithms = {**functional.algorithms("jax"), **parallel.ALGORITHMS["eager"]}
    variant_algorithms = {"compiled": parallel.ALGORITHMS["compiled"]}
    transforms = functional.TRANSFORMS

    def setup(self, *, dtype: str, device: str, threads: int) -> None:
        jax = self.framework
        jax.config.update("jax_enable_x64", dtype == "float64")
        # float32 means IEEE float32 on every device: on GPUs JAX's default runs float32 matmuls in TF32 (about
        # 1e-3 relative error, seen on an H100), torch's does not, and a comparison would compare precisions.
        jax.config.update("jax_default_matmul_precision", "highest")
        gpu = device != "cpu" and self.device_unavailable(device) is None
        jax.config.update("jax_default_device", self._device(device if gpu else "cpu"))

    def _device(self, device: str) -> Any:
        return self.framework.devices("cpu" if device == "cpu" else "gpu")[0]

    def gpu_unavailable(self, device: str) -> str | None:
        try:
            self.framework.devices("gpu")
        except RuntimeError as exc:
            return f"jax: no GPU backend ({str(exc).splitlines()[0]}); install jax[cuda12] on a CUDA machine"
        return None

    def device_name(self, device: str) -> str:
        return getattr(self._device(device), "device_kind", device)

    def namespace(self) -> ModuleType:
        jnp = self.framework.numpy
        if not nesting.registered(jnp):
            nesting.register(jnp, nested_derivative(self.framework, jnp))
        return jnp

    def emulate_host_devices(self, count: int) -> str:
        return parallel.emulate_host_devices(count)

    def max_devices(self, device: str) -> int:
        return len(self.framework.devices("cpu" if device == "cpu" else "gpu"))

    def place(self, array: np.ndarray, device: str) -> Any:
        return self.framework.device_put(np.asarray(array), self._device(device))

    def build(self, bound: Bound) -> Prepared:
        if bound.request.devices != 1 or data_parallel(bound.operator):
            return parallel.build(self.framework, bound, staged_namespace(), COMPILE_METHOD)
        return super().build(bound) if bound.variant == "eager" else compiled(self.framework, bound)

    def sync(self, out: Any) -> None:
        self.framework.block_until_ready(out.out if isinstance(out, parallel.Stacked) else out)

    def to_numpy(self, out: Any) -> np.ndarray:
        return out.numpy() if isinstance(out, parallel.Stacked) else np.asarray(out)

    def gpu_peak(self, device: str) -> int | None:
        return (self._device(device).memory_stats() or {}).get("peak_bytes_in_use")


@hookimpl
def adcompare_adapters():
    return [JaxAdapter()]
