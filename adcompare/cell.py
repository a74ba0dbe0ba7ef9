"""A cell: one (problem, size, operator, adapter, variant, device, dtype) — the unit that is run and reported."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

FIELDS = ("problem", "size", "operator", "adapter", "variant", "device", "dtype")


@dataclass(frozen=True, order=True)
class Cell:
    problem: str
    size: str
    operator: str
    adapter: str
    variant: str
    device: str
    dtype: str

    @property
    def key(self) -> str:
        """Stable identity used for resume, merging and pairing across files."""
        return "/".join(getattr(self, f) for f in FIELDS)

    @property
    def id(self) -> str:
        """Readable test id: exp_dot_loss-n100-jacrev-torch-eager-float32 (device added when not cpu)."""
        parts = [self.problem, self.size, self.operator, self.adapter, self.variant, self.dtype]
        if self.device != "cpu":
            parts.append(self.device)
        return "-".join(parts)

    @property
    def selector(self) -> str:
        """The `adcompare run` command that reruns exactly this cell."""
        return "adcompare run " + " ".join(f"--{f} {getattr(self, f)}" for f in FIELDS)

    @property
    def comparable(self) -> tuple[str, str, str, str]:
        """Cells with equal `comparable` compute the same derivative (pairwise agreement)."""
        return (self.problem, self.size, self.operator, self.dtype)

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Cell":
        return cls(**{f.name: str(data[f.name]) for f in fields(cls)})
