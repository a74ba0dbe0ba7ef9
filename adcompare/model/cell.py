"""A cell: one (problem, size, operator, adapter, variant, device, dtype) — the unit that is run and reported —
in one environment (the interpreter and framework releases its worker runs in; `current` unless `--env` named
another, see environments.py), on `devices` devices of its device kind (1 but for the data-parallel operators, which
split their batch across D devices: `pmap_value`, `pmap_grad`).

The groupings are here, once: `family` (sizes of one series), `worker_group` (the cells one worker process runs),
`comparable` (cells that compute the same derivative) and `twin(...)` (the cell that differs in the fields named,
e.g. a compiled cell's eager variant, or a derivative's `value`). Every module that groups cells uses them, so none
can forget a field; Measurement adds the machine (measurement.py).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

FIELDS = ("problem", "size", "operator", "adapter", "variant", "device", "dtype")
CURRENT = "current"  # the environment of the interpreter adcompare itself runs in


def devices_label(devices: int) -> str:
    """How a device count reads in keys, ids and worker groups: "4dev"."""
    return f"{devices}dev"


def worker_group(adapter: str, dtype: str, device: str, environment: str = CURRENT, devices: int = 1
                 ) -> tuple[str, ...]:
    """The cells one worker process runs: (adapter, dtype, device), the environment when it is not `current`, and
    the device count when it is not 1 (so these tuples read as they did before, like `Cell.key`). Also keys
    worker records. The count is part of the group because a worker sets up its devices before its framework is
    imported (JAX reads --xla_force_host_platform_device_count once): a D-device worker runs only D-device cells,
    and the 1-device cells keep running in a worker that looks exactly as it did before devices existed."""
    group: tuple[str, ...] = (adapter, dtype, device)
    if environment != CURRENT:
        group += (environment,)
    if devices != 1:
        group += (devices_label(devices),)
    return group


@dataclass(frozen=True, order=True)
class Cell:
    problem: str
    size: str
    operator: str
    adapter: str
    variant: str
    device: str
    dtype: str
    environment: str = CURRENT
    devices: int = 1  # devices the cell's work is split across (data-parallel operators); 1 for every other

    @property
    def key(self) -> str:
        """Stable identity used for resume, merging and pairing across files; a device count other than 1 and a
        named environment are appended (`…/float32/4dev@old`), so the keys of single-device cells run in the
        current interpreter are those of results written before either existed."""
        key = "/".join(getattr(self, f) for f in FIELDS)
        if self.devices != 1:
            key += "/" + devices_label(self.devices)
        return key if self.environment == CURRENT else f"{key}@{self.environment}"

    @property
    def id(self) -> str:
        """Readable test id: exp_dot_loss-n100-jacrev-torch-eager-float32 (device added when not cpu)."""
        parts = [self.problem, self.size, self.operator, self.adapter, self.variant, self.dtype]
        if self.device != "cpu":
            parts.append(self.device)
        if self.devices != 1:
            parts.append(devices_label(self.devices))
        if self.environment != CURRENT:
            parts.append(self.environment)
        return "-".join(parts)

    @property
    def entry(self) -> str:
        """How its adapter · variant pair is named throughout the report (with its environment, if not `current`)."""
        where = "" if self.environment == CURRENT else f" @{self.environment}"
        return f"{self.adapter} · {self.variant}{where}"

    @property
    def selector(self) -> str:
        """The `adcompare run` command that reruns exactly this cell."""
        where = "" if self.devices == 1 else f" --devices {self.devices}"
        where += "" if self.environment == CURRENT else f" --environment {self.environment}"
        return "adcompare run " + " ".join(f"--{f} {getattr(self, f)}" for f in FIELDS) + where

    @property
    def family(self) -> tuple[str, ...]:
        """Cells with equal `family` differ by size only: one series (the budget's rounds, skipping the larger
        sizes after a timeout, one row per series in the report). A series by size is per device count; the tuple
        gains the count only when it is not 1, so single-device families read as before."""
        family = (self.problem, self.operator, self.adapter, self.variant, self.device, self.dtype, self.environment)
        return family if self.devices == 1 else (*family, devices_label(self.devices))

    @property
    def worker_group(self) -> tuple[str, ...]:
        """Cells with equal `worker_group` run in one worker process (see `worker_group` above)."""
        return worker_group(self.adapter, self.dtype, self.device, self.environment, self.devices)

    @property
    def comparable(self) -> tuple[str, str, str, str]:
        """Cells with equal `comparable` compute the same derivative (pairwise agreement). Adapter, variant,
        device, device count, environment and machine are left out on purpose: agreeing across them is what the
        check asks (a gradient averaged over 4 devices is the whole-batch gradient)."""
        return (self.problem, self.size, self.operator, self.dtype)

    @property
    def ranking(self) -> tuple[str, ...]:
        """Cells with equal `ranking` are timed against each other (the report's summary): the same derivative
        (`comparable`) on one device in one environment; the rivals differ by adapter and variant. Measurement
        adds the machine: times of two machines are never ranked together. The device count joins only when it is
        not 1 (a 4-device cell is ranked against 4-device cells), so single-device rankings read as before."""
        ranking = (*self.comparable, self.device, self.environment)
        return ranking if self.devices == 1 else (*ranking, devices_label(self.devices))

    def twin(self, **fields: str | int) -> "Cell":
        """This cell with the named fields changed, e.g. `twin(variant="eager")`, `twin(operator="value")`:
        everything not named (environment included) stays, so a twin never pairs cells of two environments."""
        unknown = set(fields) - {*FIELDS, "environment", "devices"}
        if unknown:
            raise TypeError(f"Cell.twin: no field {', '.join(sorted(unknown))}; fields are {', '.join(FIELDS)}")
        changes: dict[str, Any] = fields  # names checked above; values as the caller gives them
        return replace(self, **changes)


    @property
    def across_environments(self) -> tuple[str, ...]:
        """Cells with equal `across_environments` are the same cell run in different environments."""
        same = tuple(getattr(self, f) for f in FIELDS)
        return same if self.devices == 1 else (*same, devices_label(self.devices))

    def to_json(self) -> dict[str, str | int]:
        data: dict[str, str | int] = asdict(self)
        if self.environment == CURRENT:
            del data["environment"]  # records of the current interpreter read as they did before environments
        if self.devices == 1:
            del data["devices"]  # single-device records read as they did before device counts
        return data

    @classmethod
    def from_json(cls, data: dict) -> "Cell":
        """Records written before device counts have none: they read as devices = 1 (the upgrade path)."""
        named: dict[str, Any] = {f: str(data[f]) for f in FIELDS}
        return cls(**named, environment=str(data.get("environment") or CURRENT), devices=int(data.get("devices") or 1))
