"""`adcompare report`'s builder: results → one self-contained index.html (inline SVG figures) + results.csv.

`build(results, out_dir)` is the entry point the CLI calls; page.py assembles the sections, each computed by its
own module (summary, compile_cost, relative_cost, correctness, cells_table) and drawn by figures.py.
"""
from __future__ import annotations

from adcompare.report.page import build

__all__ = ["build"]
