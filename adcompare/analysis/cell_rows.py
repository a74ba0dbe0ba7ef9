"""Every cell as one row of text: the report's sortable table and results.csv are drawn from these rows
(report/cells_table.py encodes them), one column per field of the cell, its outcome, timings and checks."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from adcompare.analysis import sizes
from adcompare.analysis.compile_cost import compile_seconds
from adcompare.analysis.relative_cost import RelativeCosts
from adcompare.analysis.summary import operator_order
from adcompare.model.cell import FIELDS
from adcompare.model.measurement import Measurement
from adcompare.verify.expectations import expected_reason


def _num(value: float | int | None, digits: int = 4) -> str:
    """Few significant digits: timings are noisy at the percent level and errors matter by their exponent, while
    full repr doubles the page (results.jsonl keeps every digit)."""
    return "" if value is None else f"{value:.{digits}g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Column:
    name: str
    get: Callable[[Measurement, RelativeCosts], Any]
    kind: str = "text"  # text | seconds | number | ratio | error — how the page formats and sorts it
    shown: bool = True  # in the page's table; every column is in the CSV
    shown_when_filled: bool = False  # shown after all when any row has a value (device memory: only GPU cells do)

    def value(self, m: Measurement, relative_costs: RelativeCosts) -> str:
        v = self.get(m, relative_costs)
        return v if isinstance(v, str) else _num(v, 3 if self.kind == "error" else 4)


def timing_field(attr: str) -> Callable[[Measurement, RelativeCosts], Any]:
    return lambda m, costs: getattr(m.timing, attr) if m.timing else None


def _cell_field(name: str) -> Callable[[Measurement, RelativeCosts], Any]:
    return lambda m, costs: getattr(m.cell, name)


def check_field(attr: str) -> Callable[[Measurement, RelativeCosts], Any]:
    return lambda m, costs: getattr(m.check, attr) if m.check else None


COLUMNS: tuple[Column, ...] = (
    *(Column(f, _cell_field(f)) for f in FIELDS),
    Column("status", lambda m, costs: m.status.value),
    Column("support", lambda m, costs: m.support.value if m.support else ""),
    Column("median_s", timing_field("median"), "seconds"),
    Column("iqr_s", timing_field("spread"), "seconds"),  # none for 1–2 samples (Timing.spread)
    Column("samples", lambda m, costs: len(m.timing.samples) if m.timing else None, "number"),
    # why a timing has fewer samples than its rule asks (a slow cell's deadline, its cell timeout), shown when any has
    Column("stopped", lambda m, costs: m.timing.stopped if m.timing else "", shown=False, shown_when_filled=True),
    Column("calls_per_sample", timing_field("number"), "number", shown=False),
    Column("first_call_s", timing_field("first_call"), "seconds", shown=False),
    Column("compile_s", lambda m, costs: compile_seconds(m) if m.compiled else None, "seconds"),
    Column("j_over_o", lambda m, costs: costs.get(m.merge_key), "ratio"),
    Column("error", check_field("error"), "error"),
    Column("tolerance", check_field("tolerance"), "error", shown=False),
    Column("pairwise_error", check_field("pairwise_error"), "error", shown=False),
    Column("adjoint_error", check_field("adjoint_error"), "error", shown=False),
    Column("algorithm", lambda m, costs: m.algorithm),
    Column("message", lambda m, costs: m.message),
    Column("expected", lambda m, costs: expected_reason(m)),  # the known limitation a failure matches
    Column("device_name", lambda m, costs: m.device_name, shown=False),
    Column("machine", lambda m, costs: m.machine, shown=False),
    Column("host_peak_bytes", lambda m, costs: m.host_peak_bytes, "number", shown=False),
    Column("device_peak_bytes", lambda m, costs: m.device_peak_bytes, "number", shown=False, shown_when_filled=True),
    Column("selector", lambda m, costs: m.cell.selector),
)

ENVIRONMENT = Column("environment", lambda m, costs: m.cell.environment)


def columns_for(measurements: Iterable[Measurement]) -> tuple[Column, ...]:
    """COLUMNS, with an `environment` column after the cell's fields when the cells come from several
    environments (`run --env`); a run in one environment keeps the table and results.csv it always had."""
    if len({m.cell.environment for m in measurements}) < 2:
        return COLUMNS
    return (*COLUMNS[:len(FIELDS)], ENVIRONMENT, *COLUMNS[len(FIELDS):])


def ordered(measurements: Iterable[Measurement]) -> list[Measurement]:
    return sorted(measurements, key=lambda m: (m.cell.problem, sizes.sort_key(m.cell.size),
                                               operator_order(m.cell.operator), m.cell.adapter, m.cell.variant,
                                               m.cell.device, m.cell.dtype, m.cell.environment))


def rows(measurements: Sequence[Measurement], relative_costs: RelativeCosts,
         columns: Sequence[Column] = COLUMNS) -> list[list[str]]:
    """One row of text per measurement, one entry per column."""
    return [[c.value(m, relative_costs) for c in columns] for m in measurements]


