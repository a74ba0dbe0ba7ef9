"""A real third-party path: the complete example from docs/adapters.md, packaged by tests/fixtures/thirdparty,
installed into a temporary virtual environment through its entry point only, then listed, conformance-checked and
run into a results file. A broken plugin installed beside it is reported by `adcompare list`, and the rest works.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from adcompare.results import load
from adcompare.status import Status

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "adapters.md"
FIXTURES = Path(__file__).parent / "fixtures"


def guide_example(filename: str) -> str:
    """The fenced Python block that follows `<!-- example: filename -->` in the guide."""
    match = re.search(rf"<!-- example: {re.escape(filename)} -->\s*```python\n(.*?)```", GUIDE.read_text(), re.S)
    assert match, f"docs/adapters.md has no example block for {filename}"
    return match.group(1)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A venv seeing this environment's packages (adcompare, numpy, pytest), plus the two fixture distributions."""
    root = tmp_path_factory.mktemp("thirdparty")
    package = root / "numpy_fd"
    shutil.copytree(FIXTURES / "thirdparty", package)
    (package / "adcompare_numpy_fd.py").write_text(guide_example("adcompare_numpy_fd.py"))
    broken = root / "broken"
    shutil.copytree(FIXTURES / "broken_plugin", broken)
    venv.create(root / "venv", system_site_packages=True, with_pip=True)
    python = str(root / "venv" / "bin" / "python")
    for dist in (package, broken):
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                        str(dist)], check=True, capture_output=True, cwd=root)
    return python, root


def test_example_is_short():
    assert len(guide_example("adcompare_numpy_fd.py").splitlines()) < 100


def test_listed_with_version_and_support_and_broken_plugin_reported(env):
    python, root = env
    done = subprocess.run([python, "-m", "adcompare", "list", "--json"], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr
    inventory = json.loads(done.stdout)
    fd = next(a for a in inventory["adapters"] if a["name"] == "numpy-fd")
    assert fd["installed"] and fd["version"] == "0.1.0"
    assert fd["support"]["eager"]["jacrev"]["support"] == "emulated"
    assert "no compiler" in fd["support"]["compiled"]["grad"]["reason"]
    broken = {b["name"]: b["reason"] for b in inventory["broken_plugins"]}
    assert broken["broken-fixture"].startswith("import failed: ModuleNotFoundError")
    assert {"jax", "torch", "numpy-fd"} <= {a["name"] for a in inventory["adapters"]}
    table = subprocess.run([python, "-m", "adcompare", "list"], capture_output=True, text=True, cwd=root)
    assert table.returncode == 0 and "broken-fixture" in table.stdout and "is broken" in table.stderr


def test_guide_example_passes_the_conformance_suite(env):
    python, root = env
    test_file = root / "test_numpy_fd.py"
    test_file.write_text(guide_example("test_numpy_fd.py"))
    done = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
                          capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout)


def test_shows_up_in_a_results_file(env):
    python, root = env
    out = root / "fd.jsonl"
    done = subprocess.run([python, "-m", "adcompare", "run", "--adapter", "numpy-fd", "--problem", "exp_dot_loss",
                           "--size", "n10", "--no-progress", "-o", str(out)], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    cells = load([out]).measurements
    ran = {m.cell.operator: m for m in cells if m.status is Status.OK}
    assert {"value", "grad", "jvp", "vjp", "jacfwd", "jacrev"} <= set(ran)
    assert ran["jacrev"].support == "emulated" and ran["jacrev"].timing.median > 0
    assert all(m.cell.adapter == "numpy-fd" for m in cells)
