"""Environments (`run --env`): parsing, planning, cell identity, and two real environments (autograd 1.8.0 and
1.9.1) built with venv + pip, run, reported and compared end to end."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from adcompare.cli.main import main
from adcompare.model.cell import CURRENT, Cell
from adcompare.model.errors import EnvironmentSetupError
from adcompare.store.results import load
from adcompare.study import environment_specs, environments
from adcompare.study.environment_specs import EnvironmentSpec
from adcompare.study.plan import Selection
from adcompare.study.plan import plan as make_plan

OLD, NEW = "1.8.0", "1.9.1"  # numpy >= 2 needs autograd >= 1.7
SELECT = ["--adapter", "autograd", "--problem", "exp_dot_loss", "--size", "n10", "--operator", "grad,vjp,jvp",
          "--variant", "eager", "--dtype", "float64", "--no-progress"]
ENVS = ["--env", f"old=autograd=={OLD}", "--env", f"new=autograd=={NEW}"]


def test_env_option_parsing():
    spec = EnvironmentSpec.parse('old=jax==0.9.2 "jaxlib==0.9.2"')
    assert spec == EnvironmentSpec("old", ("jax==0.9.2", "jaxlib==0.9.2"))
    assert spec.pinned == {"jax", "jaxlib"}
    assert EnvironmentSpec.parse("current") == EnvironmentSpec(CURRENT)
    assert EnvironmentSpec.parse("x=Array_API.compat>=1.9 torch[cpu]").pinned == {"array-api-compat", "torch"}
    for bad, says in (("old", "expected NAME=REQUIREMENTS"), ("old=", "no requirements"),
                      ("current=jax", "'current' is the interpreter"), ("a b=jax", "expected NAME=REQUIREMENTS")):
        with pytest.raises(EnvironmentSetupError, match=says):
            EnvironmentSpec.parse(bad)
    with pytest.raises(EnvironmentSetupError, match="given twice"):
        environment_specs.parse_options(["a=jax", "a=torch"])


def test_cell_identity_is_unchanged_in_the_current_environment():
    cell = Cell("exp_dot_loss", "n10", "grad", "jax", "eager", "cpu", "float32")
    assert cell.environment == CURRENT
    assert cell.key == "exp_dot_loss/n10/grad/jax/eager/cpu/float32"  # keys of results written before --env
    assert "environment" not in cell.to_json() and Cell.from_json(cell.to_json()) == cell
    assert "--environment" not in cell.selector
    old = replace(cell, environment="old")
    assert old.key == cell.key + "@old" and old.id.endswith("-old")
    assert old.selector.endswith("--environment old")
    assert Cell.from_json(old.to_json()) == old and old.across_environments == cell.across_environments


def test_plan_puts_pinned_adapters_in_their_environments(registry):
    sel = Selection(problems=("exp_dot_loss",), sizes=("n10",), operators=("grad",), variants=("eager",),
                    dtypes=("float64",), adapters=("jax", "autograd"))
    plain = make_plan(registry, sel)
    assert all(c.environment == CURRENT for c in plain.cells)
    specs = environment_specs.parse_options(["old=autograd==1.8.0", "new=autograd==1.9.1"])
    spread = make_plan(registry, sel, environments=specs)
    where = sorted((c.adapter, c.environment) for c in spread.cells)
    assert where == [("autograd", "new"), ("autograd", "old"), ("jax", CURRENT)]
    with_current = make_plan(registry, sel, environments=(*specs, EnvironmentSpec(CURRENT)))
    assert ("autograd", CURRENT) in {(c.adapter, c.environment) for c in with_current.cells}
    only_old = make_plan(registry, replace(sel, environments=("old",)), environments=specs)
    assert {c.environment for c in only_old.cells} == {"old"}


@pytest.mark.parametrize("argv, message", [
    (["run", *SELECT, "--env", "old=torch==2.3", "--dry-run"], "--env 'old' pins none of the selected adapters'"),
    (["run", *SELECT, "--environment", "old", "--dry-run"], "--environment 'old' is not defined in this run"),
    (["run", *SELECT, "--env", "old", "--dry-run"], "--env 'old': expected NAME=REQUIREMENTS"),
])
def test_env_usage_errors_exit_2_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in " ".join(err.split()) and "Traceback" not in err


def _index_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


needs_index = pytest.mark.skipif(not _index_reachable(), reason="PyPI is not reachable: environments need pip")


@needs_index
def test_a_requirement_that_cannot_be_installed_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    argv = ["run", *SELECT, "--env", "bad=autograd==0.0.1.dev424242", "-o", str(tmp_path / "r.jsonl")]
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--env 'bad': cannot install autograd==0.0.1.dev424242" in err and "Traceback" not in err
    assert not list((tmp_path / "cache" / "adcompare" / "envs").glob("*/bin/python"))  # no half-built env kept


@pytest.fixture(scope="module")
def release_run(tmp_path_factory):
    """One run over two real environments (built once into the user's cache, then reused)."""
    if not _index_reachable():
        pytest.skip("PyPI is not reachable: environments need pip")
    out = tmp_path_factory.mktemp("releases") / "releases.jsonl"
    assert main(["run", *SELECT, *ENVS, "-o", str(out)]) == 0
    return out


def test_environments_are_built_once_and_isolated(release_run, capsys):
    capsys.readouterr()
    assert main(["run", *SELECT, *ENVS, "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "6 cells: 6 to run" in out and out.count("(cached: ") == 2  # grad, vjp, jvp in each of old and new
    said = []
    env = environments.build(EnvironmentSpec("old", (f"autograd=={OLD}",)), say=said.append)
    assert said == []  # cached by the run: nothing built again
    assert env.installed["autograd"] == OLD and env.installed["adcompare"]
    assert "torch" not in env.installed  # the parent has torch; the environment must not see it
    probe = subprocess.run([env.python, "-c", "import adcompare, autograd; import torch"], capture_output=True,
                           text=True)
    assert "No module named 'torch'" in probe.stderr


def test_an_environment_worker_ignores_the_parents_python_path(release_run, monkeypatch):
    import autograd

    from adcompare.run.worker_handle import WorkerProcess

    parent = str(Path(autograd.__file__).parent.parent)  # this interpreter's site-packages, autograd 1.9.1 in it
    monkeypatch.setenv("PYTHONPATH", parent)
    env = environments.build(EnvironmentSpec("old", (f"autograd=={OLD}",)))
    with WorkerProcess("autograd", "float64", "cpu", 1, interpreter=env.python) as worker:
        info = worker.start()
    assert info.versions["autograd"] == OLD and info.unavailable is None


def test_each_cell_records_its_environment_and_loaded_versions(release_run):
    results = load([release_run])
    ran = [m for m in results.measurements if m.timing is not None]
    assert {m.cell.environment for m in ran} == {"old", "new"}
    assert all(m.status.value == "ok" for m in ran), [m.message for m in ran]
    for m in ran:
        assert m.versions["autograd"] == {"old": OLD, "new": NEW}[m.cell.environment]
        assert m.cell.key.endswith("@" + m.cell.environment)
        assert results.machine(m.machine).frameworks == tuple(sorted(m.versions.items()))
    assert len({m.machine for m in ran}) == 2  # two fingerprints: the framework versions differ
    header = json.loads(release_run.read_text().splitlines()[0])["provenance"]
    assert list(header["environments"]) == ["old", "new"]
    assert header["environments"]["new"]["requirements"] == [f"autograd=={NEW}"]
    workers = {w["environment"]: w["versions"]["autograd"] for w in results.workers}
    assert workers == {"old": OLD, "new": NEW}


def test_compare_pairs_the_releases(release_run, tmp_path, capsys):
    capsys.readouterr()
    assert main(["compare", str(release_run), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert sorted(r["cell"]["operator"] for r in rows) == ["grad", "jvp", "vjp"]
    for r in rows:
        assert (r["baseline_environment"], r["candidate_environment"]) == ("old", "new")
        assert r["baseline_versions"]["autograd"] == OLD and r["candidate_versions"]["autograd"] == NEW
        assert r["low"] <= r["ratio"] <= r["high"] and r["verdict"]
        assert r["values_agree"] is True and "environment" not in r["cell"]
    assert main(["compare", str(release_run), "--baseline-environment", "new", "--json"]) == 0
    flipped = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert {r["baseline_environment"] for r in flipped} == {"new"}
    # A release whose derivative changed: the same records with one candidate's projection moved.
    lines = release_run.read_text().splitlines()
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record.get("record") == "cell" and record["key"].endswith("/grad/autograd/eager/cpu/float64@new"):
            record["check"]["projection"] *= 1.01
            lines[i] = json.dumps(record)
    changed = tmp_path / "changed.jsonl"
    changed.write_text("\n".join(lines) + "\n")
    assert main(["compare", str(changed), "--json"]) == 1
    agree = {r["cell"]["operator"]: r["values_agree"] for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert agree == {"grad": False, "jvp": True, "vjp": True}


def test_report_shows_the_environment_dimension(release_run, tmp_path):
    assert main(["report", str(release_run), "-o", str(tmp_path / "report")]) == 0
    html = (tmp_path / "report" / "index.html").read_text()
    assert "Environments side by side" in html
    assert f"old (autograd {OLD})" in html and f"new (autograd {NEW})" in html
    assert "autograd · eager @old" in html and "autograd · eager @new" in html  # matrix columns, legends
    csv_head = (tmp_path / "report" / "results.csv").read_text().splitlines()[0].split(",")
    assert csv_head[:8] == ["problem", "size", "operator", "adapter", "variant", "device", "dtype", "environment"]
    assert "--environment new" in (tmp_path / "report" / "results.csv").read_text()


def test_one_environment_keeps_the_table_it_had(release_run):
    from adcompare.analysis import cell_rows

    old = [m for m in load([release_run]).measurements if m.cell.environment == "old"]
    assert cell_rows.columns_for(old) == cell_rows.COLUMNS


def test_installer_errors_become_one_line():
    pip = ("WARNING: ignored\nERROR: Could not find a version that satisfies the requirement jax==0.0.1 (from "
           "versions: 0.9.2)\nERROR: No matching distribution found for jax==0.0.1\n")
    uv = ("  × No solution found when resolving dependencies:\n  ╰─▶ Because there is no version of jax==0.0.1 "
          "and you require jax==0.0.1, we can conclude that your requirements are unsatisfiable.\n")
    assert environments._first_error(pip) == ("Could not find a version that satisfies the requirement jax==0.0.1 "
                                              "(from versions: 0.9.2)")
    assert environments._first_error(uv).startswith("No solution found when resolving dependencies: Because there")


@needs_index
@pytest.mark.skipif(environments.Installer.find().uv is None, reason="uv is not on PATH (venv + pip is used)")
def test_uv_builds_an_isolated_environment_without_downloading_python(tmp_path):
    env = environments.build(EnvironmentSpec("old", (f"autograd=={OLD}",)), root=tmp_path)
    assert env.installed["autograd"] == OLD and "torch" not in env.installed
    cfg = (Path(env.path) / "pyvenv.cfg").read_text()
    assert "uv = " in cfg  # built by uv, from this interpreter's Python, not one uv fetched
    assert f"home = {Path(environments._base_interpreter()).parent}" in cfg


def test_installer_commands_ignore_python_files_in_the_temporary_directory(tmp_path, monkeypatch):
    """`python -m pip` and `python -c` import from their working directory first: a stray json.py (or re.py, as
    in the shared /tmp of a CI runner) there must not shadow the environment's modules."""
    (tmp_path / "json.py").write_text("raise SystemExit('the stray json.py was imported')\n")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    env = environments.existing(EnvironmentSpec("base", python=sys.executable))
    assert "numpy" in {k.lower() for k in env.installed}
