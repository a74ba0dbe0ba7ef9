"""The on-demand scripts in benchmarks/ still name what adcompare offers: they run rarely (no test runs them whole),
so a module moved or a name renamed would otherwise surface only when someone next needs the figures."""
from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))


def adcompare_imports(script: Path) -> list[tuple[str, str]]:
    """(module, name) of every `from adcompare… import name` in the script, at any depth."""
    tree = ast.parse(script.read_text(), str(script))
    return [(node.module, alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "adcompare"
            for alias in node.names]


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 10 and (BENCHMARKS / "gate_ab.py") in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_adcompare_name_a_script_imports_exists(script):
    missing = [f"{module}.{name}" for module, name in adcompare_imports(script)
               if not hasattr(importlib.import_module(module), name)
               and importlib.util.find_spec(f"{module}.{name}") is None]
    assert not missing, f"{script.name} imports names adcompare no longer has: {missing}"


def test_run_to_run_recounts_how_far_two_runs_medians_moved():
    """benchmarks/run_to_run.py on two real runs of the same cells (the compare fixtures), against a recount."""
    import math
    import statistics
    import subprocess
    import sys

    from adcompare.store.results import load

    a, b = (Path(__file__).parent / "fixtures" / "compare" / f"honest_{x}.jsonl" for x in "ab")
    done = subprocess.run([sys.executable, str(BENCHMARKS / "run_to_run.py"), str(a), str(b)],
                          capture_output=True, text=True, check=True)
    ok = [{m.cell.key: m.timing.median for m in load([p]).measurements if m.timing and m.status.value == "ok"}
          for p in (a, b)]
    common = sorted(set(ok[0]) & set(ok[1]))
    moved = statistics.median(abs(math.log(ok[0][k] / ok[1][k])) for k in common)
    assert f"{len(common)} ok cells in all 2 runs" in done.stdout
    assert f"|log ratio| of medians: median {moved:.3f}," in done.stdout


def test_report_wall_splits_the_wall_into_parts_that_add_up_to_it():
    """benchmarks/report_wall.py's split, against a recount of hand-made records: the frameworks' seconds of the
    cells measured ok, their own stages, the workers' start-ups, the cells not measured ok and what is left."""
    from adcompare.model.cell import Cell
    from adcompare.model.measurement import Measurement, Timing
    from adcompare.model.status import Status

    spec = importlib.util.spec_from_file_location("report_wall", BENCHMARKS / "report_wall.py")
    report_wall = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report_wall)

    def cell(size, status=Status.OK, **details):
        c = Cell("exp_dot_loss", size, "grad", "jax", "eager", "cpu", "float64")
        timing = Timing((0.01,) * 5, 1, 0.2, call_seconds=0.5) if status is Status.OK else None
        return Measurement(c, status, timing=timing, machine="m", details={"wall_seconds": 3.0, **details})

    ok = [cell("n10", prepare_seconds=0.3, worker_start_seconds=2.0, release_seconds=0.1,
               overhead_seconds={"reference": 1.2, "check": 0.4}),
          cell("n100", prepare_seconds=0.3, overhead_seconds={"reference": 0.5})]
    split = report_wall.where_it_went([*ok, cell("n1000", Status.UNSUPPORTED, wall_seconds=0.7)], wall=20.0)
    assert split["prepare"] == pytest.approx(0.6) and split["release"] == pytest.approx(0.1)
    assert split["first calls"] == pytest.approx(0.4) and split["timed calls"] == pytest.approx(1.0)
    assert split["cells' own stages"] == pytest.approx(6.0 - 0.6 - 0.4 - 1.0 - 0.1)  # the ok cells' wall less theirs
    assert split["references"] == pytest.approx(1.7) and split["worker start-ups"] == 2.0
    assert split["cells not measured ok"] == pytest.approx(0.7)
    assert split["outside the cells"] == pytest.approx(20.0 - 6.7 - 2.0)
    assert sum(v for k, v in split.items() if k != "references") == pytest.approx(20.0)
