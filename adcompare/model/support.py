"""How an adapter provides an operator: the framework's own transform, one adcompare built, or none.

Data, beside Status: adapters declare it (adapter.py) and every measurement records it (measurement.py), so the
report reads it from a results file without importing any adapter.
"""
from __future__ import annotations

from enum import Enum


class Support(str, Enum):
    NATIVE = "native"  # the framework's own transform
    EMULATED = "emulated"  # built by adcompare from other pieces (e.g. a Python loop); labelled in the report
    UNSUPPORTED = "unsupported"

    def __str__(self) -> str:
        return self.value
