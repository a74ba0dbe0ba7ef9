"""What `--env` asks for, and which cells each environment runs: the specs of `adcompare run --env NAME=…`
(a name with pip requirements, `current`, or `@PYTHON`), validated, and the plan's cells placed in them.
Building and caching the environments themselves is environments.py's.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from adcompare.model.cell import CURRENT, Cell
from adcompare.model.errors import EnvironmentSetupError
from adcompare.plugin.adapter import Adapter

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalize(distribution: str) -> str:
    """PEP 503 name normalization: `Array_API.compat` and `array-api-compat` are one distribution."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


@dataclass(frozen=True)
class EnvironmentSpec:
    """What `--env NAME=REQUIREMENTS` asked for: a name and pip requirement strings (whitespace-separated)."""

    name: str
    requirements: tuple[str, ...] = ()
    python: str = ""  # `NAME=@PYTHON`: an existing interpreter, used as it is (no requirements, nothing built)

    @classmethod
    def parse(cls, text: str) -> "EnvironmentSpec":
        name, sep, reqs = text.partition("=")
        name = name.strip()
        if not sep and name == CURRENT:
            return cls(CURRENT)
        if not sep or not _NAME.fullmatch(name):
            raise EnvironmentSetupError(f"--env {text!r}: expected NAME=REQUIREMENTS, e.g. --env new=\"jax==0.10.2 "
                                        f"jaxlib==0.10.2\" (NAME: letters, digits, _ . -), or --env current")
        if name == CURRENT:
            raise EnvironmentSetupError(f"--env {text!r}: 'current' is the interpreter adcompare runs in and takes no "
                                        f"requirements; pick another name")
        if reqs.strip().startswith("@"):
            python = reqs.strip()[1:]
            if not python:
                raise EnvironmentSetupError(f"--env {text!r}: name the interpreter after @, e.g. "
                                            f"{name}=@../base/.venv/bin/python")
            return cls(name, python=python)
        requirements = tuple(shlex.split(reqs))
        if not requirements:
            raise EnvironmentSetupError(f"--env {text!r}: no requirements; name at least one, "
                                        f"e.g. {name}=\"jax==0.10.2\"")
        return cls(name, requirements)

    @property
    def pinned(self) -> frozenset[str]:
        """Normalized distribution names the requirements name (`jax[cpu]==0.10` pins `jax`)."""
        return frozenset(normalize(m.group(1)) for r in self.requirements if (m := _REQUIREMENT_NAME.match(r)))

    def pins(self, adapter: Adapter) -> bool:
        """Whether this environment runs `adapter`: it pins the adapter's framework (`current` and an existing
        interpreter, `@PYTHON`, run every one)."""
        if self.name == CURRENT or self.python:
            return True
        return bool(self.pinned & {normalize(d) for d in (adapter.distribution, *adapter.runtime_distributions)})


def parse_options(texts: Iterable[str]) -> tuple[EnvironmentSpec, ...]:
    """The `--env` options, validated: unique names."""
    specs = tuple(EnvironmentSpec.parse(t) for t in texts)
    names = [s.name for s in specs]
    for name in names:
        if names.count(name) > 1:
            raise EnvironmentSetupError(f"--env {name!r} is given twice; give each environment a different name")
    return specs


def check_pins(specs: Sequence[EnvironmentSpec], adapters: Iterable[Adapter]) -> None:
    """Every named environment must pin a framework of some adapter, or it would run nothing."""
    adapters = list(adapters)
    frameworks = sorted({d for a in adapters for d in (a.distribution, *a.runtime_distributions)})
    for spec in specs:
        if spec.name != CURRENT and not any(spec.pins(a) for a in adapters):
            raise EnvironmentSetupError(f"--env {spec.name!r} pins none of the selected adapters' frameworks "
                                        f"({', '.join(frameworks)}); add one, "
                                        f"e.g. {spec.name}=\"{frameworks[0]}==VERSION\"")


def in_environments(cells: Sequence[Cell], adapters: Mapping[str, Adapter], specs: Sequence[EnvironmentSpec],
                    selected: Sequence[str] = ()) -> list[Cell]:
    """Each planned cell once per environment that runs its adapter (`current` when none pins it), kept to the
    environments `selected` (`--environment`) when given."""
    known = [s.name for s in specs] or [CURRENT]
    for name in selected:
        if name not in known and name != CURRENT:
            raise EnvironmentSetupError(f"--environment {name!r} is not defined in this run (environments: "
                                        f"{', '.join(dict.fromkeys([CURRENT, *known]))}); define it with "
                                        f"--env {name}=REQUIREMENTS")
    out = []
    for cell in cells:
        names = [s.name for s in specs if s.pins(adapters[cell.adapter])] or [CURRENT]
        out += [replace(cell, environment=n) for n in names if not selected or n in selected]
    return out
