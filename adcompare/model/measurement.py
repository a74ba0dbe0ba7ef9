"""A measurement: one cell's outcome — status, derivative check, timings, memory and the error text."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from typing import Any

from adcompare.model.cell import Cell
from adcompare.model.status import Status
from adcompare.model.support import Support

# Results written before measurements recorded their variant's meaning (no "compiles" key) are read with the
# built-in adapters' declarations as they stood then (adapters/*.py `compiles`; tests/test_keys.py holds the two
# equal), and for any other adapter with the name rule those versions used: a variant not named eager* compiles
# "eager".
BUILTIN_COMPILES = {
    "jax": {"compiled": "eager"},
    "torch": {"compiled": "eager"},
    "tensorflow": {"graph": "eager", "compiled": "eager"},
    "autograd": {"compiled": "eager"},
}
AHEAD_OF_TIME = "ahead of time"  # how a compile_method that was paid in prepare, outside the first call, begins
FEW_SAMPLES = 3  # below this many samples a timing has a median but no interval (analysis/bootstrap.MIN_SAMPLES)
# details: how long the call a cell's timeout stopped had run (a timing with `stopped` "cell timeout"): the framework's
# seconds, not the harness's (analysis/harness_cost.py). Records before it leave the key out.
UNFINISHED_CALL = "unfinished_call_seconds"
CELL_TIMEOUT = "cell timeout"  # Timing.stopped of the calls kept from a worker its cell's timeout stopped


def declared_compiles(cell: Cell) -> str:
    """The eager variant that `cell`'s variant compiles ("" when eager), where no record says: see above."""
    if cell.adapter in BUILTIN_COMPILES:
        return BUILTIN_COMPILES[cell.adapter].get(cell.variant, "")
    return "" if cell.variant.startswith("eager") else "eager"


def median(samples: Sequence[float]) -> float:
    """np.median, term for term where that is finite; for the two middle samples of an even count above ~9e307,
    whose sum overflows (np.median gives inf), half of each added, which is then finite."""
    data = sorted(samples)
    middle = len(data) // 2
    if len(data) % 2:
        return float(data[middle])
    a, b = data[middle - 1], data[middle]
    mean = (a + b) / 2
    return float(mean if math.isfinite(mean) else a / 2 + b / 2)


def percentile(samples: Sequence[float], q: float) -> float:
    """np.percentile's default ("linear") method at quantile q in [0, 1], term for term."""
    data = sorted(samples)
    if len(data) == 1:
        return float(data[0])
    pos = q * (len(data) - 1)
    i = min(int(pos), len(data) - 2)
    a, b, t = data[i], data[i + 1], pos - i
    diff = b - a
    return float(b - diff * (1 - t) if t >= 0.5 else a + diff * t)


@dataclass(frozen=True)
class Timing:
    """Seconds per call. `samples` holds one per-call time per block of `number` calls (raw, kept)."""

    samples: tuple[float, ...]
    number: int
    first_call: float
    compile: float | None = None
    compile_method: str = ""  # "ahead of time: …", "first call minus steady state", or "" (eager)
    warmup_calls: int = 0
    total_seconds: float = 0.0  # time spent measuring this cell
    # With `run --rounds N` (rounds.py): the median and the fastest block of each round, a fresh worker process
    # each, spread over the run; `samples` then holds every round's blocks. Empty in files written without rounds.
    rounds: tuple[float, ...] = ()
    round_minima: tuple[float, ...] = ()
    # Process CPU seconds per call, one per block beside `samples` (timing.py); and with rounds, each round's
    # median of them. Empty in files written before they were recorded.
    cpu_samples: tuple[float, ...] = ()
    round_cpu: tuple[float, ...] = ()
    # With rounds: how many of `samples` each round timed, in order (what lets compare pair the blocks of two
    # environments timed in lockstep, lockstep.py). Empty in files written before it was recorded.
    round_blocks: tuple[int, ...] = ()
    # Why timing stopped before its rule was met (timing.py rule 7), "" when it was not cut short: "deadline" (a
    # slow cell's next call would have ended past its timeout), "first call only" (not even a second call would
    # have fitted: the checked first call, which compiled nothing, is the one sample) or "cell timeout" (the worker
    # was stopped; these are the calls it had reported, or its first call). Schema 3; files before it read "".
    stopped: str = ""
    # Wall seconds inside the framework's calls while timing (warm-up calls and blocks, sync included):
    # total_seconds minus this is the timing loop's own cost. Schema 3; 0.0 where not recorded.
    call_seconds: float = 0.0

    @property
    def few_samples(self) -> bool:
        """Fewer than 3 samples (significance.MIN_SAMPLES): a median, but no interval or rank test of it."""
        return len(self.samples) < FEW_SAMPLES

    @property
    def spread(self) -> float | None:
        """The IQR where the samples can have one; None for a timing with few samples (one sample's IQR of 0
        would claim a precision nobody measured)."""
        return None if self.few_samples else self.iqr

    # Computed once, without NumPy: the report reads these ~10 times per cell for 10⁴ cells, and NumPy's median
    # costs ~50 µs on a short tuple. The values are np.median's and np.percentile's (tests/test_results.py).
    @cached_property
    def median(self) -> float:
        return median(self.samples)

    @cached_property
    def iqr(self) -> float:
        return percentile(self.samples, 0.75) - percentile(self.samples, 0.25)

    @cached_property
    def min(self) -> float:
        return float(min(self.samples))

    @property
    def compile_ahead_of_time(self) -> bool:
        """Whether `compile` was paid in prepare, apart from `first_call` (jax.jit(...).lower().compile(),
        TensorFlow's trace and first call), rather than inside it (torch.compile compiles on the first call, and
        `compile` is then first call minus steady state). Adapters say so by a compile_method beginning "ahead
        of time" (docs/adapters.md)."""
        return self.compile is not None and self.compile_method.startswith(AHEAD_OF_TIME)

    @property
    def up_front(self) -> float:
        """Seconds paid before the steady state: the first call, and the compile where it was paid apart."""
        paid_apart = self.compile if self.compile is not None and self.compile_ahead_of_time else 0.0
        return self.first_call + paid_apart

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["samples"] = list(self.samples)
        data["rounds"] = list(self.rounds)
        data["round_minima"] = list(self.round_minima)
        data["cpu_samples"] = list(self.cpu_samples)
        data["round_cpu"] = list(self.round_cpu)
        data["round_blocks"] = list(self.round_blocks)
        data.update(median=self.median, iqr=self.iqr, min=self.min)
        return data

    @classmethod
    def from_json(cls, data: dict) -> "Timing":
        names = {f.name for f in fields(cls)}
        kept = {k: v for k, v in data.items() if k in names}
        kept["samples"] = tuple(kept["samples"])
        kept["rounds"] = tuple(kept.get("rounds") or ())
        kept["round_minima"] = tuple(kept.get("round_minima") or ())
        kept["cpu_samples"] = tuple(kept.get("cpu_samples") or ())
        kept["round_cpu"] = tuple(kept.get("round_cpu") or ())
        kept["round_blocks"] = tuple(int(n) for n in kept.get("round_blocks") or ())
        return cls(**kept)


@dataclass(frozen=True)
class Check:
    """How the cell's derivative compares with the float64 reference (see check.py for the measure)."""

    error: float | None  # worst scaled relative error vs the reference; None when not compared
    tolerance: float
    reference_method: str  # e.g. "central differences (full Jacobian)", "exact (value)"
    adjoint_error: float | None = None  # |⟨u, Jv⟩ − ⟨Jᵀu, v⟩| scaled, where jvp and vjp both exist
    projection: float | None = None  # seeded scalar uᵀ·result·v-style fingerprint for pairwise comparison
    output_dtype: str = ""
    dtype_drift: bool = False  # result dtype differs from the cell's dtype (reported, not cast away)
    nonfinite: bool = False
    pairwise_error: float | None = None  # filled by the parent when other adapters ran the same cell
    # The weights `projection` used (check.py): "" the seeded weights of every entry (every record before schema 4,
    # and every cell but a per-example one), PER_EXAMPLE_WEIGHTS a seeded weight per example times one per entry
    # of an example. Projections of different weights are not compared (check.cross_check).
    projection_weights: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Check":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class Measurement:
    cell: Cell
    status: Status
    message: str = ""
    support: Support | None = None  # native / emulated / unsupported; None where not known (written "")
    algorithm: str = ""
    timing: Timing | None = None
    check: Check | None = None
    host_peak_bytes: int | None = None
    device_peak_bytes: int | None = None
    device_name: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    machine: str = ""  # fingerprint id of the machine that measured it (fingerprint.Machine.id); set on writing
    versions: dict[str, str] = field(default_factory=dict)  # framework versions its worker loaded (worker record)
    # The eager variant whose code this cell's variant compiles, as its adapter declares (Adapter.compiles); ""
    # when the variant is eager. None (not recorded: older files, other producers) reads as `declared_compiles`.
    compiles: str | None = None

    def __post_init__(self) -> None:
        # Producers that predate the enum pass support as its string; "" means not known.
        if not isinstance(self.support, Support) and self.support is not None:
            object.__setattr__(self, "support", Support(self.support) if self.support else None)
        if self.compiles is None:
            object.__setattr__(self, "compiles", declared_compiles(self.cell))

    @property
    def measured(self) -> Timing:
        """`timing`, for a caller that knows the cell was timed (it kept only timed cells): fails loudly otherwise."""
        assert self.timing is not None, f"{self.cell.id} ({self.status.value}) has no timing"
        return self.timing

    @property
    def compiled(self) -> bool:
        """Whether the cell ran compiled code (then `compiles` names its eager twin's variant)."""
        return bool(self.compiles)

    @property
    def merge_key(self) -> tuple[str, str]:
        """Identity across files: the same cell on two machines is two records."""
        return (self.machine, self.cell.key)

    @property
    def family(self) -> tuple[str, ...]:
        """`Cell.family` on this machine: a series of sizes measured by one machine."""
        return (self.machine, *self.cell.family)

    @property
    def ranking(self) -> tuple[str, ...]:
        """`Cell.ranking` on this machine: the cells whose times the summary ranks against each other."""
        return (self.machine, *self.cell.ranking)

    def twin_key(self, **fields: str | int) -> tuple[str, str]:
        """The `merge_key` of `Cell.twin(**fields)` on the same machine: what to look a twin up by, e.g. a
        compiled cell's eager twin `m.twin_key(variant=m.compiles)` or a derivative's `twin_key(operator="value")`."""
        return (self.machine, self.cell.twin(**fields).key)

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": self.cell.to_json(),
            "key": self.cell.key,
            "selector": self.cell.selector,
            "status": self.status.value,
            "message": self.message,
            "support": self.support.value if self.support else "",
            "algorithm": self.algorithm,
            "timing": self.timing.to_json() if self.timing else None,
            "check": self.check.to_json() if self.check else None,
            "host_peak_bytes": self.host_peak_bytes,
            "device_peak_bytes": self.device_peak_bytes,
            "device_name": self.device_name,
            "details": self.details,
            "machine": self.machine,
            "versions": self.versions,
            "compiles": self.compiles,
        }

    @classmethod
    def from_json(cls, data: dict) -> "Measurement":
        return cls(
            cell=Cell.from_json(data["cell"]),
            status=Status(data["status"]),
            message=data.get("message", ""),
            support=data.get("support", ""),
            algorithm=data.get("algorithm", ""),
            timing=Timing.from_json(data["timing"]) if data.get("timing") else None,
            check=Check.from_json(data["check"]) if data.get("check") else None,
            host_peak_bytes=data.get("host_peak_bytes"),
            device_peak_bytes=data.get("device_peak_bytes"),
            device_name=data.get("device_name", ""),
            details=data.get("details") or {},
            machine=data.get("machine") or "",
            versions=data.get("versions") or {},
            compiles=data.get("compiles"),
        )
