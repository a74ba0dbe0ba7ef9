"""Importing adcompare (and listing) must import no AD framework: they load only inside workers."""
import json
import subprocess
import sys

FRAMEWORKS = ("jax", "torch", "tensorflow", "autograd")


def test_import_adcompare_imports_no_framework():
    code = ("import sys, adcompare, adcompare.cli.main, adcompare.run.runner, adcompare.plugin.registry as p; "
            "p.load(); "
            f"print([m for m in {FRAMEWORKS!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_list_json_imports_no_framework_and_is_valid():
    code = ("import sys, io, contextlib, json; from adcompare.cli.main import main; buf = io.StringIO();\n"
            "with contextlib.redirect_stdout(buf): rc = main(['list', '--json'])\n"
            f"print(json.dumps({{'rc': rc, 'inv': json.loads(buf.getvalue()), "
            f"'loaded': [m for m in {FRAMEWORKS!r} if m in sys.modules]}}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["rc"] == 0 and data["loaded"] == []
    jax = next(a for a in data["inv"]["adapters"] if a["name"] == "jax")
    assert jax["installed"] and jax["version"]
    assert jax["support"]["compiled"]["hvp"]["algorithm"].startswith("forward-over-reverse")
    assert {"f_r2_r3", "exp_dot_loss", "linear_layer"} <= {p["name"] for p in data["inv"]["problems"]}


# What the lazy imports in cli/, pytest_plugin.py and analysis/significance.py protect: a command line that starts at
# once. Measured here at ~0.2 s for `import adcompare.cli.main` (python -X importtime, quiet 2-core machine); the
# budget is a safety net ten times that, so a busy machine cannot fail it, but an eager framework import (seconds)
# or a heavy optional module pulled in at start-up does.
IMPORT_BUDGET_SECONDS = 2.0
HEAVY = ("scipy.stats", "jinja2", "matplotlib", "submitit", *FRAMEWORKS)


def _import_profile(code: str) -> dict[str, float]:
    """Cumulative seconds per module imported by `code`, from `python -X importtime`."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True)
    found = {}
    for line in out.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            found[parts[2].strip()] = int(parts[1]) / 1e6
    return found


def test_the_command_line_starts_within_its_import_budget_and_loads_nothing_heavy():
    profile = _import_profile("import sys; from adcompare.cli.main import main; main(['--help'])")
    assert "adcompare.cli.main" in profile
    assert profile["adcompare.cli.main"] < IMPORT_BUDGET_SECONDS, profile["adcompare.cli.main"]
    assert [m for m in profile if m.split(".")[0] in HEAVY or m in HEAVY] == []


def test_importing_adcompare_stays_within_the_budget():
    profile = _import_profile("import adcompare")
    assert 0 < profile["adcompare"] < IMPORT_BUDGET_SECONDS
    assert [m for m in profile if m.split(".")[0] in HEAVY or m in HEAVY] == []
