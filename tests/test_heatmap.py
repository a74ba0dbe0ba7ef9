"""The overview heatmap (analysis/ratio_grid.py, drawn by report/heatmap.py): rows at the largest size, ratios to
the row's fastest, glyphs, links."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from adcompare.analysis import ratio_grid
from adcompare.analysis.bootstrap import Bootstrap
from adcompare.model.cell import Cell
from adcompare.model.measurement import Measurement, Timing
from adcompare.model.status import Status
from adcompare.report import heatmap


def _m(size, operator, adapter, variant, seconds=None, status=Status.OK, support="native", message=""):
    timing = Timing(tuple(seconds * (1 + k / 100) for k in range(9)), 1, seconds) if seconds else None
    return Measurement(Cell("exp_dot_loss", size, operator, adapter, variant, "cpu", "float32"), status, message,
                       support, "", timing, machine="m1")


CELLS = [
    _m("n10", "jacrev", "jax", "eager", 1e-6),  # smaller size: left out of the overview
    _m("n1000", "jacrev", "jax", "eager", 1e-4),
    _m("n1000", "jacrev", "torch", "eager", 1e-3),
    _m("n1000", "jacrev", "autograd", "eager", 5e-3, support="emulated"),
    _m("n1000", "jacrev", "autograd", "compiled", status=Status.UNSUPPORTED, message="no compiler"),
    _m("n1000", "jacrev", "torch", "compiled", status=Status.FAILED, message="boom"),
    _m("n1000", "jacfwd", "torch", "compiled", status=Status.CRASHED, message="segfault"),  # expected (table)
    _m("n1000", "jacfwd", "jax", "eager", 2e-3),
    _m("n1000", "jacfwd", "autograd", "eager", status=Status.SKIPPED,
       message="skipped: not scheduled: estimated not to fit within --max-time 15m"),  # as budget.py writes it
]


def test_tiles_ratios_glyphs_and_links():
    h = heatmap.drawn(ratio_grid.build("cpu · float32", CELLS, Bootstrap()))
    assert h.rows == ("exp_dot_loss · jacfwd (n1000)", "exp_dot_loss · jacrev (n1000)")
    assert h.columns == ("autograd · compiled", "autograd · eager", "jax · eager", "torch · compiled",
                         "torch · eager")
    jacrev = {h.columns[j]: t for (i, j), t in h.tiles.items() if i == 1}
    assert jacrev["jax · eager"].text == "1" and "fastest" in jacrev["jax · eager"].hover
    assert jacrev["torch · eager"].text == "10" and "×10 [" in jacrev["torch · eager"].hover
    assert "median 1.04 ms" in jacrev["torch · eager"].hover
    assert jacrev["autograd · eager"].text == "50~" and jacrev["autograd · eager"].emulated
    assert jacrev["autograd · compiled"].text == "–" and jacrev["torch · compiled"].text == "✗"
    jacfwd = {h.columns[j]: t for (i, j), t in h.tiles.items() if i == 0}
    assert jacfwd["torch · compiled"].text == "⊘" and "expected" in jacfwd["torch · compiled"].hover
    assert jacfwd["autograd · eager"].text == "·"
    assert jacfwd["autograd · eager"].hover.endswith(  # the status once, though the message starts with it
        "autograd · eager: skipped: not scheduled: estimated not to fit within --max-time 15m")
    assert jacrev["torch · compiled"].hover.endswith("torch · compiled: failed: boom")
    assert jacrev["torch · eager"].link == ("#filter=problem=exp_dot_loss%20size=n1000%20operator=jacrev%20"
                                            "adapter=torch%20variant=eager%20device=cpu%20dtype=float32")
    assert jacrev["torch · eager"].fill != jacrev["jax · eager"].fill == heatmap.VIRIDIS[0]
    svg = ET.fromstring(h.svg)
    assert len(svg.findall(".//{http://www.w3.org/2000/svg}a")) == len(h.tiles)


def test_many_rows_aggregate_per_problem(monkeypatch):
    monkeypatch.setattr(ratio_grid, "MAX_TILES", 4)
    h = heatmap.drawn(ratio_grid.build("cpu · float32", CELLS, Bootstrap()))
    assert h.aggregated and h.rows == ("exp_dot_loss",)
    tile = next(t for (i, j), t in h.tiles.items() if h.columns[j] == "jax · eager")
    assert tile.text == "1" and "over 2 operators" in tile.hover  # fastest for jacrev and for jacfwd
    assert tile.link.endswith("problem=exp_dot_loss%20adapter=jax%20variant=eager%20device=cpu%20dtype=float32")


def test_colour_is_logarithmic():
    assert heatmap.colour(1.0, 100) == heatmap.VIRIDIS[0]
    assert heatmap.colour(100.0, 100) == heatmap.VIRIDIS[-1]
    assert heatmap.colour(10.0, 100) in heatmap.VIRIDIS[4:6]


def test_an_unlabelled_framework_bug_is_judged_by_the_versions_its_worker_loaded():
    """jaxlib 0.10.2's wrong BA jacrev is expected on 0.10.2 only: a record from 0.10.1 with the same failure is an
    unexplained ✗ whatever jaxlib this process has installed."""
    def ba(jaxlib):
        return Measurement(Cell("bundle_adjustment", "n5-m50-p300", "jacrev", "jax", "compiled", "cpu", "float32"),
                           Status.MISMATCH, "error 1.00e+00", "native", "", None, machine="m1",
                           versions={"jax": jaxlib, "jaxlib": jaxlib})

    affected, fixed = ratio_grid.glyph(ba("0.10.2")), ratio_grid.glyph(ba("0.10.1"))
    assert affected[0] == "⊘" and "YNNPACK" in affected[1]
    assert fixed[0] == "✗" and fixed[1] == "mismatch: error 1.00e+00"


def _pmap(adapter, devices, seconds=None, status=Status.OK, device="cuda"):
    timing = Timing(tuple(seconds * (1 + k / 100) for k in range(9)), 1, seconds) if seconds else None
    return Measurement(Cell("mlp_loss", "B16-h16", "pmap_grad", adapter, "compiled", device, "float32",
                            devices=devices), status, "" if status is Status.OK else "needs 2 devices, 1 present",
                       "native", "", timing, machine="m1")


def test_a_data_parallel_row_shows_the_largest_device_count_timed():
    """One GPU: D = 2 and 4 are unsupported, D = 1 is timed — the row shows the D = 1 cells (it read "–" in every
    column when it took the largest device count run)."""
    gpu = [_pmap(a, d, s if d == 1 else None, Status.OK if d == 1 else Status.UNSUPPORTED)
           for d in (1, 2, 4) for a, s in (("jax", 1e-4), ("torch", 3e-4))]
    h = ratio_grid.build("cuda · float32", gpu, Bootstrap())
    assert h.rows == ("mlp_loss · pmap_grad (B16-h16)",)
    tiles = {h.columns[j]: t.text for (i, j), t in h.tiles.items()}
    assert tiles == {"jax · compiled": "1", "torch · compiled": "3"}
    # Emulated CPU devices, all timed: the row is D = 4's, each ratio to the fastest D = 4 cell, not to a D = 1 one.
    cpu = [_pmap(a, d, s * d, device="cpu") for d in (1, 2, 4) for a, s in (("jax", 1e-4), ("torch", 2e-4))]
    h = ratio_grid.build("cpu · float32", cpu, Bootstrap())
    assert h.rows == ("mlp_loss · pmap_grad (B16-h16 · D = 4)",)
    tiles = {h.columns[j]: t for (i, j), t in h.tiles.items()}
    assert tiles["jax · compiled"].text == "1" and "fastest" in tiles["jax · compiled"].hover
    assert tiles["torch · compiled"].text == "2" and "median 832 µs" in tiles["torch · compiled"].hover
