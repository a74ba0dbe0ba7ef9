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

The namespace is array-api-compat's torch namespace; the few names that break torch.func or Dynamo are replaced
in one table, `FIXES`. torch is imported inside methods only.
"""
from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from adcompare import hookimpl
from adcompare.adapter import Adapter, Capability, Prepared, Request
from adcompare.errors import CellFailure

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


# --- namespace fixes -----------------------------------------------------------------------------------------
# Each entry: standard name -> factory(torch, compat_namespace) -> replacement function, for a compat function that
# breaks torch.func or Dynamo, or that is many times slower than the torch function an expert would call. Every
# fix is tested against NumPy and under torch.func.vmap and Dynamo (tests/adapters/test_torch.py).

def _sign(torch: ModuleType, compat: ModuleType) -> Callable[..., Any]:
    def sign(x, /):
        """compat assigns NaN through a boolean mask, which torch.func.vmap and Dynamo cannot batch/trace."""
        if x.dtype.is_complex:
            return compat.sign(x)
        return torch.where(torch.isnan(x), x, torch.sign(x))  # torch.sign(nan) is 0; the standard says nan

    return sign


def _scalar_operand(name: str) -> Callable[[ModuleType, ModuleType], Callable[..., Any]]:
    """compat turns a Python scalar operand into a tensor through torch.result_type, which Dynamo cannot trace
    (a torch op returning a dtype): a graph break. The standard gives the scalar the array's dtype; do that."""

    def factory(torch: ModuleType, compat: ModuleType) -> Callable[..., Any]:
        op = getattr(compat, name)

        def as_tensor(value: Any, other: Any) -> Any:
            if (type(value) in (int, float) and isinstance(other, torch.Tensor) and other.is_floating_point()):
                return torch.as_tensor(value, dtype=other.dtype, device=other.device)
            return value

        def fixed(x1, x2, /, **kwargs):
            return op(as_tensor(x1, x2), as_tensor(x2, x1), **kwargs)

        fixed.__name__ = fixed.__qualname__ = name
        return fixed

    return factory


def _vecdot(torch: ModuleType, compat: ModuleType) -> Callable[..., Any]:
    def vecdot(x1, x2, /, *, axis: int = -1):
        """compat's generic vecdot (moveaxis, broadcast, conj, a (1×n)@(n×1) matmul, indexing) took 70 µs where
        torch.linalg.vecdot, the same contraction, took 3.5 µs at n = 10,000: a speed fix, not a correctness one."""
        if x1.dtype != x2.dtype:  # mixed dtypes: compat's promotion rules apply
            return compat.vecdot(x1, x2, axis=axis)
        return torch.linalg.vecdot(x1, x2, dim=axis)

    return vecdot


FIXES: dict[str, Callable[[ModuleType, ModuleType], Callable[..., Any]]] = {
    "vecdot": _vecdot,
    "sign": _sign,
    "maximum": _scalar_operand("maximum"),
    "minimum": _scalar_operand("minimum"),
    "atan2": _scalar_operand("atan2"),
    "logaddexp": _scalar_operand("logaddexp"),
}


@functools.cache
def fixed_namespace() -> ModuleType:
    """array_api_compat.torch with `FIXES` applied, as a module of its own (compat's module is left untouched)."""
    import array_api_compat.torch as compat
    import torch

    ns = ModuleType("adcompare.adapters.torch.xp", "array_api_compat.torch with adcompare's FIXES applied")
    ns.__dict__.update({k: v for k, v in vars(compat).items() if not k.startswith("__")})
    for name, factory in FIXES.items():
        setattr(ns, name, factory(torch, compat))
    return ns


# --- the one arithmetic fix ----------------------------------------------------------------------------------
# torch.func's forward mode drops the "wrapped number" mark of a Python float meeting a 0-d tensor, so the
# tangent of `xp.vecdot(a, x) / math.sqrt(n)` becomes float64 in a float32 cell (pytorch/pytorch#90065): jvp and
# jacfwd return float64 and hvp fails with "expected m1 and m2 to have the same dtype". Casting the result would
# hide that and cannot rescue hvp; instead such a float becomes a 0-d tensor of the tensor's dtype before the op,
# which is what torch's promotion rules give it anyway. Applied only where it can matter: forward-mode torch.func
# operators in cells narrower than float64 (a Python float is float64 already). Recorded in the cell's details.
FORWARD_MODE = frozenset({"jvp", "jacfwd", "hessian", "hvp", "vmap_jacfwd"})
SCALAR_FIX = ("Python floats meeting 0-d tensors made 0-d tensors of the tensor's dtype "
              "(TorchFunctionMode; torch.func forward mode otherwise upcasts tangents, pytorch/pytorch#90065)")
_ARITHMETIC = frozenset({"add", "sub", "mul", "div", "true_divide", "pow", "__add__", "__radd__", "__sub__",
                         "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__", "__pow__", "__rpow__"})


@functools.cache
def scalar_fix_mode() -> type:
    """The TorchFunctionMode class behind SCALAR_FIX (built on first use: torch is imported lazily)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class PythonFloatsTakeTensorDtype(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if len(args) == 2 and getattr(func, "__name__", "") in _ARITHMETIC:
                a, b = args
                if type(b) is float and isinstance(a, torch.Tensor) and a.dim() == 0 and a.is_floating_point():
                    args = (a, torch.tensor(b, dtype=a.dtype, device=a.device))
            return func(*args, **(kwargs or {}))

    return PythonFloatsTakeTensorDtype


def with_scalar_fix(fn: Callable[..., Any]) -> Callable[..., Any]:
    mode = scalar_fix_mode()

    def fixed(*args: Any) -> Any:
        with mode():
            return fn(*args)

    return fixed


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
    slow_variants = frozenset({"compiled"})

    def setup(self, *, dtype: str, device: str, threads: int) -> None:
        import torch

        torch.set_num_threads(threads)
        torch.set_float32_matmul_precision("highest")  # torch's default, stated: no TF32 (JAX's adapter matches it)
        try:
            torch.set_num_interop_threads(threads)
        except RuntimeError:  # only settable before the first parallel op; intra-op threads are what matters
            pass

    def device_unavailable(self, device: str) -> str | None:
        if device == "cpu":
            return None
        if device != "cuda":
            return f"torch: unknown device {device!r}; use cpu or cuda"
        import torch

        if not torch.cuda.is_available():
            built = f"CUDA {torch.version.cuda}" if torch.version.cuda else "no CUDA"
            return (f"torch: CUDA is not available (torch {torch.__version__} built with {built}, "
                    f"{torch.cuda.device_count()} GPU(s) visible); install a CUDA build on a machine with a GPU")
        return None

    def device_name(self, device: str) -> str:
        if device == "cuda" and self.device_unavailable(device) is None:
            import torch

            return torch.cuda.get_device_name()
        return device

    def namespace(self) -> ModuleType:
        return fixed_namespace()

    def capability(self, operator: str, variant: str) -> Capability:
        if variant not in self.variants:
            return Capability.unsupported(f"torch has no variant {variant!r}; use one of {sorted(self.variants)}")
        if variant == "eager-autograd":
            if operator in AUTOGRAD_UNSUPPORTED:
                return Capability.unsupported(AUTOGRAD_UNSUPPORTED[operator])
            return Capability.native(AUTOGRAD_ALGORITHMS[operator])
        return Capability.native(ALGORITHMS[operator])

    def prepare(self, request: Request) -> Prepared:
        import torch

        capability = self.capability(request.operator, request.variant)
        if not capability.supported:
            from adcompare.errors import UnsupportedOperation

            raise UnsupportedOperation(f"adapter 'torch': {request.operator} in variant {request.variant!r}: "
                                       f"{capability.reason}")
        unavailable = self.device_unavailable(request.device)
        if unavailable:
            from adcompare.errors import UnsupportedOperation

            raise UnsupportedOperation(unavailable)
        device = torch.device(request.device)
        inputs = request.inputs

        def put(a: np.ndarray) -> Any:
            return torch.tensor(np.asarray(a), device=device)  # a copy: the cell never aliases NumPy memory

        # Constants bound once, before any transform: they are closed over, never differentiated or mapped.
        f = request.problem.bind(self.namespace(), {k: put(v) for k, v in inputs.constants.items()})
        extra = next((a for a in (inputs.batch, inputs.tangent, inputs.cotangent) if a is not None), None)
        w = put(inputs.wrt)
        args = (w,) + ((put(extra),) if extra is not None else ())
        details = {"torch_threads": torch.get_num_threads(), "device": str(device)}

        if request.variant == "eager-autograd":
            fn = build_autograd_operator(torch, request.operator, f)
            args = (w.requires_grad_(True),) + args[1:]
            return Prepared(lambda: fn(*args), details=details)

        if request.operator in FORWARD_MODE and request.dtype != "float64":
            f = with_scalar_fix(f)  # around the problem only: Dynamo cannot trace torch.func's own code under it
            details["scalar_fix"] = SCALAR_FIX
        fn = build_func_operator(torch, request.operator, f)
        if request.variant == "eager":
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

    def reset_peak_device_memory(self, device: str) -> None:
        if device == "cuda" and self.device_unavailable(device) is None:
            import torch

            torch.cuda.reset_peak_memory_stats()

    def peak_device_memory(self, device: str) -> int | None:
        if device == "cuda" and self.device_unavailable(device) is None:
            import torch

            return int(torch.cuda.max_memory_allocated())
        return None



@hookimpl
def adcompare_adapters():
    return [TorchAdapter()]
