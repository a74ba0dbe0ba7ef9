"""Size labels as numbers: "n100" → {n: 100}, "n10-p256-o5" → {n: 10, p: 256, o: 5}.

The results file keeps only the label (problem.Size.label), so the report reads the dimensions back from it to sort
sizes numerically and to pick an x axis for scaling plots. A label that does not parse (a third-party problem with
free-form sizes) still sorts, after the parsed ones, and is plotted by its position.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_PART = re.compile(r"([A-Za-z_]+)(\d+)")


def parse(label: str) -> dict[str, int] | None:
    dims: dict[str, int] = {}
    for part in label.split("-"):
        match = _PART.fullmatch(part)
        if match is None:
            return None
        dims[match.group(1)] = int(match.group(2))
    return dims or None


def sort_key(label: str) -> tuple:
    """Numeric order: n10 < n100 < n1000, and grids by their dimensions in declared order."""
    dims = parse(label)
    return (0, tuple(dims.values()), label) if dims else (1, (), label)


def ordered(labels: Iterable[str]) -> list[str]:
    return sorted(set(labels), key=sort_key)


@dataclass(frozen=True)
class Axis:
    """How a problem's sizes become one x axis: the dimension that varies most, the others held at one value.

    A grid such as n×p×o would otherwise draw a zig-zag; a slice through it draws a curve. `fixed` says which slice
    (shown in the figure title) and `x` maps each label on the slice to its coordinate; labels off the slice are
    left out of the scaling plot (they are still in the summary and the table).
    """

    name: str  # "n", or "size #" for unparsed labels
    fixed: tuple[tuple[str, int], ...]
    x: dict[str, float]

    @property
    def caption(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.fixed)


def axis(labels: Iterable[str]) -> Axis:
    labels = ordered(labels)
    parsed = {label: parse(label) for label in labels}
    names = {tuple(d) for d in parsed.values() if d}
    if not labels or any(d is None for d in parsed.values()) or len(names) != 1:
        return Axis("size #", (), {label: float(i + 1) for i, label in enumerate(labels)})
    dim_names = next(iter(names))
    dims = {label: d for label, d in parsed.items() if d is not None}  # every label parsed (checked above)
    values = {k: sorted({dims[label][k] for label in labels}) for k in dim_names}
    varying = max(dim_names, key=lambda k: (len(values[k]), -dim_names.index(k)))
    fixed = tuple((k, values[k][-1]) for k in dim_names if k != varying)  # largest: where differences show
    x = {label: float(d[varying]) for label, d in dims.items() if all(d[k] == v for k, v in fixed)}
    return Axis(varying, fixed, x)
