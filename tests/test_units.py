"""One duration formatter for the terminal, the report's tables and its chart axes."""
from __future__ import annotations

import math

from adcompare.analysis import ratio_grid
from adcompare.cli import tables as display
from adcompare.model import units
from adcompare.report import figures, page


def test_durations_take_the_largest_unit_with_three_digits():
    assert units.seconds(1.234) == "1.23 s"
    assert units.seconds(4.56e-3) == "4.56 ms"
    assert units.seconds(12.3e-6) == "12.3 µs"
    assert units.seconds(7e-9) == "7 ns"
    assert units.seconds(3e-12) == "0.003 ns"


def test_a_value_that_rounds_to_a_thousand_moves_up_a_unit():
    assert units.seconds(999.7e-6) == "1 ms"
    assert units.seconds(0.9997) == "1 s"
    assert units.seconds(999.4e-6) == "999 µs"


def test_missing_and_infinite_durations():
    assert units.seconds(None) == units.seconds(math.nan) == "–"
    assert units.seconds(None, "—") == "—"
    assert units.seconds(math.inf) == "∞"


def test_the_terminal_the_report_and_the_charts_share_it():
    assert display.seconds is page.seconds is figures.seconds is ratio_grid.seconds is units.seconds


def test_a_message_says_whole_seconds_and_never_zero_for_a_fraction():
    assert units.whole_seconds(2069.6) == "2070 s" and units.whole_seconds(1.0) == "1 s"
    assert units.whole_seconds(0.31) == "310 ms" and units.whole_seconds(0.0002) == "200 µs"
