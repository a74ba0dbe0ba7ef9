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
`tensorflow_namespace.import_tensorflow`), without the Keras and JAX that its own import would load and no
cell uses (1.5 s of a worker's start-up). The operators are in tensorflow_tape.py, the data-parallel ones
(tf.distribute.MirroredStrategy) in tensorflow_distribute.py.
"""
from __future__ import annotations

import importlib.metadata
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from adcompare import hookimpl
from adcompare.model import nesting
from adcompare.model.operators import data_parallel
from adcompare.plugin.adapter import Adapter, Bound, Prepared

from . import tensorflow_distribute as distribute
from . import tensorflow_namespace, tensorflow_tape

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


def trace_ahead(tf: ModuleType, fn: Callable[..., Any], args: tuple[Any, ...], device: str, jit: bool,
                sync: Callable[[Any], None]) -> tuple[Any, float, int]:
    """(concrete function, seconds to trace it and make the first, synced call, traces): see COMPILE_METHOD."""
    signature = [tf.TensorSpec(a.shape, a.dtype) for a in args]
    # autograph off: the problems' loops are static Python, unrolled at trace time, and autograph cannot parse
    # Problem.bind's lambdas anyway (it warns, then runs them unconverted).
    function = tf.function(fn, input_signature=signature, jit_compile=jit, autograph=False)
    start = time.perf_counter()
    with tf.device(device):
        concrete = function.get_concrete_function()
        first = concrete(*args)
    sync(first)
    return concrete, time.perf_counter() - start, function.experimental_get_tracing_count()


class TensorflowAdapter(Adapter):
    name = module = "tensorflow"
    runtime_distributions = ("keras",)
    variants = {
        "eager": "op-by-op (tape.jacobian and vectorized_map retrace their inner tf.function on every call)",
        "graph": "tf.function with a fixed input signature, traced once ahead of time",
        "compiled": "tf.function(jit_compile=True) with a fixed input signature: XLA, compiled ahead of time",
    }
    compiles = {"graph": "eager", "compiled": "eager"}  # both trace the eager code into a graph (XLA for compiled)
    algorithms = {**tensorflow_tape.ALGORITHMS, **distribute.ALGORITHMS["eager"]}
    variant_algorithms = {variant: distribute.ALGORITHMS[variant] for variant in ("graph", "compiled")}
    transforms = tensorflow_tape.TRANSFORMS

    def __init__(self) -> None:
        self._pinned = False  # setup() made the cell's device TensorFlow's only/default one
        self._log_filter: tensorflow_tape.TensorflowLogFilter | None = None

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

    def import_framework(self) -> ModuleType:
        return tensorflow_namespace.import_tensorflow()

    def setup(self, *, dtype: str, device: str, threads: int) -> None:
        tf = self.framework
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

    def _filter(self) -> tensorflow_tape.TensorflowLogFilter:
        if self._log_filter is None:
            self._log_filter = tensorflow_tape.TensorflowLogFilter()
            self.framework.get_logger().addFilter(self._log_filter)
        return self._log_filter

    def _tf_device(self, device: str) -> str:
        return "/GPU:0" if device == "cuda" else "/CPU:0"

    def gpu_unavailable(self, device: str) -> str | None:
        tf = self.framework
        if not tf.config.list_physical_devices("GPU"):
            cuda = "with CUDA" if tf.test.is_built_with_cuda() else "without CUDA"
            return (f"tensorflow: no GPU visible ({self.distribution} {tf.__version__} built {cuda}); "
                    f"install 'tensorflow[and-cuda]' on a machine with an NVIDIA GPU")
        return None

    def device_name(self, device: str) -> str:
        if device == "cuda" and self.device_unavailable(device) is None:
            gpu = self.framework.config.list_physical_devices("GPU")[0]
            return self.framework.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
        return device

    def namespace(self) -> ModuleType:
        xp = tensorflow_namespace.namespace()
        if not nesting.registered(xp):
            nesting.register(xp, tensorflow_tape.nested_derivative(self.framework))
        return xp

    def emulate_host_devices(self, count: int) -> str:
        return distribute.emulate_host_devices(self.framework, count)

    def max_devices(self, device: str) -> int:
        return len(self.framework.config.list_logical_devices("GPU" if device == "cuda" else "CPU"))

    def place(self, array: np.ndarray, device: str) -> Any:
        with self.framework.device(self._tf_device(device)):
            return self.framework.constant(np.array(array))  # a copy: the cell never aliases NumPy memory

    def build(self, bound: Bound) -> Prepared:
        tf, args, log = self.framework, bound.args, self._filter()
        log.fallbacks.clear()
        device = self._tf_device(bound.request.device)
        details: dict[str, Any] = {
            "device": device, "device_pinned_in_setup": self._pinned,
            "forward_mode_traces_cleared": tensorflow_tape.forget_forward_mode_traces(),
            "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        }

        def after_first_call() -> dict[str, Any]:
            return {"pfor_while_loop_fallbacks": list(log.fallbacks)}

        fn, args = (distribute.step(tf, bound, details), ()) if data_parallel(bound.operator) else \
            (self.transforms[bound.operator](tf, bound.f), args)
        if bound.variant == "eager":
            if self._pinned or data_parallel(bound.operator):
                return Prepared(lambda: fn(*args), details=details, after_first_call=after_first_call)

            def run() -> Any:
                with tf.device(device):
                    return fn(*args)

            return Prepared(run, details=details, after_first_call=after_first_call)
        jit = bound.variant == "compiled" and not data_parallel(bound.operator)  # XLA per replica, in the step
        concrete, seconds, traces = trace_ahead(tf, fn, args, device, jit, self.sync)
        details.update(jit_compile=bound.variant == "compiled", traces=traces)
        return Prepared(lambda: concrete(*args), compile_seconds=seconds,
                        compile_method=COMPILE_METHOD[bound.variant], details=details,
                        after_first_call=after_first_call)

    def explain(self, exc: Exception) -> str | None:
        return MATMUL_HINT if any(text in str(exc) for text in MATMUL_RANK) else None

    def sync(self, out: Any) -> None:
        # CPU eager ops and tf.function calls return computed tensors; GPU kernels run asynchronously.
        if "GPU" in getattr(out, "device", ""):
            self.framework.test.experimental.sync_devices()

    def to_numpy(self, out: Any) -> np.ndarray:
        # The tensor's own buffer (EagerTensor.__array__), which the array keeps alive: .numpy() copies it for
        # writers, 0.8 s of BA's 450 MB per-example Jacobian, and the check only reads.
        return np.asarray(out)

    def reset_gpu_peak(self, device: str) -> None:
        self.framework.config.experimental.reset_memory_stats("GPU:0")

    def gpu_peak(self, device: str) -> int | None:
        return int(self.framework.config.experimental.get_memory_info("GPU:0")["peak"])


@hookimpl
def adcompare_adapters():
    return [TensorflowAdapter()]
