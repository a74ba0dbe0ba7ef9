"""A cell: one (problem, size, operator, adapter, variant, device, dtype) — the unit that is run and reported —
in one environment (the interpreter and framework releases its worker runs in; `current` unless `--env` named
another, see environments.py)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

FIELDS = ("problem", "size", "operator", "adapter", "variant", "device", "dtype")
CURRENT = "current"  # the environment of the interpreter adcompare itself runs in


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
    def comparable(self) -> tuple[str, str, str, str]:
        """Cells with equal `comparable` compute the same derivative (pairwise agreement)."""
        return (self.problem, self.size, self.operator, self.dtype)

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
