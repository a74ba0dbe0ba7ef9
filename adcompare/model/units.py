"""Human-readable durations: one formatter for the terminal tables, the report's tables and its chart axes."""
from __future__ import annotations

import math

_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def seconds(value: float | None, missing: str = "–") -> str:
    """12.3 µs, 4.56 ms, 1.23 s (three significant digits); `missing` for None or NaN, ∞ for infinity.

    A value that rounds to 1000 of a unit is written in the next one (999.7 µs is "1 ms", not "1e+03 µs")."""
    if value is None or math.isnan(value):
        return missing
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    for unit, scale in _UNITS:
        if abs(value) >= scale * 0.9995 or unit == "ns":
            return f"{value / scale:.3g} {unit}"
    raise AssertionError("unreachable")


def whole_seconds(value: float) -> str:
    """A duration for a message: whole seconds from 1 s on ("2070 s"), below that as `seconds` ("310 ms", where
    whole seconds would say "0 s")."""
    return f"{value:.0f} s" if abs(value) >= 0.9995 else seconds(value)
