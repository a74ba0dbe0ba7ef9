"""The results file: appended per cell, resumable, refuses foreign or newer files, survives a truncated line."""
from __future__ import annotations

import json

import pytest

from adcompare.cell import Cell
from adcompare.errors import ResultsFileError
from adcompare.measurement import Check, Measurement, Timing
from adcompare.results import SCHEMA, ResultsWriter, finished_keys, load
from adcompare.status import Status


def _m(size="n10", status=Status.OK):
    cell = Cell("exp_dot_loss", size, "grad", "jax", "eager", "cpu", "float32")
    return Measurement(cell, status, timing=Timing((1e-5, 2e-5, 3e-5), 10, 1e-3),
                       check=Check(1e-7, 1e-4, "central differences"))


def test_roundtrip_and_resume(tmp_path):
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path, {"host": "h"}) as w:
        w.add(_m("n10"))
    with ResultsWriter(path, {"host": "h"}, resume=True) as w:
        w.add(_m("n100"))
    results = load([path])
    assert [m.cell.size for m in results.measurements] == ["n10", "n100"]
    assert results.measurements[0].timing.median == pytest.approx(2e-5)
    assert finished_keys(path) == {m.cell.key for m in results.measurements}


def test_truncated_last_line_is_dropped_with_a_warning(tmp_path):
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path, {}) as w:
        w.add(_m("n10"))
        w.add(_m("n100"))
    data = path.read_text()
    path.write_text(data[: len(data) - 40])
    with pytest.warns(UserWarning, match="dropped truncated last line"):
        results = load([path])
    assert [m.cell.size for m in results.measurements] == ["n10"]
    with ResultsWriter(path, {}, resume=True) as w:  # resuming repairs the tail before appending
        w.add(_m("n100"))
    assert len(load([path]).measurements) == 2


def test_foreign_and_newer_files_are_refused(tmp_path):
    foreign = tmp_path / "f.jsonl"
    foreign.write_text('{"hello": 1}\n')
    with pytest.raises(ResultsFileError, match="is not an adcompare results file"):
        load([foreign])
    newer = tmp_path / "n.jsonl"
    newer.write_text(json.dumps({"format": "adcompare-results", "schema": SCHEMA + 1, "provenance": {}}) + "\n")
    with pytest.raises(ResultsFileError, match="newer than this adcompare reads"):
        load([newer])


def test_timing_statistics_are_numpys_median_and_percentiles():
    """Timing computes its statistics without NumPy (the report reads them for 10⁴ cells); same values."""
    import numpy as np

    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 4, 7, 10, 51):
        samples = tuple(rng.random(n))
        t = Timing(samples, 1, 0.1)
        q1, q3 = np.percentile(samples, [25, 75])
        assert (t.median, t.iqr, t.min) == (float(np.median(samples)), float(q3 - q1), min(samples))


def test_a_gzipped_results_file_reads_like_the_plain_one(tmp_path):
    """Published baselines are committed gzipped (benchmarks/results/full/); report, compare and --history read them."""
    import gzip

    plain = tmp_path / "r.jsonl"
    with ResultsWriter(plain, {"host": "test"}) as w:
        w.add(Measurement(Cell("f_xy", "n2", "grad", "jax", "eager", "cpu", "float64"), Status.OK))
    packed = tmp_path / "r.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert load([packed]).measurements == load([plain]).measurements
    (tmp_path / "bad.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(ResultsFileError, match="cannot read results file"):
        load([tmp_path / "bad.jsonl.gz"])
