"""TensorFlow adapter: GradientTape (reverse) and ForwardAccumulator (forward), eager, graph and XLA.

Variants:
- `eager`: op by op. `tape.jacobian` and `tf.vectorized_map` wrap their loop body in a fresh tf.function on
  every eager call, so eager Jacobians and per-example operators retrace each time (~100 ms against ~0.5 ms in
  a tf.function here): that is what eager TensorFlow users get, and it is reported as it is.
- `graph`: `tf.function` with a fixed input signature: traced once, in `prepare`.
- `compiled`: `tf.function(jit_compile=True)` with a fixed input signature: XLA compiles on the first call.
For graph and compiled, `prepare` traces (`get_concrete_function`) and makes one call, timed together as the
cell's compile time (see COMPILE_METHOD); the timed callable is the concrete function itself, so steady state
has no signature matching and no way to retrace.

The worker pins the device in `setup` (CPU workers hide the GPUs, CUDA workers see only the first GPU, with
memory growth on so TensorFlow does not take the whole card), before any op runs, together with the thread
policy (`tf.config.threading`). TensorFlow is imported inside methods only, quietly (see
`tensorflow_namespace.import_tensorflow`); importing it also imports jax when installed (~0.6 s of worker
start-up, reported by the worker, not hidden).

Data-parallel operators (pmap_value, pmap_grad) use `tf.distribute.MirroredStrategy` over the cell's D devices:
on the CPU, D logical CPU devices (`tf.config.set_logical_device_configuration`, set in `emulate_host_devices`
before the runtime starts) that share this machine's cores. `w` is copied to every replica and the batch split
into one contiguous slice per replica beforehand (`experimental_distribute_values_from_function`), as a training
step finds them; `strategy.run` computes each replica's values (tf.vectorized_map over its slice) or its
GradientTape gradient of its slice's mean, and `strategy.gather` stacks the values / `strategy.reduce(MEAN)` averages
the gradients onto one device. Per variant:
- `eager`: the strategy's eager path (TensorFlow runs each replica in a thread of its own and warns of "significant
  overhead"; tf.vectorized_map retraces its inner function every call, as in the eager per-example operators).
- `graph`: strategy.run and the reduction inside one tf.function, traced ahead of time.
- `compiled`: the same tf.function, with each replica's step a tf.function(jit_compile=True) called through
  strategy.run: XLA compiles the per-replica step, the cross-device reduction stays in the graph. jit_compile on
  the outer function instead is what MirroredStrategy does not support: it compiles the whole step as one XLA
  cluster on one device (the gradient came out right but ran on CPU:0; gather failed reading CPU:1's copy).

`tape.jacobian` and `tf.vectorized_map` vectorise with pfor and fall back to a `tf.while_loop` for an op pfor
cannot convert; the fallback is logged by TensorFlow, caught here and recorded in the cell's details
(`pfor_while_loop_fallbacks`), so a looped Jacobian is never reported as a vectorised one.
"""
from __future__ import annotations

import importlib.metadata
import logging
import os
import time
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import numpy as np

from adcompare import hookimpl
from adcompare.model.errors import CellFailure
from adcompare.model.operators import data_parallel
from adcompare.plugin.adapter import Adapter, Bound, Capability, Prepared

from . import tensorflow_namespace

PFOR = "pfor, or a tf.while_loop where pfor cannot convert an op (recorded per cell)"
ALGORITHMS = {
    "value": "plain evaluation",
    "grad": "reverse mode (tf.GradientTape.gradient)",
    "jvp": "forward mode (tf.autodiff.ForwardAccumulator.jvp)",
    "vjp": "reverse mode (tf.GradientTape.gradient with output_gradients=u)",
    "jacfwd": f"forward mode: tf.vectorized_map of ForwardAccumulator JVPs over the input basis ({PFOR})",
    "jacrev": f"reverse mode: VJPs over output rows vectorised by tf.GradientTape.jacobian ({PFOR})",
    "hessian": f"reverse-over-reverse: tf.GradientTape.jacobian of an inner GradientTape.gradient ({PFOR})",
    "hvp": "forward-over-reverse: ForwardAccumulator.jvp of GradientTape.gradient",
    "vmap_grad": f"tf.vectorized_map over examples of GradientTape.gradient ({PFOR})",
    "vmap_jacfwd": f"tf.vectorized_map over examples of the forward-mode Jacobian above ({PFOR})",
    "vmap_jacrev": f"tf.vectorized_map over examples of GradientTape.jacobian ({PFOR})",
}
COMPILE_METHOD = {
    "graph": "ahead of time in prepare: trace (tf.function.get_concrete_function) + first call (graph "
             "optimisation runs on it); includes one execution",
    "compiled": "ahead of time in prepare: trace (tf.function.get_concrete_function) + first call (XLA "
                "compiles on it); includes one execution",
}
DISTRIBUTIONS = ("tensorflow-cpu", "tensorflow", "tensorflow-gpu", "tf-nightly")
MATMUL_RANK = ("Shape must be rank 2 but is rank 1", "In[0] and In[1] ndims must be >= 2",
               "In[0] and In[1] has different ndims")  # graph, and the two eager spellings
MATMUL_HINT = ("TensorFlow's `@` is tf.linalg.matmul, which needs rank >= 2 operands, and the problem applies `@` to "
               "a 1-d array (under tf.vectorized_map one example is 1-d); write xp.matmul(a, b), which handles 1-d "
               "operands as the Array API says")
DATA_PARALLEL = {  # variant → mechanism; the cell's device count is appended ("… over 4 devices")
    "eager": "tf.distribute.MirroredStrategy, eagerly (a thread per replica): strategy.run of each replica's "
             "GradientTape gradient of its slice's mean, strategy.reduce(MEAN) onto one device",
    "graph": "tf.distribute.MirroredStrategy in a tf.function: strategy.run of each replica's GradientTape gradient "
             "of its slice's mean, strategy.reduce(MEAN) onto one device",
    "compiled": "tf.distribute.MirroredStrategy in a tf.function: strategy.run of each replica's XLA-compiled "
                "(jit_compile) GradientTape gradient of its slice's mean, strategy.reduce(MEAN) onto one device",
}
VALUE_PARALLEL = {
    "eager": "tf.distribute.MirroredStrategy, eagerly (a thread per replica): strategy.run of tf.vectorized_map over "
             "each replica's slice, strategy.gather",
    "graph": "tf.distribute.MirroredStrategy in a tf.function: strategy.run of tf.vectorized_map over each "
             "replica's slice, strategy.gather",
    "compiled": "tf.distribute.MirroredStrategy in a tf.function: strategy.run of an XLA-compiled (jit_compile) "
                "tf.vectorized_map over each replica's slice, strategy.gather",
}
FALLBACK = "Using a while_loop for converting"
EAGER_STRATEGY = "Using MirroredStrategy eagerly has significant overhead"
RETRACING = "triggered tf.function retracing"


def tensorflow() -> ModuleType:
    return tensorflow_namespace.import_tensorflow()


class TensorflowLogFilter(logging.Filter):
    """Collects pfor's while_loop fallbacks for the cell's details; drops the retracing warnings that eager
    tape.jacobian / vectorized_map trigger on every call and MirroredStrategy's eager-overhead warning (both
    documented above, not news to a reader of stderr)."""

    def __init__(self) -> None:
        super().__init__()
        self.fallbacks: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if FALLBACK in message:
            if len(self.fallbacks) < 20:
                self.fallbacks.append(message.splitlines()[0][:300])
            return False
        return RETRACING not in message and EAGER_STRATEGY not in message


def explained(call: Callable[[], Any]) -> Any:
    """call(), with TensorFlow's rank error from a 1-d `@` turned into a CellFailure that names the fix."""
    try:
        return call()
    except Exception as exc:
        if any(text in str(exc) for text in MATMUL_RANK):
            raise CellFailure(MATMUL_HINT) from exc
        raise


# --- operators -----------------------------------------------------------------------------------------------

def build_operator(tf: ModuleType, operator: str, f: Callable[..., Any]) -> Callable[..., Any]:
    """`operator` as a function of (w,) or (w, extra); f is f(w) or, per-example, f(w, example)."""

    def grad(w, *rest):
        with tf.GradientTape() as tape:
            tape.watch(w)
            y = f(w, *rest)
        return tape.gradient(y, w)

    def jvp(w, v, *rest):
        with tf.autodiff.ForwardAccumulator(w, v) as acc:
            y = f(w, *rest)
        return acc.jvp(y, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    def vjp(w, u):
        with tf.GradientTape() as tape:
            tape.watch(w)
            y = f(w)
        return tape.gradient(y, w, output_gradients=u, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    def jacrev(w, *rest):
        with tf.GradientTape() as tape:
            tape.watch(w)
            y = f(w, *rest)
        return tape.jacobian(y, w, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    def jacfwd(w, *rest):
        n = int(np.prod(w.shape.as_list()))
        basis = tf.reshape(tf.eye(n, dtype=w.dtype), [n] + w.shape.as_list())
        columns = tf.vectorized_map(lambda e: jvp(w, e, *rest), basis)  # (n, *out)
        rank = columns.shape.rank
        rows = tf.transpose(columns, list(range(1, rank)) + [0])  # (*out, n)
        return tf.reshape(rows, columns.shape.as_list()[1:] + w.shape.as_list())

    def hessian(w):
        with tf.GradientTape() as outer:
            outer.watch(w)
            with tf.GradientTape() as inner:
                inner.watch(w)
                y = f(w)
            g = inner.gradient(y, w)
        return outer.jacobian(g, w, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    def hvp(w, v):
        with tf.autodiff.ForwardAccumulator(w, v) as acc:
            with tf.GradientTape() as tape:
                tape.watch(w)
                y = f(w)
            g = tape.gradient(y, w)
        return acc.jvp(g, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    def per_example(op: Callable[..., Any]) -> Callable[..., Any]:
        return lambda w, batch: tf.vectorized_map(lambda example: op(w, example), batch)

    return {
        "value": lambda: f,
        "grad": lambda: grad,
        "jvp": lambda: jvp,
        "vjp": lambda: vjp,
        "jacfwd": lambda: jacfwd,
        "jacrev": lambda: jacrev,
        "hessian": lambda: hessian,
        "hvp": lambda: hvp,
        "vmap_grad": lambda: per_example(grad),
        "vmap_jacfwd": lambda: per_example(jacfwd),
        "vmap_jacrev": lambda: per_example(jacrev),
    }[operator]()


def trace_ahead(tf: ModuleType, fn: Callable[..., Any], args: tuple[Any, ...], device: str, jit: bool,
                sync: Callable[[Any], None]) -> tuple[Any, float, int]:
    """(concrete function, seconds to trace it and make the first, synced call, traces): see COMPILE_METHOD."""
    signature = [tf.TensorSpec(a.shape, a.dtype) for a in args]
    # autograph off: the problems' loops are static Python, unrolled at trace time, and autograph cannot parse
    # Problem.bind's lambdas anyway (it warns, then runs them unconverted).
    function = tf.function(fn, input_signature=signature, jit_compile=jit, autograph=False)
    start = time.perf_counter()
    with tf.device(device):
        concrete = explained(function.get_concrete_function)
        first = concrete(*args)
    sync(first)
    return concrete, time.perf_counter() - start, function.experimental_get_tracing_count()


# --- the adapter ---------------------------------------------------------------------------------------------

class TensorflowAdapter(Adapter):
    name = "tensorflow"
    module = "tensorflow"
    runtime_distributions = ("keras",)
    variants = {
        "eager": "op-by-op (tape.jacobian and vectorized_map retrace their inner tf.function on every call)",
        "graph": "tf.function with a fixed input signature, traced once ahead of time",
        "compiled": "tf.function(jit_compile=True) with a fixed input signature: XLA, compiled ahead of time",
    }
    compiles = {"graph": "eager", "compiled": "eager"}  # both trace the eager code into a graph (XLA for compiled)

    def __init__(self) -> None:
        self._pinned = False  # setup() made the cell's device TensorFlow's only/default one
        self._log_filter: TensorflowLogFilter | None = None

    @property
    def distribution(self) -> str:  # type: ignore[override]
        """Whichever TensorFlow distribution is installed (they share the module name)."""
        for dist in DISTRIBUTIONS:
            try:
                importlib.metadata.version(dist)
                return dist
            except importlib.metadata.PackageNotFoundError:
                continue
        return "tensorflow"

    def setup(self, *, dtype: str, device: str, threads: int) -> None:
        tf = tensorflow()
        self._filter()
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
            gpus = tf.config.list_physical_devices("GPU")
            if device == "cuda" and gpus:
                tf.config.set_visible_devices(gpus[:1], "GPU")
                tf.config.experimental.set_memory_growth(gpus[0], True)
            else:
                tf.config.set_visible_devices([], "GPU")
            self._pinned = True
        except RuntimeError:  # the runtime already started (an op ran before setup): place per call instead
            self._pinned = False

    def _filter(self) -> TensorflowLogFilter:
        if self._log_filter is None:
            self._log_filter = TensorflowLogFilter()
            tensorflow().get_logger().addFilter(self._log_filter)
        return self._log_filter

    def _tf_device(self, device: str) -> str:
        return "/GPU:0" if device == "cuda" else "/CPU:0"

    def gpu_unavailable(self, device: str) -> str | None:
        tf = tensorflow()
        if not tf.config.list_physical_devices("GPU"):
            cuda = "with CUDA" if tf.test.is_built_with_cuda() else "without CUDA"
            return (f"tensorflow: no GPU visible ({self.distribution} {tf.__version__} built {cuda}); "
                    f"install 'tensorflow[and-cuda]' on a machine with an NVIDIA GPU")
        return None

    def device_name(self, device: str) -> str:
        if device == "cuda" and self.device_unavailable(device) is None:
            tf = tensorflow()
            gpu = tf.config.list_physical_devices("GPU")[0]
            return tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
        return device

    def namespace(self) -> ModuleType:
        return tensorflow_namespace.namespace()

    def operator_capability(self, operator: str, variant: str) -> Capability:
        return Capability.native(ALGORITHMS[operator])

    def data_parallel_capability(self, operator: str, variant: str) -> Capability:
        return Capability.native((DATA_PARALLEL if operator == "pmap_grad" else VALUE_PARALLEL)[variant])

    def emulate_host_devices(self, count: int) -> str:
        tf = tensorflow()  # importing starts no runtime; the logical devices must be set before the first op
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
        return (f"{count} logical CPU devices (tf.config.set_logical_device_configuration) share this machine's "
                f"{os.cpu_count()} cores: overhead and correctness, not speed-up")

    def max_devices(self, device: str) -> int:
        return len(tensorflow().config.list_logical_devices("GPU" if device == "cuda" else "CPU"))

    def place(self, array: np.ndarray, device: str) -> Any:
        with tensorflow().device(self._tf_device(device)):
            return tensorflow().constant(np.array(array))  # a copy: the cell never aliases NumPy memory

    def build(self, bound: Bound) -> Prepared:
        tf, args, log = tensorflow(), bound.args, self._filter()
        log.fallbacks.clear()
        device = self._tf_device(bound.request.device)
        details: dict[str, Any] = {
            "device": device, "device_pinned_in_setup": self._pinned,
            "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        }

        def after_first_call() -> dict[str, Any]:
            return {"pfor_while_loop_fallbacks": list(log.fallbacks)}

        if data_parallel(bound.operator):
            return self._build_data_parallel(bound, details, after_first_call)
        fn = build_operator(tf, bound.operator, bound.f)
        if bound.variant == "eager":
            if self._pinned:
                def run() -> Any:
                    return explained(lambda: fn(*args))
            else:
                def run() -> Any:
                    with tf.device(device):
                        return explained(lambda: fn(*args))

            return Prepared(run, details=details, after_first_call=after_first_call)

        jit = bound.variant == "compiled"
        concrete, seconds, traces = trace_ahead(tf, fn, args, device, jit, self.sync)
        details.update(jit_compile=jit, traces=traces)
        return Prepared(lambda: concrete(*args), compile_seconds=seconds,
                        compile_method=COMPILE_METHOD[bound.variant], details=details,
                        after_first_call=after_first_call)

    def _build_data_parallel(self, bound: Bound, details: dict[str, Any],
                             after_first_call: Callable[[], Mapping[str, Any]]) -> Prepared:
        """pmap_value / pmap_grad through tf.distribute.MirroredStrategy over the request's D devices (see the
        module docstring): the inputs are on the replicas before the timed call, the result on one device."""
        tf, request, (w, batch) = tensorflow(), bound.request, bound.args
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

        def step() -> Any:
            out = strategy.run(body, args=(ws, xs))
            if bound.operator == "pmap_grad":
                return strategy.reduce(tf.distribute.ReduceOp.MEAN, out, axis=None)
            return strategy.gather(out, axis=0)

        cross = getattr(strategy.extended, "_cross_device_ops", None)  # private, but what does the reduction
        details.update(replicas=strategy.num_replicas_in_sync, replica_devices=names,
                       cross_device_ops=type(cross).__name__ if cross is not None else "default")
        if bound.variant == "eager":
            return Prepared(lambda: explained(step), details=details, after_first_call=after_first_call)
        concrete, seconds, traces = trace_ahead(tf, step, (), self._tf_device(request.device), False, self.sync)
        details.update(jit_compile=bound.variant == "compiled", traces=traces)
        return Prepared(concrete, compile_seconds=seconds, compile_method=COMPILE_METHOD[bound.variant],
                        details=details, after_first_call=after_first_call)

    def sync(self, out: Any) -> None:
        # CPU eager ops and tf.function calls return computed tensors; GPU kernels run asynchronously.
        if "GPU" in getattr(out, "device", ""):
            tensorflow().test.experimental.sync_devices()

    def to_numpy(self, out: Any) -> np.ndarray:
        return out.numpy()

    def reset_gpu_peak(self, device: str) -> None:
        tensorflow().config.experimental.reset_memory_stats("GPU:0")

    def gpu_peak(self, device: str) -> int | None:
        return int(tensorflow().config.experimental.get_memory_info("GPU:0")["peak"])


@hookimpl
def adcompare_adapters():
    return [TensorflowAdapter()]
