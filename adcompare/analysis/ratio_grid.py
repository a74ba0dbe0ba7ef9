"""The overview at a glance, as data: per (machine, device, dtype) a grid of time ÷ the row's fastest.

Rows are problem · operator at the largest size timed, columns adapter · variant; a tile holds its median ÷ the
row's fastest median, its text (the ratio, or a glyph for a cell that has no time: ✗ failed (or crashed, timed
out, NaN, mismatch), ⊘ failed as expected (expectations.py), – unsupported, · not run (too large, skipped)), its
hover text (the ratio's bootstrap interval and the median) and the cell-table filter it opens; an emulated cell (a
Python loop) is marked "~". report/heatmap.py colours and draws it.

With many rows (a 10,000-cell run) the tiles are aggregated per problem: the geometric mean of the ratios over
the problem's operators, linking to the table filtered to that problem and column, so the figure stays readable
and the page small.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from adcompare.analysis import sizes
from adcompare.analysis.bootstrap import Bootstrap
from adcompare.analysis.gradbench import EvalRow
from adcompare.analysis.summary import entry, operator_order, sample_key, timed
from adcompare.model.measurement import Measurement
from adcompare.model.status import Status
from adcompare.model.support import Support
from adcompare.model.units import seconds
from adcompare.verify.expectations import expected, expected_reason

MAX_TILES = 600  # above this many tiles in one grid, rows are aggregated per problem
GLYPHS = (("✗", "failed, crashed, timed out, NaN or wrong derivative"), ("⊘", "failed as expected (a known limit)"),
          ("–", "unsupported"), ("·", "not run (too large, skipped)"), ("~", "emulated: a Python loop"))
NOT_RUN = (Status.TOO_LARGE, Status.SKIPPED)


@dataclass(frozen=True)
class Tile:
    text: str  # ratio or glyph
    ratio: float | None  # time ÷ the row's fastest (a geometric mean when aggregated); None for a glyph
    hover: str
    link: str  # the cell-table filter this tile opens
    emulated: bool = False


@dataclass(frozen=True)
class Grid:
    title: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    tiles: Mapping[tuple[int, int], Tile]
    top: float  # ratio at the darkest colour
    aggregated: bool


def _filter(**terms: str) -> str:
    return "#filter=" + quote(" ".join(f"{k}={v}" for k, v in terms.items() if v), safe="=")


def glyph(m: Measurement) -> tuple[str, str] | None:
    """(glyph, why) for a cell without a time, else None."""
    if timed(m):
        return None
    why = expected_reason(m)  # set by expectations.labelled when the CLI reports
    if why is None and (known := expected(m.cell, True, m.versions or None)) is not None and m.status is known[0]:
        why = known[1]  # unlabelled results: the table's rules (framework bugs by the versions the worker loaded)
    if why:
        return "⊘", f"failed as expected: {why}"
    if m.status is Status.UNSUPPORTED:
        return "–", _said(m)
    if m.status in NOT_RUN:
        return "·", _said(m)
    return "✗", _said(m)


def _said(m: Measurement) -> str:
    """The status and its message, the status once: skipped cells' messages already begin with "skipped: "."""
    prefix = f"{m.status.value}: "
    return m.message if m.message.startswith(prefix) else prefix + m.message


def _largest(cells: Sequence[Measurement]) -> list[Measurement]:
    """The cells of each problem · operator at its largest size timed (largest size run, when none was timed),
    and of a data-parallel operator at the largest device count timed there: a row holds one device count, so
    on one GPU, where D > 1 is unsupported, the row shows the D = 1 cells rather than a row of "–"."""
    by_row: dict[tuple[str, str], list[Measurement]] = defaultdict(list)
    for m in cells:
        by_row[(m.cell.problem, m.cell.operator)].append(m)
    out = []
    for members in by_row.values():
        pool = [m for m in members if timed(m)] or members
        size = max((m.cell.size for m in pool), key=sizes.sort_key)
        at_size = [m for m in members if m.cell.size == size]
        devices = max(m.cell.devices for m in [m for m in at_size if timed(m)] or at_size)
        out += [m for m in at_size if m.cell.devices == devices]
    return out


def _row_label(problem: str, operator: str, chosen: Sequence[Measurement]) -> str:
    """`problem · operator (size)`, with the device count when the row's cells split across several devices."""
    m = next(m for m in chosen if (m.cell.problem, m.cell.operator) == (problem, operator))
    return f"{problem} · {operator} ({m.cell.size}{f' · D = {m.cell.devices}' if m.cell.devices != 1 else ''})"


def build(title: str, cells: Sequence[Measurement], boot: Bootstrap, machine: str = "") -> Grid | None:
    """The grid of one (machine, device, dtype); None when it has no cell."""
    chosen = _largest(cells)
    if not chosen:
        return None
    columns = tuple(sorted({entry(m) for m in chosen}))
    rows = sorted({(m.cell.problem, m.cell.operator) for m in chosen}, key=lambda r: (r[0], operator_order(r[1])))
    fastest: dict[tuple[str, str], Measurement] = {}
    for m in chosen:
        key = (m.cell.problem, m.cell.operator)
        if timed(m) and (key not in fastest or m.measured.median < fastest[key].measured.median):
            fastest[key] = m
    ratios = [m.measured.median / fastest[(m.cell.problem, m.cell.operator)].measured.median
              for m in chosen if timed(m)]
    top = _top(ratios)
    if len(rows) * len(columns) > MAX_TILES:
        return _aggregated(title, chosen, columns, fastest, top, machine)
    labels = tuple(_row_label(p, op, chosen) for p, op in rows)
    row_index = {r: i for i, r in enumerate(rows)}
    col_index = {c: j for j, c in enumerate(columns)}
    tiles = {(row_index[(m.cell.problem, m.cell.operator)], col_index[entry(m)]):
             _tile(m, fastest.get((m.cell.problem, m.cell.operator)), boot, top, machine) for m in chosen}
    return Grid(title, labels, columns, tiles, top, aggregated=False)


def _top(ratios: Sequence[float]) -> float:
    """The ratio at the darkest colour: the decade above the largest ratio, 10× at least."""
    return 10 ** max(1, math.ceil(math.log10(max(ratios, default=10))))


def _tile(m: Measurement, best: Measurement | None, boot: Bootstrap, top: float, machine: str) -> Tile:
    """`m`'s tile: its time ÷ `best`'s (the row's fastest) with the bootstrap interval, or its glyph."""
    c = m.cell
    where = f"{c.problem} · {c.operator} · {c.size} — {entry(m)}"
    link = _filter(problem=c.problem, size=c.size, operator=c.operator, adapter=c.adapter, variant=c.variant,
                   device=c.device, dtype=c.dtype, machine=machine and m.machine)
    marked = glyph(m)
    if marked is not None or best is None:
        text, why = marked or ("✗", m.status.value)
        return Tile(text, None, f"{where}: {why}", link)
    ratio = m.measured.median / best.measured.median
    interval = ""
    r = boot.ratio(sample_key(best), best.measured, sample_key(m), m.measured) if m is not best else None
    if r is not None:
        interval = f" [{r.low:.2f}–{r.high:.2f}]"
    what = "fastest" if m is best else f"×{ratio:.3g}{interval} vs {entry(best)}"
    emulated = m.support is Support.EMULATED
    return Tile(ratio_text(ratio) + ("~" if emulated else ""), ratio,
                f"{where}: {what}; median {seconds(m.measured.median)}" + (" (emulated)" if emulated else ""),
                link, emulated)


def evals(title: str, rows: Sequence[EvalRow], boot: Bootstrap, machine: str = "") -> Grid | None:
    """GradBench's eval × tool overview: one row per eval's derivative operator at its row's size (see
    analysis/gradbench.py), columns adapter · variant, tiles as in `build`; None without rows."""
    if not rows:
        return None
    columns = tuple(sorted({name for row in rows for name in row.cells}))
    col_index = {c: j for j, c in enumerate(columns)}
    fastest = [min((m for m in row.cells.values() if timed(m)), key=lambda m: m.measured.median, default=None)
               for row in rows]
    top = _top([m.measured.median / best.measured.median for row, best in zip(rows, fastest) if best is not None
                for m in row.cells.values() if timed(m)])
    tiles = {(i, col_index[name]): _tile(m, best, boot, top, machine)
             for i, (row, best) in enumerate(zip(rows, fastest)) for name, m in row.cells.items()}
    return Grid(title, tuple(row.label for row in rows), columns, tiles, top, aggregated=False)


def _aggregated(title: str, chosen: Sequence[Measurement], columns: tuple[str, ...],
                fastest: dict[tuple[str, str], Measurement], top: float, machine: str) -> Grid:
    problems = sorted({m.cell.problem for m in chosen})
    groups: dict[tuple[int, int], list[Measurement]] = defaultdict(list)
    col_index = {c: j for j, c in enumerate(columns)}
    row_index = {p: i for i, p in enumerate(problems)}
    for m in chosen:
        groups[(row_index[m.cell.problem], col_index[entry(m)])].append(m)
    tiles = {}
    for (i, j), members in groups.items():
        logs = [math.log(m.measured.median / fastest[(m.cell.problem, m.cell.operator)].measured.median)
                for m in members if timed(m)]
        bad = sum(1 for m in members if not timed(m))
        c = members[0].cell
        link = _filter(problem=c.problem, adapter=c.adapter, variant=c.variant, device=c.device, dtype=c.dtype,
                       machine=machine and members[0].machine)
        where = f"{c.problem} — {columns[j]}"
        if not logs:
            # every member is untimed here, so each has a glyph; one kind (all unsupported, say) keeps its glyph
            glyphs = {marked[0] for m in members if (marked := glyph(m)) is not None}
            text = glyphs.pop() if len(glyphs) == 1 else "✗"
            tiles[(i, j)] = Tile(text, None, f"{where}: no operator timed ({bad} cells: "
                                 f"{', '.join(sorted({m.status.value for m in members}))})", link)
            continue
        mean = math.exp(sum(logs) / len(logs))
        extra = f", {bad} without a time" if bad else ""
        tiles[(i, j)] = Tile(ratio_text(mean), mean,
                             f"{where}: geometric mean ×{mean:.3g} vs the fastest over {len(logs)} operators at "
                             f"their largest size{extra}", link)
    return Grid(title + " (per problem: geometric mean over operators)", tuple(problems), columns, tiles, top,
                   aggregated=True)


def grids(ms: Sequence[Measurement], machine_label: Callable[[Measurement], str], boot: Bootstrap
             ) -> list[Grid]:
    """One grid per (machine, device, dtype), in that order."""
    groups: dict[tuple[str, str, str], list[Measurement]] = defaultdict(list)
    for m in ms:
        groups[(machine_label(m), m.cell.device, m.cell.dtype)].append(m)
    out = []
    for (machine, device, dtype), cells in sorted(groups.items()):
        title = " · ".join(part for part in (machine, device, dtype) if part)
        if (h := build(title, cells, boot, machine)) is not None:
            out.append(h)
    return out


def ratio_text(r: float) -> str:
    """A tile's ratio in at most four characters: 1, 2.35, 41.3, 476, 1.3k, 33k."""
    return f"{r:.3g}" if r < 1000 else f"{r / 1000:.2g}k"
