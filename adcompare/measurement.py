"""A measurement: one cell's outcome — status, derivative check, timings, memory and the error text."""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from typing import Any

from .cell import Cell
from .status import Status


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

    # Computed once, without NumPy: the report reads these ~10 times per cell for 10⁴ cells, and NumPy's median
    # costs ~50 µs on a short tuple. The values are np.median's and np.percentile's (tests/test_results.py).
    @cached_property
    def median(self) -> float:
        return float(statistics.median(self.samples))

    @cached_property
    def iqr(self) -> float:
        return percentile(self.samples, 0.75) - percentile(self.samples, 0.25)

    @cached_property
    def min(self) -> float:
        return float(min(self.samples))

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["samples"] = list(self.samples)
        data["rounds"] = list(self.rounds)
        data["round_minima"] = list(self.round_minima)
        data["cpu_samples"] = list(self.cpu_samples)
        data["round_cpu"] = list(self.round_cpu)
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
    support: str = ""  # native / emulated / unsupported
    algorithm: str = ""
    timing: Timing | None = None
    check: Check | None = None
    host_peak_bytes: int | None = None
    device_peak_bytes: int | None = None
    device_name: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    machine: str = ""  # fingerprint id of the machine that measured it (fingerprint.Machine.id); set on writing
    versions: dict[str, str] = field(default_factory=dict)  # framework versions its worker loaded (worker record)

    @property
    def merge_key(self) -> tuple[str, str]:
        """Identity across files: the same cell on two machines is two records."""
        return (self.machine, self.cell.key)

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": self.cell.to_json(),
            "key": self.cell.key,
            "selector": self.cell.selector,
            "status": self.status.value,
            "message": self.message,
            "support": self.support,
            "algorithm": self.algorithm,
            "timing": self.timing.to_json() if self.timing else None,
            "check": self.check.to_json() if self.check else None,
            "host_peak_bytes": self.host_peak_bytes,
            "device_peak_bytes": self.device_peak_bytes,
            "device_name": self.device_name,
            "details": self.details,
            "machine": self.machine,
            "versions": self.versions,
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
        )
