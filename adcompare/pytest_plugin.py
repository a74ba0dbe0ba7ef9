"""pytest11 plugin: the adcompare matrix as pytest-benchmark benchmarks. Adds nothing to a run unless a test asks
for the `adcompare_cell` fixture (as benchmarks/test_matrix.py does).

This path runs in-process — convenient, but one crashing cell ends the pytest session and JAX's x64 switch is
flipped per cell. `adcompare run` is the isolated path (one worker process per framework, dtype and device).
Each benchmark's `extra_info` carries the cell key, check status, compile and first-call times; `adcompare report`
refuses pytest-benchmark records without them.
"""
from __future__ import annotations

import pytest

from adcompare.suites import SUITE_SUMMARIES, SUITES


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("adcompare", "adcompare benchmark matrix")
    for name, help_text in (("adapters", "adapters"), ("problems", "problems"), ("operators", "operators"),
                            ("variants", "variants"), ("dtypes", "dtypes"), ("sizes", "size labels")):
        group.addoption(f"--adcompare-{name}", default="", metavar="A,B",
                        help=f"comma-separated {help_text} for the benchmark matrix (default: all)")
    group.addoption("--adcompare-suite", default="quick", choices=SUITES,
                    help="which suite the benchmark matrix covers (default: quick): "
                         + "; ".join(f"{name}: {text}" for name, text in SUITE_SUMMARIES.items()))


def _selection(config: pytest.Config):
    from adcompare.runner import Selection

    def opt(name: str) -> tuple[str, ...]:
        return tuple(v for v in config.getoption(f"--adcompare-{name}").split(",") if v)

    return Selection(problems=opt("problems"), sizes=opt("sizes"), operators=opt("operators"),
                     adapters=opt("adapters"), variants=opt("variants"), dtypes=opt("dtypes"),
                     devices=("cpu",), suite=config.getoption("--adcompare-suite"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "adcompare_cell" not in metafunc.fixturenames:
        return
    from adcompare import plugins, runner

    plan = runner.plan(plugins.load(), _selection(metafunc.config))
    metafunc.parametrize("adcompare_cell", plan.cells, ids=[c.id for c in plan.cells])


@pytest.fixture
def adcompare_measure():
    """Benchmark one cell in-process: prepare, check, then pytest-benchmark times `run(); sync()`."""
    from adcompare.benchmark_cell import benchmark_cell

    return benchmark_cell
