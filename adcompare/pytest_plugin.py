"""pytest11 plugin: the adcompare matrix as pytest-benchmark benchmarks. Adds nothing to a run unless a test module
imports `test_adcompare_cell` (as benchmarks/test_matrix.py does, and as a user's project does in one line):

    # benchmarks/test_adcompare.py in your project
    from adcompare.pytest_plugin import test_adcompare_cell  # noqa: F401

    # pyproject.toml: your problems or adapters, loaded as `--plugin` loads them; a plain `pytest` skips benchmarks
    [tool.pytest.ini_options]
    adcompare_plugins = ["my_problems.py"]
    addopts = "--benchmark-skip"

`pytest --benchmark-only` then benchmarks the quick matrix (narrow it with --adcompare-*), every cell's first call
checked (shape, NaN, float64 reference: adcompare.run.in_process.first_call, as `adcompare run` checks it) before
it is timed. Known framework limitations (adcompare.verify.expectations) are strict
xfails with their reason — a listed cell that starts passing fails — and those known to kill the process are
skipped, since this path runs in-process: one crashing cell would end the pytest session, and JAX's x64 switch is
flipped per cell. `adcompare run` is the isolated path (one worker process per framework, dtype and device).
Each benchmark's `extra_info` carries the cell key, check status, compile and first-call times; `adcompare report`
refuses pytest-benchmark records without them.
"""
from __future__ import annotations

import pytest

from adcompare.study.suites import SUITE_SUMMARIES, SUITES

PLUGINS_INI = "adcompare_plugins"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("adcompare", "adcompare benchmark matrix")
    for name, help_text in (("adapters", "adapters"), ("problems", "problems"), ("operators", "operators"),
                            ("variants", "variants"), ("dtypes", "dtypes"), ("sizes", "size labels")):
        group.addoption(f"--adcompare-{name}", default="", metavar="A,B",
                        help=f"comma-separated {help_text} for the benchmark matrix (default: all)")
    group.addoption("--adcompare-suite", default="quick", choices=SUITES,
                    help="which suite the benchmark matrix covers (default: quick): "
                         + "; ".join(f"{name}: {text}" for name, text in SUITE_SUMMARIES.items()))
    group.addoption("--adcompare-plugin", action="append", default=[], metavar="PATH_OR_MODULE",
                    help=f"load problems or adapters from a file or module (repeatable; adds to the "
                         f"'{PLUGINS_INI}' ini option)")
    parser.addini(PLUGINS_INI, type="linelist", default=[],
                  help="files or modules with problems or adapters for the benchmark matrix (as --plugin)")


def plugin_specs(config: pytest.Config) -> tuple[str, ...]:
    """Ini paths are relative to the ini file's folder, as pytest's own paths are."""
    root = config.inipath.parent if config.inipath else config.rootpath
    ini = tuple(str(root / s) if s.endswith(".py") and not s.startswith("/") else s for s in config.getini(PLUGINS_INI))
    return ini + tuple(config.getoption("--adcompare-plugin"))


def _selection(config: pytest.Config):
    from adcompare.study.plan import Selection

    def opt(name: str) -> tuple[str, ...]:
        return tuple(v for v in config.getoption(f"--adcompare-{name}").split(",") if v)

    return Selection(problems=opt("problems"), sizes=opt("sizes"), operators=opt("operators"),
                     adapters=opt("adapters"), variants=opt("variants"), dtypes=opt("dtypes"),
                     devices=("cpu",), suite=config.getoption("--adcompare-suite"))


def _param(cell, registry):
    """A cell, marked when it is a known limitation: crashes are skipped (in-process), failures strict xfails."""
    from adcompare.model.status import Status
    from adcompare.verify.expectations import expected

    known = expected(cell, registry.problems[cell.problem].compilable)
    if known is None:
        return pytest.param(cell, id=cell.id)
    status, reason = known
    if status is Status.CRASHED:
        return pytest.param(cell, id=cell.id, marks=pytest.mark.skip(
            reason=f"known to crash the process ({reason}); `adcompare run` records it in a worker"))
    return pytest.param(cell, id=cell.id, marks=pytest.mark.xfail(strict=True, reason=f"known limitation: {reason}"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "adcompare_cell" not in metafunc.fixturenames:
        return
    from adcompare.plugin import registry as plugins
    from adcompare.study.plan import plan as make_plan

    registry = plugins.load(plugin_specs(metafunc.config))
    plan = make_plan(registry, _selection(metafunc.config))
    metafunc.parametrize("adcompare_cell", [_param(c, registry) for c in plan.cells])


@pytest.fixture
def adcompare_measure(request: pytest.FixtureRequest):
    """Benchmark one cell in-process: prepare, check, then pytest-benchmark times `run(); sync()`."""
    from adcompare.run.benchmark_cell import benchmark_cell

    specs = plugin_specs(request.config)
    return lambda cell, benchmark: benchmark_cell(cell, benchmark, specs)


def test_adcompare_cell(adcompare_cell, adcompare_measure, benchmark):
    """One cell of the matrix; import this name into a test module to benchmark the matrix there."""
    adcompare_measure(adcompare_cell, benchmark)
