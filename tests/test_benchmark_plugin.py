"""`pytest --benchmark-only` through adcompare's pytest11 plugin, and its JSON into `adcompare report`'s loader."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from adcompare.errors import ResultsFileError
from adcompare.results import load
from adcompare.status import Status

ROOT = Path(__file__).resolve().parent.parent


def test_benchmark_only_runs_the_matrix_and_its_json_loads(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "benchmarks" / "test_matrix.py"), "--benchmark-only", "-q",
         "-p", "no:cacheprovider", "--adcompare-adapters", "jax", "--adcompare-problems", "f_r2_r3",
         "--adcompare-variants", "compiled", "--benchmark-min-rounds", "3", "--benchmark-max-time", "0.05",
         "--benchmark-save-data", f"--benchmark-json={out}"],
        cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    results = load([out])
    ops = sorted(m.cell.operator for m in results.measurements)
    assert ops == ["jacfwd", "jacrev"]
    for m in results.measurements:
        assert m.status is Status.OK and m.timing.median > 0 and len(m.timing.samples) >= 3
        assert m.timing.compile is not None and m.timing.first_call > 0
    assert results.provenance[0]["source"].startswith("pytest-benchmark")


def test_plain_pytest_benchmark_records_are_refused(tmp_path):
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"machine_info": {}, "commit_info": {}, "benchmarks": [
        {"name": "test_x", "fullname": "t.py::test_x", "extra_info": {}, "stats": {"median": 1.0}}]}))
    with pytest.raises(ResultsFileError, match="lacks adcompare extra_info"):
        load([foreign])
