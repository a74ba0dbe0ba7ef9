"""Every cell as one row (analysis/cell_rows.py): the page's sortable table, results.csv, and the CSV download
link share these rows.

The page carries the rows once, as JSON in a <script type="application/json"> block, dictionary-encoded per
column (most columns repeat a handful of values; a 10,000-cell table is then ~1 MB instead of ~5 MB of <tr>s).
The page's script draws the table from it and builds the download link's data: URL with the same quoting as
Python's csv module, so the download and results.csv are the same bytes.
"""
from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from adcompare.analysis.cell_rows import COLUMNS, Column
from adcompare.model.cell import FIELDS, Cell


def to_csv(table: list[list[str]], columns: Sequence[Column] = COLUMNS) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")  # QUOTE_MINIMAL; the page's script quotes the same way
    writer.writerow([c.name for c in columns])
    writer.writerows(table)
    return buffer.getvalue()


def selector_template() -> str:
    """Cell.selector with {field} holes, so the page need not carry ~110 bytes of selector per row."""
    holes: dict[str, Any] = {f: "\0" + f + "\0" for f in FIELDS}
    return Cell(**holes).selector


def fill(template: str, row: list[str]) -> str:
    for i, f in enumerate(FIELDS):
        template = template.replace("\0" + f + "\0", row[i])
    return template


ALPHABET = "".join(chr(c) for c in range(0x23, 0x7F) if chr(c) not in "\\<>&")  # JSON- and HTML-inert


def _column(values: list[str]) -> dict[str, Any]:
    """A column as plain values when mostly distinct (timings), else a dictionary plus fixed-width codes in
    ALPHABET — one character per row for a column of a few dozen distinct values."""
    index: dict[str, int] = {}
    codes = [index.setdefault(v, len(index)) for v in values]
    if len(index) * 4 > len(values):
        return {"values": values}
    width = 1
    while len(ALPHABET) ** width < len(index):
        width += 1
    spelled = []
    for code in range(len(index)):
        digits = ""
        for _ in range(width):
            code, digit = divmod(code, len(ALPHABET))
            digits = ALPHABET[digit] + digits
        spelled.append(digits)
    return {"dict": list(index), "codes": "".join(spelled[c] for c in codes), "width": width}


def payload(table: list[list[str]], columns: Sequence[Column] = COLUMNS) -> str:
    """The JSON the page's script reads; safe inside <script> ('<' and '>' and '&' are \\u-escaped)."""
    template = selector_template()
    selector = next(i for i, c in enumerate(columns) if c.name == "selector")
    values: list[list[str]] = [[] for _ in columns]
    for row in table:
        for i, v in enumerate(row):
            values[i].append("" if i == selector and fill(template, row) == v else v)  # rebuilt by the script
    data = {
        "rows": len(table),
        "columns": [{"name": c.name, "kind": c.kind, "shown": c.shown or (c.shown_when_filled and any(column)),
                     **_column(column)}
                    for c, column in zip(columns, values)],
        "alphabet": ALPHABET,
        "fields": list(FIELDS),
        "selector": template,
    }
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
