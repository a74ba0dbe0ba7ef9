"""adcompare: compare automatic-differentiation frameworks on problems written once.

Importing this package imports no AD framework; each adapter imports its framework inside a worker process.
"""
from __future__ import annotations

from adcompare.model.control_flow import cond, while_loop
from adcompare.model.loops import fold
from adcompare.model.nesting import grad
from adcompare.model.problem import Problem, grid, problem
from adcompare.model.shapes import Shapes
from adcompare.plugin.adapter import (
    Adapter,
    Availability,
    Bound,
    Capability,
    CellInputs,
    Prepared,
    Request,
    Support,
    derived_namespace,
)
from adcompare.plugin.hookspecs import hookimpl
from adcompare.plugin.report_section import Section

try:
    from importlib.metadata import version as _version

    __version__ = _version("adcompare")
except Exception:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "Adapter", "Availability", "Bound", "Capability", "CellInputs", "Prepared", "Problem", "Request", "Section",
    "Shapes", "Support",
    "cond", "derived_namespace", "fold", "grad", "grid", "hookimpl", "problem", "while_loop", "__version__",
]
