"""JAX adapter: jax.grad/jvp/vjp/jacfwd/jacrev/hessian/vmap, eager (op-by-op) and compiled (jax.jit, ahead of time).

JAX is imported inside the worker only. x64 is switched on for float64 workers (a process-wide switch, which is
why each dtype gets its own worker); GPU memory pre-allocation is disabled by the worker's environment. The
data-parallel operators (jax.pmap, jax.jit of jax.shard_map) are in jax_data_parallel.py.
"""
from __future__ import annotations

import contextvars
import functools
import math
import time
from types import ModuleType
from typing import Any

import numpy as np

from adcompare import hookimpl
from adcompare.model import control_flow, nesting
from adcompare.model.operators import data_parallel
from adcompare.plugin.adapter import Adapter, Bound, Prepared, derived_namespace

from . import functional
from . import jax_data_parallel as parallel

COMPILE_METHOD = "ahead of time: jax.jit(f).lower(...).compile(); timed calls go through the same jax.jit"
# Operators whose transform takes a reverse derivative of the problem's function, so a loop inside it is
# transposed: jax.grad refuses a lax.while_loop ("Reverse-mode differentiation does not work for lax.while_loop
# or lax.fori_loop with dynamic start/stop values"), so there `adcompare.while_loop` runs in its bounded form. The
# nested orders whose outer derivative is reverse (rf, rr) transpose the loops inside the function they
# differentiate (saddle's inner descent, particle's Euler integration).
REVERSE_OPERATORS = frozenset({"grad", "vjp", "jacrev", "hessian", "hvp", "newton_dir", "vmap_grad", "vmap_jacrev",
                               *(f"{nesting.OPERATOR_PREFIX}{order}" for order, (outer, _) in nesting.ORDERS.items()
                                 if outer == "reverse")})
WHILE_FORMS = {
    "while": "adcompare.while_loop as lax.while_loop, adcompare.cond as lax.cond",
    "bounded": "adcompare.while_loop bounded where its state carries a derivative (reverse mode transposes it): "
               "a lax.scan of max_trips steps that takes the body's state while the condition holds and keeps it "
               "frozen after; a lax.while_loop elsewhere; adcompare.cond as lax.cond",
}
DIFFERENTIATED = frozenset({"JVPTracer", "LinearizeTracer"})  # jax 0.10's AD tracers: forward, and jax.grad's
_FORM: contextvars.ContextVar[str] = contextvars.ContextVar("adcompare_jax_while_form", default="while")


def while_form(operator: str) -> str:
    """The form `adcompare.while_loop` takes under jax.jit in a cell of `operator` (WHILE_FORMS)."""
    return "bounded" if operator in REVERSE_OPERATORS else "while"


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
    control_flow.register(staged, while_loop=staged_while(jax), cond=lambda pred, true_fn, false_fn, operands:
                          jax.lax.cond(pred, true_fn, false_fn, *operands))
    return staged


def staged_while(jax: ModuleType) -> control_flow.NativeWhile:
    """`adcompare.while_loop` under jax.jit: lax.while_loop with a trip counter, or, where the cell's operator
    transposes the loop (`while_form`) and the state carries a derivative (a JAX AD tracer: the loop is inside the
    differentiated function, as particle's Euler loop is; its outer descent is not and stays a while loop), the
    bounded form: max_trips steps of a lax.scan, each taking the body's state
    while the condition has held at every step so far (jnp.where) and keeping the state frozen after — the same
    trips and values, and a loop reverse mode can transpose (its residuals are kept for all max_trips steps). The
    body also runs, discarded, on the frozen state: a lax.cond per step would skip it, but cost particle's rr 8×
    here (0.7 s against 0.09 s a call). A body that is not finite there gives NaN derivatives, never wrong ones."""
    lax, jnp = jax.lax, jax.numpy

    def run(cond: control_flow.Cond, body: control_flow.Body, state: control_flow.State, max_trips: int) -> Any:
        if _FORM.get() == "bounded" and any(type(a).__name__ in DIFFERENTIATED for a in state):
            def step(carry: Any, _: Any) -> Any:
                active, s = carry
                go = jnp.logical_and(active, cond(s))
                return (go, tuple(jnp.where(go, new, old) for new, old in zip(body(s), s))), None

            (active, final), _ = lax.scan(step, (jnp.asarray(True), state), None, length=max_trips)
            return final, jnp.logical_and(active, cond(final))

        def more(carry: Any) -> Any:
            trips, s = carry
            return jnp.logical_and(trips < max_trips, cond(s))

        def trip(carry: Any) -> Any:
            trips, s = carry
            return trips + 1, tuple(body(s))

        trips, final = lax.while_loop(more, trip, (jnp.asarray(0, dtype=jnp.int32), state))
        return final, jnp.logical_and(trips >= max_trips, cond(final))

    return run


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

    form = while_form(bound.operator)

    def staged(*flat: Any) -> Any:
        f = problem.bind(xp, dict(zip(names, flat[n:])))
        token = _FORM.set(form)  # read by adcompare.while_loop while jit traces
        try:
            return functional.TRANSFORMS[bound.operator](jax, f)(*flat[:n])
        finally:
            _FORM.reset(token)

    jitted, flat = jax.jit(staged), (*bound.args, *bound.constants.values())
    start = time.perf_counter()
    jitted.lower(*flat).compile()
    seconds = time.perf_counter() - start
    return Prepared(lambda: jitted(*flat), seconds, COMPILE_METHOD, details={"while_loop_form": WHILE_FORMS[form]})


class JaxAdapter(Adapter):
    name = distribution = module = "jax"
    runtime_distributions = ("jaxlib",)
    variants = {"eager": "op-by-op dispatch, no jit", "compiled": "jax.jit, compiled ahead of time"}
    compiles = {"compiled": "eager"}  # jax.jit of the eager transform
    algorithms = {**functional.algorithms("jax"), **parallel.ALGORITHMS["eager"]}
    variant_algorithms = {"compiled": {**parallel.ALGORITHMS["compiled"], **{
        op: f"{algorithm}; {WHILE_FORMS[while_form(op)]}" for op, algorithm in functional.algorithms("jax").items()
        if op.startswith(nesting.OPERATOR_PREFIX)}}}
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
