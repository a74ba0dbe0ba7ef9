"""`pytest --benchmark-only` through adcompare's pytest11 plugin, and its JSON into `adcompare report`'s loader."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from adcompare.model.errors import ResultsFileError
from adcompare.model.status import Status
from adcompare.store.results import load

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
    assert results.provenance[0].source.startswith("pytest-benchmark")


def test_plain_pytest_benchmark_records_are_refused(tmp_path):
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"machine_info": {}, "commit_info": {}, "benchmarks": [
        {"name": "test_x", "fullname": "t.py::test_x", "extra_info": {}, "stats": {"median": 1.0}}]}))
    with pytest.raises(ResultsFileError, match="lacks adcompare extra_info"):
        load([foreign])


def test_known_limitations_are_strict_xfails_and_the_run_is_green():
    """The root's `pytest --benchmark-only` reaches benchmarks/ through testpaths (held below); it runs that folder
    alone here, since collecting tests/ as well (~25 s) adds nothing the test suite's own collection does not."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks", "--benchmark-only", "-q", "-p", "no:cacheprovider", "-rx",
         "--adcompare-adapters", "jax", "--adcompare-problems", "control_loop", "--adcompare-variants", "compiled",
         "--benchmark-max-time", "0.05"],
        cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 xfailed" in done.stdout and "known limitation: data-dependent Python control flow" in done.stdout
    ini = (ROOT / "pyproject.toml").read_text().split("[tool.pytest.ini_options]")[1].split("\n[")[0]
    assert re.search(r'testpaths = \[[^]]*"benchmarks"', ini) and "--benchmark-skip" in ini


USER_PROBLEMS = '''
import numpy as np
from adcompare import problem


@problem(sizes=[3, 30], wrt="x", operators=("value", "grad"))
def my_square_sum(x, /, *, xp):
    """sum(x²): R^n → R, a user's own problem."""
    return xp.sum(x * x)


@my_square_sum.inputs
def _(rng, n):
    return {"x": rng.standard_normal(n)}
'''


def test_a_users_own_project_benchmarks_its_problems(tmp_path):
    """The README's recipe: one import line in a test module and an ini option naming the problems' file."""
    (tmp_path / "my_problems.py").write_text(USER_PROBLEMS)
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\nadcompare_plugins = ["my_problems.py"]\n'
                                             'addopts = "--benchmark-skip"\n')
    (tmp_path / "test_adcompare.py").write_text(
        "from adcompare.pytest_plugin import test_adcompare_cell  # noqa: F401\n")
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--benchmark-only", "-q", "-p", "no:cacheprovider",
         "--adcompare-adapters", "jax", "--adcompare-problems", "my_square_sum", "--benchmark-max-time", "0.05",
         f"--benchmark-json={out}"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    results = load([out])
    assert {(m.cell.problem, m.cell.operator) for m in results.measurements} >= {("my_square_sum", "grad")}
    assert all(m.status is Status.OK for m in results.measurements)
    report = subprocess.run([sys.executable, "-m", "adcompare", "report", str(out), "-o", str(tmp_path / "r")],
                            cwd=tmp_path, capture_output=True, text=True)
    assert report.returncode == 0, report.stderr[-2000:]
    assert (tmp_path / "r" / "index.html").exists()
    plain = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--adcompare-adapters",
                            "jax", "--adcompare-problems", "my_square_sum"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert "skipped" in plain.stdout and "passed" not in plain.stdout, plain.stdout[-2000:]


def test_a_cell_on_several_devices_is_skipped_in_process_with_the_command_that_times_it():
    """A framework fixes its device list when imported, so pytest's in-process path cannot emulate 2 devices; the
    cell skips with the `adcompare run` that can (it failed with the worker's refusal before)."""
    from adcompare.model.cell import Cell
    from adcompare.run.benchmark_cell import benchmark_cell

    class Recorder:
        group, extra_info = None, {}

        def __call__(self, function):
            raise AssertionError("a skipped cell must not be timed")

    cell = Cell("mlp_loss", "B16-h16", "pmap_grad", "jax", "eager", "cpu", "float32", devices=2)
    with pytest.raises(pytest.skip.Exception, match=r"adcompare run --devices 2"):
        benchmark_cell(cell, Recorder())


def test_in_process_paths_release_the_prepared_cell(monkeypatch):
    """pytest-benchmark's cell and the conformance suite's case run in a process that goes on to other cells, so
    both close the prepared cell as `adcompare run`'s worker does (torch.compile's recompile stance, torch's gloo
    helpers): a passing cell and a mismatching one alike."""
    import dataclasses

    from adcompare.model.cell import Cell
    from adcompare.plugin import registry as plugins
    from adcompare.run.benchmark_cell import benchmark_cell
    from adcompare.testing import Case, run_case

    pytest.importorskip("autograd")
    adapter = plugins.load().adapter("autograd")
    closed: list[str] = []
    prepare = type(adapter).prepare
    monkeypatch.setattr(type(adapter), "prepare", lambda self, request: dataclasses.replace(
        prepare(self, request), close=lambda: closed.append(request.operator)))

    class Recorder:
        group, extra_info = None, {}

        def __call__(self, function):
            function()

    benchmark_cell(Cell("f_r2_r3", "n2", "jacrev", "autograd", "eager", "cpu", "float64"), Recorder())
    assert closed == ["jacrev"]
    outcome = run_case(adapter, plugins.load().problem("f_r2_r3"), Case("f_r2_r3", "n2", "jacfwd", "eager"), "float64")
    assert outcome.status is Status.OK and closed == ["jacrev", "jacfwd"]
