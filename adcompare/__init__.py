"""adcompare: compare automatic-differentiation frameworks on problems written once.

Importing this package imports no AD framework; each adapter imports its framework inside a worker process.
"""
from __future__ import annotations

from .adapter import Adapter, Availability, Bound, Capability, CellInputs, Prepared, Request, Support
from .hookspecs import hookimpl
from .loops import fold
from .problem import Problem, grid, problem
from .shapes import Shapes

try:
    from importlib.metadata import version as _version

    __version__ = _version("adcompare")
except Exception:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "Adapter", "Availability", "Bound", "Capability", "CellInputs", "Prepared", "Problem", "Request", "Shapes",
    "Support",
    "fold", "grid", "hookimpl", "problem", "__version__",
]
