"""JAX's data-parallel operators (pmap_value, pmap_grad): its two current mechanisms, one per variant.

JAX 0.10's `jax.pmap` docstring calls it the "old way" and recommends `jax.shard_map` (pmap is now implemented with
jit and shard_map), but both are public and the seed's article shows pmap, so both are measured:
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

import os
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from adcompare.plugin.adapter import Bound, Prepared

ALGORITHMS = {  # variant → operator → mechanism; the cell's device count is appended ("… over 4 devices")
    "eager": {
        "pmap_grad": "jax.pmap (compiled on its first call), each device's gradient of its slice's mean averaged "
                     "by jax.lax.pmean",
        "pmap_value": "jax.pmap (compiled on its first call) of jax.vmap over each device's slice",
    },
    "compiled": {
        "pmap_grad": "jax.jit of jax.shard_map over a 1-D Mesh (ahead of time), each device's gradient of its "
                     "slice's mean averaged by jax.lax.pmean",
        "pmap_value": "jax.jit of jax.shard_map over a 1-D Mesh (ahead of time) of jax.vmap over each device's "
                      "slice",
    },
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


def emulate_host_devices(count: int) -> str:
    flag = f"--xla_force_host_platform_device_count={count}"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()  # read when jax starts
    return (f"{count} emulated host devices (XLA_FLAGS {flag}) share this machine's {os.cpu_count()} cores: "
            f"overhead and correctness, not speed-up")


def build(jax: ModuleType, bound: Bound, staged: ModuleType, compile_method: str) -> Prepared:
    """pmap_value / pmap_grad over the request's D devices: jax.pmap (eager) or jit(shard_map) (compiled ahead of
    time, with `staged` as its namespace). The inputs are placed on the devices beforehand (w replicated, the
    batch one slice per device), as a training step finds them; the constants are closed over (the problems with
    a batch have none or few)."""
    jnp = jax.numpy
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    request, (w, batch) = bound.request, bound.args
    count = request.devices
    devices = jax.devices("cpu" if request.device == "cpu" else "gpu")[:count]
    per_example = bound.f if bound.variant == "eager" else request.problem.bind(staged, dict(bound.constants))
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

    def sharded(w, xs):
        if grad:  # w varies per device, so its gradient is this device's alone (see the module docstring)
            return jax.lax.pmean(slice_grad(jax.lax.pcast(w, AXIS, to="varying"), xs), AXIS)
        return values(w, xs)

    out_spec = PartitionSpec() if grad else PartitionSpec(AXIS)
    jitted = jax.jit(jax.shard_map(sharded, mesh=mesh, in_specs=(PartitionSpec(), PartitionSpec(AXIS)),
                                   out_specs=out_spec))
    wd = jax.device_put(w, NamedSharding(mesh, PartitionSpec()))
    xd = jax.device_put(batch, NamedSharding(mesh, PartitionSpec(AXIS)))
    start = time.perf_counter()
    jitted.lower(wd, xd).compile()
    seconds = time.perf_counter() - start
    return Prepared(lambda: jitted(wd, xd), seconds, compile_method)
