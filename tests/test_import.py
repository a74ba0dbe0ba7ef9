"""Importing adcompare (and listing) must import no AD framework: they load only inside workers."""
import json
import subprocess
import sys

FRAMEWORKS = ("jax", "torch", "tensorflow", "autograd")


def test_import_adcompare_imports_no_framework():
    code = ("import sys, adcompare, adcompare.cli.main, adcompare.run.runner, adcompare.plugin.registry as p; p.load(); "
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
