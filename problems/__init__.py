"""Built-in problems, one module per family; registered through the `adcompare` entry-point group."""
from __future__ import annotations

import importlib
import pkgutil

from adcompare import hookimpl
from adcompare.model.problem import problems_in


@hookimpl
def adcompare_problems():
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        found.extend(problems_in(importlib.import_module(f"{__name__}.{info.name}")))
    return found
