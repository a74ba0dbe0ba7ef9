"""PyTorch adapter: torch.func transforms, eager or under torch.compile, plus classic torch.autograd as a variant.

Variants:
- `eager`: torch.func (grad, jvp, vjp, jacfwd, jacrev, hessian, vmap), op by op.
- `eager-autograd`: classic torch.autograd (autograd.grad, forward_ad, autograd.functional). Shown next to
  torch.func because it is the faster eager form for some operators (torch.autograd.grad was about 2× faster
  than torch.func.grad on exp_dot_loss here); neither is hidden.
- `compiled`: torch.compile(fullgraph=True, dynamic=False) around the torch.func function. Dynamo caches per code
  object and every torch.func wrapper shares one, so `torch._dynamo.reset()` runs before each compiled prepare;
  without it the recompile limit is hit and Dynamo silently runs eagerly. A graph break, a recompile in steady
  state or a first call that compiled nothing fails the cell instead.

Data-parallel operators (pmap_value, pmap_grad) go through torch.distributed: a gloo process group of D processes on
this host, the worker as rank 0 and D − 1 spawned helpers (torch_distributed.py), each differentiating its slice
with torch.func, all_reduce(SUM)/D (all_gather for values). `eager` only: torch has no in-process multi-device map
on the CPU, torch.compile in every rank is not built, and on CUDA the route would be NCCL, not built either.

The namespace is array-api-compat's torch namespace with the few names that break torch.func or Dynamo replaced
(torch_namespace.py, `FIXES`). torch is imported inside methods only.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from adcompare import hookimpl
from adcompare.model.errors import CellFailure, UnsupportedOperation
from adcompare.model.operators import data_parallel, devices_unfit
from adcompare.plugin.adapter import Adapter, Bound, Capability, Prepared, Request

from .torch_distributed import FunctionReference, ProcessGroup, RankSpec, free_port
from .torch_namespace import FORWARD_MODE, SCALAR_FIX, fixed_namespace, with_scalar_fix

ALGORITHMS = {
    "value": "plain evaluation",
    "grad": "reverse mode (torch.func.grad)",
    "jvp": "forward mode (torch.func.jvp, dual tensors)",
    "vjp": "reverse mode (torch.func.vjp)",
    "jacfwd": "forward mode: vmap of JVPs over input basis (torch.func.jacfwd)",
    "jacrev": "reverse mode: vmap of VJPs over output basis (torch.func.jacrev)",
    "hessian": "forward-over-reverse (torch.func.hessian = jacfwd(jacrev))",
    "hvp": "forward-over-reverse (torch.func.jvp of torch.func.grad)",
    "vmap_grad": "torch.func.vmap of reverse-mode torch.func.grad",
    "vmap_jacfwd": "torch.func.vmap of torch.func.jacfwd",
    "vmap_jacrev": "torch.func.vmap of torch.func.jacrev",
}

AUTOGRAD_ALGORITHMS = {
    "grad": "reverse mode (torch.autograd.grad on a leaf tensor)",
    "jvp": "forward mode: dual numbers (torch.autograd.forward_ad)",
    "vjp": "reverse mode (torch.autograd.grad with grad_outputs=u)",
    "jacfwd": "forward mode: vmap of JVPs (torch.autograd.functional.jacobian, forward-mode, vectorize=True)",
    "jacrev": "reverse mode: vmap of VJPs over output basis (torch.autograd.functional.jacobian, vectorize=True)",
    "hessian": "forward-over-reverse (torch.autograd.functional.hessian, outer forward-mode, vectorize=True)",
    "hvp": "reverse-over-reverse (torch.autograd.grad of torch.autograd.grad with create_graph=True)",
}
AUTOGRAD_UNSUPPORTED = {
    "value": "value involves no differentiation, so classic autograd adds nothing; see variant 'eager'",
    "vmap_grad": "classic torch.autograd has no per-example transform; use variant 'eager' (torch.func.vmap)",
    "vmap_jacfwd": "classic torch.autograd has no per-example transform; use variant 'eager' (torch.func.vmap)",
    "vmap_jacrev": "classic torch.autograd has no per-example transform; use variant 'eager' (torch.func.vmap)",
}

COMPILE_METHOD = "first call minus steady state"  # torch.compile compiles lazily, on the first call

DATA_PARALLEL = {
    "pmap_grad": "torch.distributed gloo process group of D processes on this host, all_reduce(SUM)/D of "
                 "torch.func.grad of each slice's mean (emulated devices: D CPU processes share this machine's cores)",
    "pmap_value": "torch.distributed gloo process group of D processes on this host, all_gather of torch.func.vmap "
                  "over each slice (emulated devices: D CPU processes share this machine's cores)",
}
DATA_PARALLEL_UNSUPPORTED = {
    "compiled": "torch.compile inside each of the D torch.distributed processes is not built (each rank would "
                "compile its own graph around the collective); use variant 'eager'",
    "eager-autograd": "the torch.distributed route differentiates each slice with torch.func; use variant 'eager'",
}


# --- operators -----------------------------------------------------------------------------------------------

def build_func_operator(torch: ModuleType, operator: str, f: Callable[..., Any]) -> Callable[..., Any]:
    """torch.func form of `operator`. f is f(w) or, per-example, f(w, example), with constants already bound."""
    tf = torch.func
    per_example = (None, 0)  # wrt shared, the batch argument mapped over its leading axis
    return {
        "value": lambda: f,
        "grad": lambda: tf.grad(f),
        "jvp": lambda: lambda w, v: tf.jvp(f, (w,), (v,))[1],
        "vjp": lambda: lambda w, u: tf.vjp(f, w)[1](u)[0],
        "jacfwd": lambda: tf.jacfwd(f),
        "jacrev": lambda: tf.jacrev(f),
        "hessian": lambda: tf.hessian(f),
        "hvp": lambda: lambda w, v: tf.jvp(tf.grad(f), (w,), (v,))[1],
        "vmap_grad": lambda: tf.vmap(tf.grad(f), in_dims=per_example),
        "vmap_jacfwd": lambda: tf.vmap(tf.jacfwd(f), in_dims=per_example),
        "vmap_jacrev": lambda: tf.vmap(tf.jacrev(f), in_dims=per_example),
    }[operator]()


def build_autograd_operator(torch: ModuleType, operator: str, f: Callable[..., Any]) -> Callable[..., Any]:
    """Classic torch.autograd form of `operator`, as an expert writes it: the graph is recorded on every call
    from a leaf that requires grad (the caller passes such a leaf as w)."""
    ag, fwad, functional = torch.autograd, torch.autograd.forward_ad, torch.autograd.functional

    def jvp(w, v):
        with fwad.dual_level():
            return fwad.unpack_dual(f(fwad.make_dual(w, v))).tangent

    def hvp(w, v):
        (g,) = ag.grad(f(w), w, create_graph=True)
        return ag.grad(g, w, grad_outputs=v)[0]

    return {
        "grad": lambda: lambda w: ag.grad(f(w), w)[0],
        "jvp": lambda: jvp,
        "vjp": lambda: lambda w, u: ag.grad(f(w), w, grad_outputs=u)[0],
        "jacfwd": lambda: lambda w: functional.jacobian(f, w, vectorize=True, strategy="forward-mode"),
        "jacrev": lambda: lambda w: functional.jacobian(f, w, vectorize=True),
        "hessian": lambda: lambda w: functional.hessian(f, w, vectorize=True,
                                                        outer_jacobian_strategy="forward-mode"),
        "hvp": lambda: hvp,
    }[operator]()


# --- torch.compile bookkeeping -------------------------------------------------------------------------------

def _counters() -> dict[str, dict[str, int]]:
    from torch._dynamo.utils import counters

    return {group: dict(values) for group, values in counters.items()}


def _inductor_cache_dir() -> Path:
    """Where inductor will look; the worker points TORCHINDUCTOR_CACHE_DIR at a per-run folder."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
    except ImportError:  # private module moved: fall back to the variable inductor documents
        return Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")).resolve()
    return Path(cache_dir())


def _populated(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


def _compile_details(before: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """What Dynamo and inductor did since `before`: graphs, graph breaks, recompiles, cache hits."""
    after = _counters()

    def delta(group: str, key: str | None = None) -> int:
        new, old = after.get(group, {}), before.get(group, {})
        keys = [key] if key else set(new) | set(old)
        return sum(new.get(k, 0) - old.get(k, 0) for k in keys)

    graphs = delta("stats", "unique_graphs")
    hits, misses = delta("inductor", "fxgraph_cache_hit"), delta("inductor", "fxgraph_cache_miss")
    state = "warm" if hits and not misses else "cold" if misses and not hits else "mixed" if hits else "unused"
    details = {
        "graphs_compiled": graphs,
        "recompiles": max(0, graphs - 1),
        "graph_breaks": delta("graph_break"),
        "fallbacks": 0 if graphs else 1,
        "fxgraph_cache_hits": hits,
        "fxgraph_cache_misses": misses,
        "aot_autograd_cache_hits": delta("aot_autograd", "autograd_cache_hit"),
        "inductor_cache": state,
    }
    if not graphs:
        raise CellFailure("torch.compile compiled no graph on the first call, so the cell would run eagerly; "
                          "check for torch.compiler.disable or a skipped frame")
    if details["graph_breaks"] or details["recompiles"]:
        raise CellFailure(f"torch.compile: {details['graph_breaks']} graph break(s), {details['recompiles']} "
                          f"recompile(s) on the first call; the compiled variant must be one graph")
    return details


# --- the adapter ---------------------------------------------------------------------------------------------

class TorchAdapter(Adapter):
    name = "torch"
    distribution = "torch"
    module = "torch"
    runtime_distributions = ("array-api-compat",)
    variants = {
        "eager": "torch.func transforms, op-by-op",
        "eager-autograd": "classic torch.autograd (autograd.grad, forward_ad, autograd.functional), op-by-op",
        "compiled": "torch.compile(fullgraph=True, dynamic=False) of the torch.func transform (inductor)",
    }
    compiles = {"compiled": "eager"}  # torch.compile of the torch.func transform, not of eager-autograd
    slow_variants = frozenset({"compiled"})
    host_processes = 1  # the D of the gloo group this worker was started for (emulate_host_devices)

    def setup(self, *, dtype: str, device: str, threads: int) -> None:
        import torch

        torch.set_num_threads(threads)
        torch.set_float32_matmul_precision("highest")  # torch's default, stated: no TF32 (JAX's adapter matches it)
        try:
            torch.set_num_interop_threads(threads)
        except RuntimeError:  # only settable before the first parallel op; intra-op threads are what matters
            pass

    def gpu_unavailable(self, device: str) -> str | None:
        import torch

        if not torch.cuda.is_available():
            built = f"CUDA {torch.version.cuda}" if torch.version.cuda else "no CUDA"
            return (f"torch: CUDA is not available (torch {torch.__version__} built with {built}, "
                    f"{torch.cuda.device_count()} GPU(s) visible); install a CUDA build on a machine with a GPU")
        return None

    def unusable_after_failure(self, device: str) -> str | None:
        # A failed torch.compile breaks torch.func's global state on the CPU too: in the full suite, after compiled
        # vmap_jacfwd on rbf_kernel_map failed in fake-tensor tracing, every later cell of that worker failed, eager
        # ones included ("InferenceMode::is_enabled() && primal.is_inference() … INTERNAL ASSERT FAILED").
        return super().unusable_after_failure(device) or \
            "a failed torch cell can leave torch.compile's and torch.func's global state broken (seen on the CPU)"

    def device_name(self, device: str) -> str:
        if device == "cuda" and self.device_unavailable(device) is None:
            import torch

            return torch.cuda.get_device_name()
        return device

    def namespace(self) -> ModuleType:
        return fixed_namespace()

    def operator_capability(self, operator: str, variant: str) -> Capability:
        if variant == "eager-autograd":
            if operator in AUTOGRAD_UNSUPPORTED:
                return Capability.unsupported(AUTOGRAD_UNSUPPORTED[operator])
            return Capability.native(AUTOGRAD_ALGORITHMS[operator])
        return Capability.native(ALGORITHMS[operator])

    def data_parallel_capability(self, operator: str, variant: str) -> Capability:
        # Not a loop over slices on one device: D processes, each its own torch, joined by gloo collectives.
        if variant in DATA_PARALLEL_UNSUPPORTED:
            return Capability.unsupported(DATA_PARALLEL_UNSUPPORTED[variant])
        return Capability.native(DATA_PARALLEL[operator])

    def emulate_host_devices(self, count: int) -> str:
        self.host_processes = count  # nothing to set before import: each cell starts its D − 1 helpers itself
        return (f"{count} CPU processes (a torch.distributed gloo group: this worker as rank 0 and {count - 1} "
                f"spawned helpers) share this machine's {os.cpu_count()} cores: overhead and correctness, "
                f"not speed-up")

    def max_devices(self, device: str) -> int:
        return self.host_processes if device == "cpu" else 1

    def prepare(self, request: Request) -> Prepared:
        if data_parallel(request.operator) and request.device != "cpu" and self.capability(
                request.operator, request.variant).supported:
            raise UnsupportedOperation(f"adapter 'torch': {request.operator} on {request.device}: the "
                                       f"torch.distributed route is built for the CPU (gloo); NCCL across GPUs is "
                                       f"not built; use --device cpu")
        return super().prepare(request)

    def _build_data_parallel(self, bound: Bound, details: dict[str, Any]) -> Prepared:
        """pmap_value / pmap_grad through a gloo process group of D processes (torch_distributed.py)."""
        import torch

        request, (w, batch) = bound.request, bound.args
        problem, inputs, world = request.problem, request.inputs, request.devices
        unfit = devices_unfit(request.operator, world, batch.shape[0])
        if unfit:  # the planner never makes such a cell; a direct caller gets the reason, not a silent remainder
            raise UnsupportedOperation(f"adapter 'torch': {unfit}")
        per_rank = batch.shape[0] // world
        address = f"tcp://127.0.0.1:{free_port()}"
        threads = torch.get_num_threads()
        constants = {k: np.asarray(v) for k, v in inputs.constants.items()}
        specs = [RankSpec(FunctionReference.of(problem.function), problem.wrt, problem.batch, constants,
                          np.asarray(inputs.wrt), np.asarray(inputs.batch[r * per_rank:(r + 1) * per_rank]),
                          request.operator, r, world, address, threads) for r in range(world)]
        group = ProcessGroup(torch, self.namespace(), specs[0], specs[1:])
        details.update(backend="gloo", world_size=world, init_method=address, rank0_pid=os.getpid(),
                       helper_pids=group.pids, threads_per_rank=threads, examples_per_rank=per_rank)
        return Prepared(group.step, details=details, close=group.close)

    def place(self, array: np.ndarray, device: str) -> Any:
        import torch

        return torch.tensor(np.asarray(array), device=torch.device(device))  # a copy: never aliases NumPy memory

    def build(self, bound: Bound) -> Prepared:
        import torch

        f, args, (w, *rest) = bound.f, bound.args, bound.args
        details = {"torch_threads": torch.get_num_threads(), "device": str(torch.device(bound.request.device))}
        if data_parallel(bound.operator):
            return self._build_data_parallel(bound, details)
        if bound.variant == "eager-autograd":
            fn = build_autograd_operator(torch, bound.operator, f)
            args = (w.requires_grad_(True), *rest)
            return Prepared(lambda: fn(*args), details=details)
        if bound.operator in FORWARD_MODE and bound.request.dtype != "float64":
            f = with_scalar_fix(f)  # around the problem only: Dynamo cannot trace torch.func's own code under it
            details["scalar_fix"] = SCALAR_FIX
        fn = build_func_operator(torch, bound.operator, f)
        if bound.variant == "eager":
            return Prepared(lambda: fn(*args), details=details)
        return self._prepare_compiled(torch, fn, args, details)

    def _prepare_compiled(self, torch: ModuleType, fn: Callable[..., Any], args: tuple[Any, ...],
                          details: dict[str, Any]) -> Prepared:
        torch._dynamo.reset()  # fresh per cell: torch.func wrappers share one code object (see module doc)
        torch._dynamo.config.fail_on_recompile_limit_hit = True  # never fall back to eager silently
        torch.compiler.set_stance("default")  # the previous compiled cell left "fail_on_recompile" set
        cache = _inductor_cache_dir()
        details = {**details, "inductor_cache_dir": str(cache),
                   "inductor_cache_dir_before": "populated" if _populated(cache / "fxgraph") else "empty"}
        before = _counters()
        compiled = torch.compile(fn, fullgraph=True, dynamic=False)

        def run() -> Any:
            try:
                return compiled(*args)
            except (torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError) as exc:
                # Unsupported: a construct Dynamo cannot trace; UserError: a guard on a data-dependent value
                # (Python control flow on a tensor). Either one breaks the graph, which fullgraph forbids.
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise CellFailure(f"graph break under torch.compile(fullgraph=True): {first}; the compiled "
                                  f"variant does not fall back to eager") from exc

        def after_first_call() -> Mapping[str, Any]:
            found = _compile_details(before)
            torch.compiler.set_stance("fail_on_recompile")  # a recompile during timing raises, not hides
            return found

        return Prepared(run, compile_seconds=None, compile_method=COMPILE_METHOD, details=details,
                        after_first_call=after_first_call)

    def sync(self, out: Any) -> None:
        if out.is_cuda:
            import torch

            torch.cuda.synchronize(out.device)

    def to_numpy(self, out: Any) -> np.ndarray:
        return out.detach().cpu().numpy()

    def reset_gpu_peak(self, device: str) -> None:
        import torch

        torch.cuda.reset_peak_memory_stats()

    def gpu_peak(self, device: str) -> int | None:
        import torch

        return int(torch.cuda.max_memory_allocated())


@hookimpl
def adcompare_adapters():
    return [TorchAdapter()]
