"""A cell: one (problem, size, operator, adapter, variant, device, dtype) — the unit that is run and reported —
in one environment (the interpreter and framework releases its worker runs in; `current` unless `--env` named
another, see environments.py).

The groupings are here, once: `family` (sizes of one series), `worker_group` (the cells one worker process runs),
`comparable` (cells that compute the same derivative) and `twin(...)` (the cell that differs in the fields named,
e.g. a compiled cell's eager variant, or a derivative's `value`). Every module that groups cells uses them, so none
can forget a field; Measurement adds the machine (measurement.py).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

FIELDS = ("problem", "size", "operator", "adapter", "variant", "device", "dtype")
CURRENT = "current"  # the environment of the interpreter adcompare itself runs in


def worker_group(adapter: str, dtype: str, device: str, environment: str = CURRENT) -> tuple[str, ...]:
    """The cells one worker process runs: (adapter, dtype, device), and the environment when it is not `current`
    (so these tuples read as they did before environments, like `Cell.key`). Also keys worker records."""
    return (adapter, dtype, device) if environment == CURRENT else (adapter, dtype, device, environment)


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

    @property
    def key(self) -> str:
        """Stable identity used for resume, merging and pairing across files; a named environment is appended,
        so the keys of cells run in the current interpreter are those of results written before environments."""
        key = "/".join(getattr(self, f) for f in FIELDS)
        return key if self.environment == CURRENT else f"{key}@{self.environment}"

    @property
    def id(self) -> str:
        """Readable test id: exp_dot_loss-n100-jacrev-torch-eager-float32 (device added when not cpu)."""
        parts = [self.problem, self.size, self.operator, self.adapter, self.variant, self.dtype]
        if self.device != "cpu":
            parts.append(self.device)
        if self.environment != CURRENT:
            parts.append(self.environment)
        return "-".join(parts)

    @property
    def selector(self) -> str:
        """The `adcompare run` command that reruns exactly this cell."""
        where = "" if self.environment == CURRENT else f" --environment {self.environment}"
        return "adcompare run " + " ".join(f"--{f} {getattr(self, f)}" for f in FIELDS) + where

    @property
    def family(self) -> tuple[str, ...]:
        """Cells with equal `family` differ by size only: one series (the budget's rounds, skipping the larger
        sizes after a timeout, one row per series in the report)."""
        return (self.problem, self.operator, self.adapter, self.variant, self.device, self.dtype, self.environment)

    @property
    def worker_group(self) -> tuple[str, ...]:
        """Cells with equal `worker_group` run in one worker process (see `worker_group` above)."""
        return worker_group(self.adapter, self.dtype, self.device, self.environment)

    @property
    def comparable(self) -> tuple[str, str, str, str]:
        """Cells with equal `comparable` compute the same derivative (pairwise agreement). Adapter, variant,
        device, environment and machine are left out on purpose: agreeing across them is what the check asks."""
        return (self.problem, self.size, self.operator, self.dtype)

    @property
    def ranking(self) -> tuple[str, ...]:
        """Cells with equal `ranking` are timed against each other (the report's summary): the same derivative
        (`comparable`) on one device in one environment; the rivals differ by adapter and variant. Measurement
        adds the machine: times of two machines are never ranked together."""
        return (*self.comparable, self.device, self.environment)

    def twin(self, **fields: str) -> "Cell":
        """This cell with the named fields changed, e.g. `twin(variant="eager")`, `twin(operator="value")`:
        everything not named (environment included) stays, so a twin never pairs cells of two environments."""
        unknown = set(fields) - {*FIELDS, "environment"}
        if unknown:
            raise TypeError(f"Cell.twin: no field {', '.join(sorted(unknown))}; fields are {', '.join(FIELDS)}")
        return replace(self, **fields)


    @property
    def across_environments(self) -> tuple[str, ...]:
        """Cells with equal `across_environments` are the same cell run in different environments."""
        return tuple(getattr(self, f) for f in FIELDS)

    def to_json(self) -> dict[str, str]:
        data = asdict(self)
        if self.environment == CURRENT:
            del data["environment"]  # records of the current interpreter read as they did before environments
        return data

    @classmethod
    def from_json(cls, data: dict) -> "Cell":
        return cls(*(str(data[f]) for f in FIELDS), environment=str(data.get("environment") or CURRENT))
