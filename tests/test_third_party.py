"""The third-party path, for real: the complete example of docs/adapters.md (the same files as the fixture
distribution tests/fixtures/thirdparty/numpy_fd) is written into a package, pip-installed into a temporary venv
beside a distribution of broken plugins, and then listed, conformance-checked and run into a results file — all
through its entry point, with that venv's python."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from adcompare.model.status import Status
from adcompare.store.results import load

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "adapters.md"
THIRDPARTY = Path(__file__).parent / "fixtures" / "thirdparty"


def guide_example(filename: str) -> str:
    """The fenced block that follows `<!-- example: filename -->` in the guide."""
    match = re.search(rf"<!-- example: {re.escape(filename)} -->\s*```\w+\n(.*?)```", GUIDE.read_text(), re.S)
    assert match, f"docs/adapters.md has no example block marked {filename}"
    return match.group(1)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A venv that sees this environment's packages (adcompare, numpy, pytest, pip) plus the two distributions."""
    root = tmp_path_factory.mktemp("thirdparty")
    package = root / "numpy_fd"
    package.mkdir()
    for name in ("adcompare_numpy_fd.py", "pyproject.toml"):
        (package / name).write_text(guide_example(name))
    # `system_site_packages=True` would show the *base* interpreter's packages when this test itself runs in a
    # venv (the way most people install), without adcompare or the frameworks; so the new venv instead adds
    # every site directory of this interpreter, .pth files (editable installs) included, pip among them.
    venv.create(root / "venv", system_site_packages=False, with_pip=False)
    python = str(root / "venv" / "bin" / "python")
    site_dir = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
    ours = [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages"))]
    Path(site_dir, "adcompare_outer_environment.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in ours) + "\n")
    done = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                           str(package), str(THIRDPARTY / "broken")], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return python, root


def adcompare(env, *args: str) -> subprocess.CompletedProcess:
    python, root = env
    return subprocess.run([python, "-m", "adcompare", *args], capture_output=True, text=True, cwd=root)


def test_the_fixture_distribution_is_the_guides_example():
    for name in ("adcompare_numpy_fd.py", "pyproject.toml"):
        assert (THIRDPARTY / "numpy_fd" / name).read_text() == guide_example(name), f"{name} drifted from the guide"
    assert len(guide_example("adcompare_numpy_fd.py").splitlines()) < 100


def test_listed_with_version_and_support(env):
    done = adcompare(env, "list", "--json")
    assert done.returncode == 0, done.stderr
    inventory = json.loads(done.stdout)
    fd = next(a for a in inventory["adapters"] if a["name"] == "numpy-fd")
    assert fd["installed"] and fd["version"] == "0.1.0" and fd["devices"] == ["cpu"]
    assert fd["support"]["eager"]["grad"] == {"support": "emulated", "reason": "", "algorithm":
                                              "Python loop over input entries, central differences in float64 "
                                              "(step ∛eps·max(1, |x|)), 2 evaluations each"}
    assert "no reverse mode" in fd["support"]["eager"]["jacrev"]["reason"]
    assert "no compiler" in fd["support"]["compiled"]["grad"]["reason"]


def test_broken_plugins_are_listed_with_their_reasons_and_the_rest_works(env):
    done = adcompare(env, "list", "--json")
    assert done.returncode == 0, done.stderr
    inventory = json.loads(done.stdout)
    broken = {b["name"]: b["reason"] for b in inventory["broken_plugins"]}
    assert broken == {
        "broken-import": "import failed: ModuleNotFoundError: No module named "
                         "'adcompare_dependency_that_is_not_installed'",
        "broken-hook": "adcompare_adapters raised RuntimeError: the license server is unreachable",
        "numpy-fd-again": "adapter name 'numpy-fd' is already taken; rename it",
    }
    assert {"jax", "torch", "tensorflow", "autograd", "numpy-fd"} <= {a["name"] for a in inventory["adapters"]}
    assert {"exp_dot_loss", "gmm"} <= {p["name"] for p in inventory["problems"]}
    table = adcompare(env, "list")
    assert table.returncode == 0, table.stderr
    rows = [line for line in table.stdout.splitlines() if "broken" in line]  # rich wraps long cells
    assert all(any(name in row for row in rows) for name in broken) and any("broken: import" in r for r in rows)
    assert "plugin 'broken-hook' is broken and was skipped" in table.stderr


def test_the_guides_example_passes_the_conformance_suite(env):
    python, root = env
    test_file = root / "test_numpy_fd.py"
    test_file.write_text(guide_example("test_numpy_fd.py"))
    done = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           str(test_file)], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", done.stdout).group(1))
    assert passed > 100 and "failed" not in done.stdout


def test_shows_up_in_a_results_file(env):
    out = env[1] / "fd.jsonl"
    done = adcompare(env, "run", "--adapter", "numpy-fd", "--problem", "exp_dot_loss", "--size", "n10",
                     "--no-progress", "-o", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    cells = {(m.cell.operator, m.cell.variant): m for m in load([out]).measurements}
    assert {m.cell.adapter for m in cells.values()} == {"numpy-fd"}
    for op in ("value", "grad", "jvp", "vjp", "jacfwd"):
        m = cells[(op, "eager")]
        assert m.status is Status.OK and m.timing.median > 0, (op, m.status, m.message)
    grad, jacrev = cells[("grad", "eager")], cells[("jacrev", "eager")]
    assert grad.support == "emulated" and "central differences" in grad.algorithm
    assert jacrev.status is Status.UNSUPPORTED and "no reverse mode" in jacrev.message
    assert cells[("hvp", "compiled")].status is Status.UNSUPPORTED


def test_the_guides_report_section_appears_in_the_report(tmp_path):
    from adcompare.report import build

    namespace: dict = {}
    exec(compile(guide_example("report_section.py"), "report_section.py", "exec"), namespace)
    results = load([ROOT / "tests" / "fixtures" / "report" / "cpu.jsonl"])
    sections = namespace["adcompare_report_sections"](results)
    assert sections[0][0] == "Emulated operators" and "<li>tensorflow hessian: Python loop" in sections[0][1]
    html = build(results, tmp_path, extra_sections=sections).read_text()
    assert "Emulated operators" in html and "<li>tensorflow hessian: Python loop" in html
