"""JAX adapter: jax.grad/jvp/vjp/jacfwd/jacrev/hessian/vmap, eager (op-by-op) and compiled (jax.jit, ahead of time).

JAX is imported inside the worker only. x64 is switched on for float64 workers (a process-wide switch, which is
why each dtype gets its own worker); GPU memory pre-allocation is disabled by the worker's environment.

Data-parallel operators (pmap_value, pmap_grad) use JAX's two current mechanisms, one per variant. JAX 0.10's
`jax.pmap` docstring calls it the "old way" and recommends `jax.shard_map` (pmap is now implemented with jit and
shard_map), but both are public and the seed's article shows pmap, so both are measured:
- `eager`: `jax.pmap` — the seed's API. It is not op-by-op: pmap always compiles, on its first call (so the
  compile is inside the first call, as for any compile-on-first-call framework).
- `compiled`: `jax.jit` of `jax.shard_map` over a 1-D Mesh, compiled ahead of time like every compiled cell.
In both, each device differentiates its slice's mean loss and `jax.lax.pmean` averages the gradients. Under
shard_map, `w` is first cast to device-varying (`jax.lax.pcast(..., to="varying")`): otherwise shard_map's
autodiff differentiates the replicated `w` as one value and already sums the per-device gradients (a psum), and
the pmean after it leaves D times the gradient — the pmap code moved into shard_map unchanged is wrong by D.
On the CPU the D devices are emulated host devices (`--xla_force_host_platform_device_count`, set before jax is
imported) that share this machine's cores.
"""
from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from adcompare import hookimpl
from adcompare.model import loops
from adcompare.plugin.adapter import Adapter, Bound, Capability, Prepared

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
DATA_PARALLEL = {  # variant → mechanism; the cell's device count is appended ("… over 4 devices")
    "eager": "jax.pmap (compiled on its first call), each device's gradient of its slice's mean averaged by "
             "jax.lax.pmean",
    "compiled": "jax.jit of jax.shard_map over a 1-D Mesh (ahead of time), each device's gradient of its slice's "
                "mean averaged by jax.lax.pmean",
}
VALUE_PARALLEL = {
    "eager": "jax.pmap (compiled on its first call) of jax.vmap over each device's slice",
    "compiled": "jax.jit of jax.shard_map over a 1-D Mesh (ahead of time) of jax.vmap over each device's slice",
}
AXIS = "batch"  # the mesh axis / pmap axis name the devices are collected under


@dataclass(frozen=True)
class Stacked:
    """jax.pmap's result (D, …) and the shape the operator's result has: the per-device axis is merged (values) or
    dropped (the pmean-ed gradient, equal on every device) when converting, outside the timed call, so the timed
    region holds the pmap call alone, as it holds the shard_map call alone."""

    out: Any
    shape: tuple[int, ...]
    replicated: bool  # every device holds the same value (pmap_grad): keep device 0's

    def numpy(self) -> np.ndarray:
        out = np.asarray(self.out)
        return out[0] if self.replicated else out.reshape(self.shape)


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

    def data_parallel_capability(self, operator: str, variant: str) -> Capability:
        return Capability.native((DATA_PARALLEL if operator == "pmap_grad" else VALUE_PARALLEL)[variant])

    def emulate_host_devices(self, count: int) -> str:
        flag = f"--xla_force_host_platform_device_count={count}"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()  # read when jax starts
        return (f"{count} emulated host devices (XLA_FLAGS {flag}) share this machine's {os.cpu_count()} cores: "
                f"overhead and correctness, not speed-up")

    def max_devices(self, device: str) -> int:
        import jax

        return len(jax.devices("cpu" if device == "cpu" else "gpu"))

    def place(self, array: np.ndarray, device: str) -> Any:
        import jax

        return jax.device_put(np.asarray(array), self._device(device))

    def build(self, bound: Bound) -> Prepared:
        import jax

        if bound.request.devices != 1 or bound.operator in ("pmap_value", "pmap_grad"):
            return self._build_data_parallel(bound)
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

    def _build_data_parallel(self, bound: Bound) -> Prepared:
        """pmap_value / pmap_grad over the request's D devices: jax.pmap (eager) or jit(shard_map) (compiled).
        The inputs are placed on the devices beforehand (w replicated, the batch one slice per device), as a
        training step finds them; the constants are closed over (the problems with a batch have none or few)."""
        import jax
        import jax.numpy as jnp
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        request, (w, batch) = bound.request, bound.args
        count = request.devices
        devices = jax.devices("cpu" if request.device == "cpu" else "gpu")[:count]
        per_example = bound.f if bound.variant == "eager" else \
            request.problem.bind(staged_namespace(), dict(bound.constants))
        values = jax.vmap(per_example, in_axes=(None, 0))
        grad = bound.operator == "pmap_grad"

        def slice_grad(w, xs):  # this device's gradient of its slice's mean
            return jax.grad(lambda w: jnp.mean(values(w, xs)))(w)

        mesh = Mesh(np.array(devices), (AXIS,))
        if bound.variant == "eager":
            body = (lambda w, xs: jax.lax.pmean(slice_grad(w, xs), AXIS)) if grad else values
            mapped = jax.pmap(body, axis_name=AXIS, in_axes=(0, 0), devices=devices)
            spread = NamedSharding(mesh, PartitionSpec(AXIS))  # axis 0 over the devices: pmap's own layout
            ws = jax.device_put(jnp.broadcast_to(w, (count, *w.shape)), spread)
            xs = jax.device_put(jnp.reshape(batch, (count, batch.shape[0] // count, *batch.shape[1:])), spread)
            shape = tuple(w.shape) if grad else (batch.shape[0], *jax.eval_shape(values, w, batch).shape[1:])
            return Prepared(lambda: Stacked(mapped(ws, xs), shape, grad))

        def body(w, xs):
            if grad:  # w varies per device, so its gradient is this device's alone (see the module docstring)
                return jax.lax.pmean(slice_grad(jax.lax.pcast(w, AXIS, to="varying"), xs), AXIS)
            return values(w, xs)

        out_spec = PartitionSpec() if grad else PartitionSpec(AXIS)
        jitted = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(PartitionSpec(), PartitionSpec(AXIS)),
                                       out_specs=out_spec))
        wd = jax.device_put(w, NamedSharding(mesh, PartitionSpec()))
        xd = jax.device_put(batch, NamedSharding(mesh, PartitionSpec(AXIS)))
        start = time.perf_counter()
        jitted.lower(wd, xd).compile()
        seconds = time.perf_counter() - start
        return Prepared(lambda: jitted(wd, xd), seconds, COMPILE_METHOD)

    def sync(self, out: Any) -> None:
        import jax

        jax.block_until_ready(out.out if isinstance(out, Stacked) else out)

    def to_numpy(self, out: Any) -> np.ndarray:
        return out.numpy() if isinstance(out, Stacked) else np.asarray(out)

    def gpu_peak(self, device: str) -> int | None:
        stats = self._device(device).memory_stats() or {}
        return stats.get("peak_bytes_in_use")


@hookimpl
def adcompare_adapters():
    return [JaxAdapter()]
