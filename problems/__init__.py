"""Built-in problems, one module per family; registered through the `adcompare` entry-point group."""

from __future__ import annotations

import importlib
import pkgutil

from adcompare import hookimpl
from adcompare.model.problem import problems_in

if __name__ != "adcompare.problems":  # one module, one name: this folder is installed as adcompare.problems
    raise ImportError(f"import adcompare.problems, not {__name__}: the problems/ folder is installed as "
                      "adcompare.problems (pip install -e .)")


@hookimpl
def adcompare_problems():
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        found.extend(problems_in(importlib.import_module(f"{__name__}.{info.name}")))
    return found
