"""`--inputs` reads GradBench's own input files for lse, llsq, det and ode (issue 41), plain JSON or gzipped, and
every GradBench JSON reader reads a gzipped file as it reads the plain one.

tests/fixtures/gradbench/inputs holds inputs captured from GradBench's eval scripts (its README says how); the
arrays read from them are held bit for bit to adcompare's generated inputs at the same size, which replay GradBench's
draws (tests/test_gradbench.py holds those to GradBench's sha256) — two independent routes to the same numbers.
"""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from adcompare.cli.main import main
from adcompare.plugin import registry as plugins
from adcompare.verify.input_sources import with_inputs

from .conftest import FIXTURES

INPUTS = FIXTURES / "gradbench" / "inputs"
# file → (the problem that reads it, its size as read, the generated size with the same draw)
FILES = {
    "lse_n2500.json.gz": ("lse", {"n": 2500}, "n2500"),
    "llsq_n16_m128.json": ("llsq", {"n": 16, "m": 128}, "n16-m128"),
    "det_ell5.json": ("det", {"ell": 5}, "ell5"),
    "ode_n1000_s1.json.gz": ("ode", {"n": 1000, "s": 1}, "n1000-s1"),
}


@pytest.mark.parametrize("name", FILES)
def test_gradbench_input_is_read_by_its_problem_alone_as_generated(name):
    problem_name, dims, label = FILES[name]
    path = str(INPUTS / name)
    registry = with_inputs(plugins.load(), [path])
    readers = [n for n, p in registry.problems.items() if any(s.source == path for s in p.sizes)]
    assert readers == [problem_name]
    problem = registry.problem(problem_name)
    (size,) = problem.sizes
    assert size.as_dict() == dims
    read = problem.inputs(size, "float64")
    generated = plugins.load().problem(problem_name)
    expected = generated.inputs(generated.size(label), "float64")
    assert read.keys() == expected.keys()
    for key in read:
        assert np.array_equal(read[key], expected[key]), key


@pytest.mark.parametrize("name", ["kmeans", "saddle"])
def test_a_gzipped_gradbench_input_reads_as_the_plain_one(tmp_path, name):
    data = {"kmeans": {"points": [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]], "centroids": [[2.0, 3.0], [4.0, 5.0]]},
            "saddle": {"start": [1.0, 1.0]}}[name]
    plain, zipped = tmp_path / f"{name}.json", tmp_path / f"{name}.json.gz"
    plain.write_text(json.dumps(data))
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    registry = plugins.load()
    problem = registry.problem(name)
    sizes = [next(iter(with_inputs(registry, [str(p)]).problem(name).sizes)) for p in (plain, zipped)]
    assert sizes[0].as_dict() == sizes[1].as_dict()
    a, b = (problem.inputs(s, "float64") for s in sizes)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_a_file_of_another_eval_is_refused_in_one_line_naming_each_reader(tmp_path, capsys):
    """lse's reader takes x alone: ode's input (x and s) is not lse's, and a JSON object no eval sends is refused."""
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"x": [1.0, 2.0], "y": 3}))
    code = main(["run", "--problem", "lse", "--inputs", str(path), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2
    assert "no problem reads this file" in err and "not GradBench's lse input" in err
    assert "not GradBench's ode input" in err and "Traceback" not in err
