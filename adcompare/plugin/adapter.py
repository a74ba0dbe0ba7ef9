"""The Adapter contract: how a framework plugs in. See docs/adapters.md for a complete example.

An adapter is mostly data declared on its class — variants, the algorithm of each operator (`algorithms`), the
transform that builds it (`transforms`), what an error means (`explain`) — plus the few methods only it can write.
It never imports its framework at module import time: `adcompare list` and the parent process stay framework-free;
`self.framework` imports it on first use, inside the worker process that runs its cells.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import importlib.util
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from adcompare.model import loops
from adcompare.model.errors import CellFailure, UnsupportedOperation
from adcompare.model.fingerprint import installed_versions
from adcompare.model.operators import data_parallel, minimum_elements
from adcompare.model.problem import Problem
from adcompare.model.shapes import Shapes
from adcompare.model.support import Support

STANDARD_VARIANTS = ("eager", "compiled")  # planned for every adapter: one it lacks is reported unsupported


@dataclass(frozen=True)
class Capability:
    """Whether an adapter can run an operator in a variant, and how: the algorithm in a few words."""

    support: Support
    algorithm: str = ""
    reason: str = ""  # why unsupported, or why emulated

    @classmethod
    def native(cls, algorithm: str) -> "Capability":
        return cls(Support.NATIVE, algorithm)

    @classmethod
    def emulated(cls, algorithm: str, reason: str = "") -> "Capability":
        return cls(Support.EMULATED, algorithm, reason)

    @classmethod
    def unsupported(cls, reason: str) -> "Capability":
        return cls(Support.UNSUPPORTED, "", reason)

    @property
    def supported(self) -> bool:
        return self.support is not Support.UNSUPPORTED


@dataclass(frozen=True)
class Availability:
    installed: bool
    version: str | None = None
    reason: str = ""  # why not installed/usable


@dataclass(frozen=True)
class CellInputs:
    """NumPy inputs of one cell, already in the cell's dtype. The adapter converts and places them."""

    wrt: np.ndarray
    constants: Mapping[str, np.ndarray]  # includes the batch argument unless the operator is per-example
    batch: np.ndarray | None  # the batch argument for per-example operators, else None
    tangent: np.ndarray | None  # v for jvp/hvp
    cotangent: np.ndarray | None  # u for vjp
    # What made wrt, constants and batch, where a worker built them from its size and keeps them read-only for its
    # next cells (cell_inputs' `reuse`): the reference keys its caches on it instead of hashing their bytes.
    origin: str = ""


@dataclass(frozen=True)
class Request:
    """Everything `Adapter.prepare` needs to build one cell's callable."""

    problem: Problem
    operator: str
    variant: str
    device: str
    dtype: str
    inputs: CellInputs
    devices: int = 1  # the data-parallel operators split `inputs.batch` across this many devices of `device`


@dataclass(frozen=True)
class Bound:
    """A request with its inputs placed on the cell's device and the problem's constants bound: what the
    per-framework `Adapter.build` turns into a callable. The constants are closed over by `f`, never
    differentiated or mapped; `constants` holds the same placed arrays for a framework that passes them on."""

    request: Request
    f: Callable[..., Any]  # f(w) or, for per-example operators, f(w, example)
    args: tuple[Any, ...]  # (w,) or (w, extra): extra is the batch, the tangent or the cotangent
    constants: Mapping[str, Any]  # the placed constants, by name (already inside f)

    @property
    def operator(self) -> str:
        return self.request.operator

    @property
    def variant(self) -> str:
        return self.request.variant


@dataclass(frozen=True)
class Prepared:
    """A prepared cell: `run()` evaluates the operator once and returns the framework's (unsynced) result."""

    run: Callable[[], Any]
    compile_seconds: float | None = None  # measured inside prepare, ahead of time, when the framework allows
    # How compile_seconds was obtained, e.g. "ahead of time: jit.lower().compile()". Begin it with "ahead of
    # time" when prepare paid the compile (the first call then excludes it; compile cost charges both).
    compile_method: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)  # recompiles, cache state, … (JSON-able)
    after_first_call: Callable[[], Mapping[str, Any]] | None = None  # extra details gathered after the first call
    # Releases what the cell holds beyond memory (torch's gloo helper processes); run_cell calls it when the cell
    # is done, whatever its outcome. None: nothing to release.
    close: Callable[[], None] | None = None


Transform = Callable[[Any, Callable[..., Any]], Callable[..., Any]]  # (framework API, f) → callable of bound.args
Declared = Capability | str  # an entry of `Adapter.algorithms`: a bare string is a native algorithm


def derived_namespace(name: str, doc: str, base: ModuleType | None = None, names: Mapping[str, Any] | None = None,
                      *, fold: loops.NativeFold | None = None) -> ModuleType:
    """A namespace module of its own: `base`'s public names (base itself is left untouched) with `names` added or
    replaced, and, given `fold`, the framework's loop registered for it (`adcompare.fold` then runs as that loop).
    The one way adapters derive the `xp` they hand to problems from a framework's module."""
    namespace = ModuleType(name, doc)
    if base is not None:
        namespace.__dict__.update({k: v for k, v in vars(base).items() if not k.startswith("__")})
    namespace.__dict__.update(names or {})
    if fold is not None:
        loops.register(namespace, fold)
    return namespace


class Adapter(ABC):
    """Base class for framework adapters. Declare on the class what the framework does — `variants`,
    `algorithms` (and `variant_algorithms`), `transforms` — write `namespace` and `to_numpy`, `place` when your
    arrays are not NumPy's, `build` when a variant compiles, and register the adapter through a hook.

    `capability` and `prepare` are shared: `capability` reads the tables and answers for variants the adapter
    does not have (one message); `prepare` refuses what `capability` declares unsupported and a device this
    machine lacks, places the inputs, binds the constants and builds the argument tuple, then calls `build`
    (by default `transforms[operator]`, called op by op), and turns an error `explain` recognises into a
    `CellFailure` naming the fix. An adapter may still override `capability` or `prepare` whole.
    """

    name: ClassVar[str]
    distribution: ClassVar[str]  # the pip distribution whose version is reported, e.g. "jax"
    module: ClassVar[str]  # the importable module, e.g. "jax"; `framework` imports it
    runtime_distributions: ClassVar[tuple[str, ...]] = ()  # more versions worth recording, e.g. ("jaxlib",)
    variants: ClassVar[Mapping[str, str]] = {"eager": "op-by-op", "compiled": "compiled"}
    missing_variants: ClassVar[Mapping[str, str]] = {}  # standard variants it lacks -> why, e.g. "no compiler"
    # Which variants run compiled code, and the eager variant whose code each compiles (its twin in the report's
    # compile cost); a variant not listed is eager. Declared, never read off a name: TensorFlow's `graph` compiles
    # `eager`, torch's `eager-autograd` is eager. The default is the standard variants' meaning.
    compiles: ClassVar[Mapping[str, str]] = {"compiled": "eager"}
    devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")
    # operator → its algorithm in a few words (native), or a Capability (emulated, unsupported), in every variant;
    # `variant_algorithms[variant]` overrides entries for one variant. An operator listed nowhere is unsupported.
    algorithms: ClassVar[Mapping[str, Declared]] = {}
    variant_algorithms: ClassVar[Mapping[str, Mapping[str, Declared]]] = {}
    # operator → transform(framework API, f) returning the operator's callable of `bound.args`; the default
    # `build` calls `transforms[operator](self.framework, bound.f)` op by op.
    transforms: ClassVar[Mapping[str, Transform]] = {}
    # The reason for data-parallel operators (pmap_value, pmap_grad) when `algorithms` lists none; an adapter with
    # a mechanism lists them and overrides `max_devices` and (for the CPU) `emulate_host_devices`.
    no_data_parallel: ClassVar[str] = "declares no data-parallel (multi-device) mechanism"
    # False: `emulate_host_devices` must run before the framework is imported (JAX, TensorFlow fix their device list
    # then), so each CPU device count gets a worker of its own. True: it sets nothing process-wide and may be called
    # before any cell (torch starts its gloo group per cell), so one worker runs the cells of every device count.
    host_devices_per_cell: ClassVar[bool] = False
    slow_variants: ClassVar[frozenset[str]] = frozenset()  # compile for seconds per cell: few in the quick suite

    @property
    def framework(self) -> ModuleType:
        """The framework's module, imported on first use — inside the worker, never when listing: every adapter's
        one way to reach its framework (a property, not an attribute, so the adapter stays picklable)."""
        module = sys.modules.get(self.module)
        return module if module is not None else self.import_framework()

    def import_framework(self) -> ModuleType:
        """Import `module` (behind `framework`); override when the import needs settings first (TensorFlow's
        logging)."""
        return importlib.import_module(self.module)

    def compiled_from(self, variant: str) -> str:
        """The eager variant that `variant` compiles, or "" when `variant` is eager (see `compiles`)."""
        return self.compiles.get(variant, "")

    def planned_variants(self) -> tuple[str, ...]:
        """The variants `adcompare run` plans for this adapter: the standard ones and its own."""
        return tuple(dict.fromkeys((*STANDARD_VARIANTS, *self.variants)))

    def available(self) -> Availability:
        """Installed and importable, found without importing the framework."""
        if importlib.util.find_spec(self.module) is None:
            return Availability(False, None, f"{self.module} is not installed; pip install 'adcompare[{self.name}]'")
        try:
            version = importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            version = None
        return Availability(True, version)

    def setup(self, *, dtype: str, device: str, threads: int) -> None:
        """Called once in the worker before any cell: import the framework, apply dtype/thread/device policy."""

    def device_unavailable(self, device: str) -> str | None:
        """None when `device` can run here, else why not. Called in the worker (may import the framework)."""
        if device == "cpu":
            return None
        if device not in self.devices:
            return f"{self.name}: unknown device {device!r}; use {' or '.join(self.devices)}"
        return self.gpu_unavailable(device)

    def gpu_unavailable(self, device: str) -> str | None:
        """Why a declared GPU device cannot run on this machine, or None. Called for devices other than cpu."""
        return f"{self.name}: device {device!r} is not supported by this adapter"

    def device_name(self, device: str) -> str:
        """A human name for the device actually used (e.g. the GPU model)."""
        return device

    @abstractmethod
    def namespace(self) -> ModuleType:
        """The Array API namespace handed to problems as `xp`."""

    def capability(self, operator: str, variant: str) -> Capability:
        """Declared support and algorithm for `operator` in `variant`, read from the tables. Must not import the
        framework."""
        if variant not in self.variants:
            why = self.missing_variants.get(variant) or f"{self.name} has no variant {variant!r}"
            return Capability.unsupported(f"{why}; use variant {' or '.join(map(repr, self.variants))}")
        declared = self.variant_algorithms.get(variant, {}).get(operator) or self.algorithms.get(operator)
        if isinstance(declared, Capability):
            return declared
        if declared:
            return Capability.native(declared)
        if data_parallel(operator):  # never a single-device loop passed off as the real thing
            return Capability.unsupported(f"{self.name} {self.no_data_parallel}")
        return Capability.unsupported(f"adapter {self.name!r} declares no algorithm for {operator}")

    def emulate_host_devices(self, count: int) -> str:
        """Called in the worker before `setup` (before the framework is imported) when its cells run on `count` > 1
        CPU devices — or, where `host_devices_per_cell`, before each such cell — : set up `count` emulated host
        devices (JAX: --xla_force_host_platform_device_count) and say what was done, e.g. "4 emulated host devices
        share this machine's 2 cores" (recorded with each cell).
        Default: "" (no emulation; `max_devices("cpu")` then stays 1 and such cells are unsupported)."""
        return ""

    def max_devices(self, device: str) -> int:
        """How many devices of kind `device` the data-parallel operators can use in this worker (real GPUs, or
        the emulated host devices set up at start). Called in the worker, may import the framework. A request
        for more is `unsupported` with the reason."""
        return 1

    def prepare(self, request: Request) -> Prepared:
        """Refuse, place, bind; then `build` transforms (and compiles, if the variant asks for it)."""
        capability = self.capability(request.operator, request.variant)
        if not capability.supported:
            raise UnsupportedOperation(f"adapter {self.name!r}: {request.operator} in variant "
                                       f"{request.variant!r}: {capability.reason}")
        unavailable = self.device_unavailable(request.device)
        if unavailable:
            raise UnsupportedOperation(unavailable)
        if request.devices != 1 or data_parallel(request.operator):
            most = self.max_devices(request.device)
            if request.devices > most:
                raise UnsupportedOperation(
                    f"adapter {self.name!r}: {request.operator} on {request.devices} {request.device} devices: this "
                    f"worker has {most}; on a CPU the worker emulates as many host devices as its cells ask for, "
                    f"on a GPU use --devices up to the GPUs present")
        inputs = request.inputs
        constants = {k: self.place(v, request.device) for k, v in inputs.constants.items()}
        extra = next((a for a in (inputs.batch, inputs.tangent, inputs.cotangent) if a is not None), None)
        args = tuple(self.place(a, request.device) for a in (inputs.wrt, extra) if a is not None)
        f = request.problem.bind(self.namespace(), constants)
        try:
            prepared = self.build(Bound(request, f, args, constants))
        except Exception as exc:
            self._raise_explained(exc)
            raise
        if type(self).explain is Adapter.explain:  # nothing to explain: no wrapper around the timed call
            return prepared
        run = prepared.run

        def explained_run() -> Any:
            try:
                return run()
            except Exception as exc:
                self._raise_explained(exc)
                raise

        return dataclasses.replace(prepared, run=explained_run)

    def explain(self, exc: Exception) -> str | None:
        """What a framework error from `build` or `run()` means and how to fix the problem, when you recognise it
        (e.g. TensorFlow's rank error from `@` on a 1-d array); None leaves the error as it is."""
        return None

    def _raise_explained(self, exc: Exception) -> None:
        reason = None if isinstance(exc, (CellFailure, UnsupportedOperation)) else self.explain(exc)
        if reason is not None:
            raise CellFailure(reason) from exc

    def place(self, array: np.ndarray, device: str) -> Any:
        """`array` as the framework's array on `device`: a copy, so a cell never aliases NumPy memory."""
        return np.array(array)

    def build(self, bound: Bound) -> Prepared:
        """The callable of one cell; by default `transforms[operator]` of the framework and `bound.f`, called op
        by op. Override to compile (for the variants that ask for it) or to take another route."""
        fn = self.transforms[bound.operator](self.framework, bound.f)
        args = bound.args
        return Prepared(lambda: fn(*args))

    def materialised_elements(self, operator: str, variant: str, shapes: Shapes) -> int:
        """The most array elements this adapter's algorithm for `operator` holds at once at `shapes` (inputs and
        result included), for the memory pre-flight that marks cells `too_large` instead of letting the worker be
        killed. Must not import the framework.

        Default: what the operator needs by its nature (`operators.minimum_elements`: the result, plus the basis
        of tangents or cotangents for the Jacobian forms). Override when your algorithm builds more, e.g. a `vjp`
        or `hvp` computed through a dense Jacobian or Hessian needs `shapes.n_out * shapes.n_in` or
        `shapes.n_in ** 2`. The conformance suite checks the answer is never below the default.
        """
        return minimum_elements(operator, shapes)

    def sync(self, out: Any) -> None:
        """Block until `out` is computed (inside the timed region)."""

    @abstractmethod
    def to_numpy(self, out: Any) -> np.ndarray:
        """The result as a NumPy array, keeping its dtype."""

    def unusable_after_failure(self, device: str) -> str | None:
        """Why this process must run no further cell after a `failed` one (None: it may go on).

        A CUDA error such as an illegal memory access is sticky: every later call in the process fails with it
        (seen with torch's compiled jacfwd on an H100, which then failed every eager cell after it). So by default
        a failure on any device but the CPU costs a fresh worker, and only the failed cell is lost."""
        return None if device == "cpu" else f"a failed cell on {device} can leave the device in an error state"

    def reset_peak_device_memory(self, device: str) -> None:
        """Reset the framework's device peak-memory counter, where it has one (never on cpu)."""
        if device != "cpu" and self.device_unavailable(device) is None:
            self.reset_gpu_peak(device)

    def peak_device_memory(self, device: str) -> int | None:
        """Peak device bytes since the last reset, or None on cpu and where the framework does not expose it."""
        if device != "cpu" and self.device_unavailable(device) is None:
            return self.gpu_peak(device)
        return None

    def reset_gpu_peak(self, device: str) -> None:
        """Reset the peak-memory counter of an available GPU `device` (hook behind reset_peak_device_memory)."""

    def gpu_peak(self, device: str) -> int | None:
        """Peak bytes of an available GPU `device` since the last reset (hook behind peak_device_memory)."""
        return None

    def versions(self) -> dict[str, str]:
        """Installed versions of `distribution` and `runtime_distributions`, for provenance."""
        return installed_versions((self.distribution, *self.runtime_distributions))


def contract_breach(adapter: Adapter) -> str | None:
    """What a registered adapter lacks, as one line naming its class and the member to add, or None. Checked when
    the adapter is registered, so a missing method fails there rather than at the first cell that needs it."""
    cls = type(adapter)

    def own(member: str) -> bool:  # defined by the adapter's class or a base between it and Adapter
        return getattr(cls, member) is not getattr(Adapter, member)

    # namespace and to_numpy are abstract: Python refuses to instantiate a class without them, naming the method.
    for members in (("algorithms", "capability"), ("transforms", "build", "prepare")):
        if not any(own(m) for m in members):
            return f"adapter class {cls.__name__} lacks {' or '.join(members)}; define it on the class"
    if not own("build") and not own("prepare") and not own("capability"):
        declared = {*adapter.algorithms, *(op for table in adapter.variant_algorithms.values() for op in table)}
        missing = [op for op in declared if op not in adapter.transforms
                   and any(adapter.capability(op, variant).supported for variant in adapter.variants)]
        if missing:
            return (f"adapter class {cls.__name__} declares {sorted(missing)[0]} supported but has no transform for "
                    f"it; add it to `transforms` or override build")
    return None
