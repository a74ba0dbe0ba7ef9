"""Which stored timings can be measurements: the loader's rule for results files and pytest-benchmark JSON.

A time is seconds on a monotonic clock, so it is finite and never negative; zero is allowed (a timer coarser than
the call, which the analysis then declines to divide by). A timing that holds no sample measured nothing. No
producer writes anything else — `adcompare run`'s workers, the pytest-benchmark import and every committed
baseline were checked — so a record that breaks the rule was corrupted or edited, and loading it would put a
negative or NaN time on the page. The loader refuses it in one line naming the file, the line and the field.
"""
from __future__ import annotations

import math
from typing import Any

SAMPLE_FIELD = "timing.samples"
TIME_FIELDS = ("first_call", "compile", "total_seconds", "median", "iqr", "min")  # stored next to the samples


def _bad_time(value: Any) -> str:
    """Why `value` cannot be a time in seconds, or '' when it can."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"is {value!r}, not a number of seconds"
    if not math.isfinite(value):
        return f"is {value!r}, not a finite time"
    if value < 0:
        return f"is {value!r}, a negative time"
    return ""


def timing_problem(timing: Any) -> str:
    """What makes a stored timing (its JSON object) impossible as a measurement — 'field …' — or ''."""
    if not isinstance(timing, dict):
        return f"timing is {timing!r}, not an object with samples"
    if "samples" not in timing:
        return f"{SAMPLE_FIELD} is missing"
    samples = timing.get("samples")
    if not isinstance(samples, list):
        return f"{SAMPLE_FIELD} is {samples!r}, not a list of seconds"
    if not samples:
        return f"{SAMPLE_FIELD} is empty: a timing without samples measured nothing"
    for i, value in enumerate(samples):
        if why := _bad_time(value):
            return f"{SAMPLE_FIELD}[{i}] {why}"
    for name in TIME_FIELDS:
        value = timing.get(name)
        if value is not None and (why := _bad_time(value)):
            return f"timing.{name} {why}"
    return ""
