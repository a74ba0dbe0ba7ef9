"""One shape for a framework namespace's trap fixes, shared by torch_namespace.py and autograd_namespace.py.

A fix replaces one standard name whose framework version falls into a trap (no derivative rule, a graph break, a
silently wrong derivative, a many-times-slower path); the tests of each adapter check every fix against NumPy
and check that the trap still exists, so a fix is dropped once the framework fixes it upstream.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Fix:
    """One replaced name: what the framework's version does wrong, and the function that replaces it."""

    trap: str  # e.g. "no derivative rule", "graph break under Dynamo", "wrong derivative"
    route: str  # how the replacement avoids it, in a few words
    build: Callable[[ModuleType, ModuleType], Callable[..., Any]]  # (framework module, namespace fixed) -> function
