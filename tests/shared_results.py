"""Results computed once per test run and shared by pytest-xdist's worker processes (the README's command runs
`-n auto`): the first process to need one computes it under a file lock, the others wait and read it back.

Only for deterministic results that several tests in different modules (so, under `--dist loadscope`, perhaps
different workers) assert on: who computes one must not matter.
"""
from __future__ import annotations

import fcntl
import hashlib
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adcompare.plugin.registry import Registry
from adcompare.verify.namespace_probes import used_names

_IN_PROCESS: dict[str, Any] = {}
# The run's folder that all its workers see: set by tests/conftest.py (a worker's base temporary folder is
# <run's folder>/popen-gw<N>, which pytest removes with the run's after a few runs); None without xdist.
RUN_FOLDER: list[Path | None] = [None]


def once_per_run(name: str, compute: Callable[[], Any]) -> Any:
    """`compute()`, run once per test run under `name` and shared by every worker of the run."""
    if name in _IN_PROCESS:
        return _IN_PROCESS[name]
    folder = RUN_FOLDER[0]
    if folder is None:
        value = compute()
    else:
        path = folder / f"{name}.pickle"
        with open(folder / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released on close, also when compute() raises
            if path.exists():
                value = pickle.loads(path.read_bytes())
            else:
                value = compute()
                path.write_bytes(pickle.dumps(value))
    _IN_PROCESS[name] = value
    return value


def problem_names(registry: Registry) -> frozenset[str]:
    """`used_names` of the registry's problems: each problem evaluated through NumPy at its smallest size, about
    a minute of CPU for GradBench's nested saddle and particle, whose derivatives NumPy takes by differences."""
    plugins = hashlib.sha256(repr(registry.plugins).encode()).hexdigest()[:12]
    return once_per_run(f"used-names-{plugins}",
                        lambda: frozenset(used_names(registry.problems.values())))
