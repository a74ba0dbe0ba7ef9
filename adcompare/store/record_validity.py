"""Which stored cell records can be read as measurements: the loader's rule for the record's shape.

`Measurement.from_json` trusts its input (the workers wrote it); a record edited by hand, cut by another tool or
written by a foreign producer would instead stop `report` or `compare` with a KeyError or ValueError traceback that
names neither the file nor the line. The loader asks `record_problem` first and refuses such a record in one line
naming the file, the line and the field (exit 2), as it does for impossible times (timing_validity.py).
"""
from __future__ import annotations

from dataclasses import MISSING, fields
from enum import Enum
from typing import Any

from adcompare.model.cell import FIELDS
from adcompare.model.measurement import Check, Timing
from adcompare.model.status import Status
from adcompare.model.support import Support
from adcompare.store.timing_validity import timing_problem


def _required(cls: type) -> tuple[str, ...]:
    """The fields of a record dataclass that have no default: a stored object must hold them."""
    return tuple(f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING)


def _choices(enum: type[Enum]) -> str:
    return ", ".join(repr(e.value) for e in enum)


def record_problem(rec: dict[str, Any]) -> str:
    """What makes a stored cell record unreadable as a measurement — a phrase naming the field — or ''."""
    cell = rec.get("cell")
    if not isinstance(cell, dict):
        return "field 'cell' is missing" if cell is None else f"cell is {cell!r}, not an object"
    for name in FIELDS:
        if not isinstance(cell.get(name), str) or not cell[name]:
            return f"cell.{name} is {'missing' if name not in cell else repr(cell[name])}, not a name"
    status = rec.get("status")
    if status not in {s.value for s in Status}:
        return ("field 'status' is missing" if "status" not in rec else f"status {status!r} is unknown") + \
            f"; one of {_choices(Status)}"
    support = rec.get("support")
    if support not in (None, "", *(s.value for s in Support)):
        return f"support {support!r} is unknown; one of {_choices(Support)} or \"\""
    timing = rec.get("timing")
    if timing is not None:
        if why := timing_problem(timing):
            return why
        if missing := [name for name in _required(Timing) if name not in timing]:
            return f"timing.{missing[0]} is missing"
        if isinstance(timing["number"], bool) or not isinstance(timing["number"], int) or timing["number"] < 1:
            return f"timing.number is {timing['number']!r}, not a count of calls per sample"
    check = rec.get("check")
    if check is not None:
        if not isinstance(check, dict):
            return f"check is {check!r}, not an object"
        if missing := [name for name in _required(Check) if name not in check]:
            return f"check.{missing[0]} is missing"
    return ""
