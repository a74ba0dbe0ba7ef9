"""TensorFlow's data-parallel operators (pmap_value, pmap_grad): `tf.distribute.MirroredStrategy` over the cell's
D devices.

On the CPU the D devices are logical CPU devices (`tf.config.set_logical_device_configuration`, set in
`emulate_host_devices` before the runtime starts) that share this machine's cores. `w` is copied to every replica
and the batch split into one contiguous slice per replica beforehand
(`experimental_distribute_values_from_function`), as a training step finds them; `strategy.run` computes each
replica's values (tf.vectorized_map over its slice) or its GradientTape gradient of its slice's mean, and
`strategy.gather` stacks the values / `strategy.reduce(MEAN)` averages the gradients onto one device. Per variant:
- `eager`: the strategy's eager path (TensorFlow runs each replica in a thread of its own and warns of "significant
  overhead"; tf.vectorized_map retraces its inner function every call, as in the eager per-example operators).
- `graph`: strategy.run and the reduction inside one tf.function, traced ahead of time.
- `compiled`: the same tf.function, with each replica's step a tf.function(jit_compile=True) called through
  strategy.run: XLA compiles the per-replica step, the cross-device reduction stays in the graph. jit_compile on
  the outer function instead is what MirroredStrategy does not support: it compiles the whole step as one XLA
  cluster on one device (the gradient came out right but ran on CPU:0; gather failed reading CPU:1's copy).
"""
from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from adcompare.plugin.adapter import Bound

MIRRORED = "tf.distribute.MirroredStrategy"
EAGERLY, IN_GRAPH = f"{MIRRORED}, eagerly (a thread per replica)", f"{MIRRORED} in a tf.function"
GRADIENT = "GradientTape gradient of its slice's mean, strategy.reduce(MEAN) onto one device"
VALUES = "tf.vectorized_map over each replica's slice, strategy.gather"
ALGORITHMS = {  # variant → operator → mechanism; the cell's device count is appended ("… over 4 devices")
    "eager": {"pmap_grad": f"{EAGERLY}: strategy.run of each replica's {GRADIENT}",
              "pmap_value": f"{EAGERLY}: strategy.run of {VALUES}"},
    "graph": {"pmap_grad": f"{IN_GRAPH}: strategy.run of each replica's {GRADIENT}",
              "pmap_value": f"{IN_GRAPH}: strategy.run of {VALUES}"},
    "compiled": {"pmap_grad": f"{IN_GRAPH}: strategy.run of each replica's XLA-compiled (jit_compile) {GRADIENT}",
                 "pmap_value": f"{IN_GRAPH}: strategy.run of an XLA-compiled (jit_compile) {VALUES}"},
}


def emulate_host_devices(tf: ModuleType, count: int) -> str:
    """`count` logical CPU devices; importing TensorFlow starts no runtime, and they must be set before the first
    op."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    return (f"{count} logical CPU devices (tf.config.set_logical_device_configuration) share this machine's "
            f"{os.cpu_count()} cores: overhead and correctness, not speed-up")


def step(tf: ModuleType, bound: Bound, details: dict[str, Any]) -> Callable[[], Any]:
    """One data-parallel step over the request's D devices, its inputs already on the replicas and its result on
    one device; what the strategy is goes into `details`."""
    request, (w, batch) = bound.request, bound.args
    kind = "GPU" if request.device == "cuda" else "CPU"
    names = [d.name for d in tf.config.list_logical_devices(kind)[:request.devices]]
    strategy = tf.distribute.MirroredStrategy(devices=names)
    per_replica = batch.shape[0] // request.devices

    def replica_slice(context: Any) -> Any:  # called under each replica's device scope: the copy lands there
        start = context.replica_id_in_sync_group * per_replica
        return tf.identity(batch[start:start + per_replica])

    ws = strategy.experimental_distribute_values_from_function(lambda context: tf.identity(w))
    xs = strategy.experimental_distribute_values_from_function(replica_slice)

    def values(w: Any, xs: Any) -> Any:
        return tf.vectorized_map(lambda example: bound.f(w, example), xs)

    def slice_grad(w: Any, xs: Any) -> Any:  # this replica's gradient of its slice's mean
        with tf.GradientTape() as tape:
            tape.watch(w)
            y = tf.reduce_mean(values(w, xs))
        return tape.gradient(y, w)

    body = slice_grad if bound.operator == "pmap_grad" else values
    if bound.variant == "compiled":  # XLA per replica; the strategy's reduction outside it (module docstring)
        body = tf.function(body, jit_compile=True, autograph=False)

    def run() -> Any:
        out = strategy.run(body, args=(ws, xs))
        if bound.operator == "pmap_grad":
            return strategy.reduce(tf.distribute.ReduceOp.MEAN, out, axis=None)
        return strategy.gather(out, axis=0)

    cross = getattr(strategy.extended, "_cross_device_ops", None)  # private, but what does the reduction
    details.update(replicas=strategy.num_replicas_in_sync, replica_devices=names,
                   cross_device_ops=type(cross).__name__ if cross is not None else "default")
    return run
