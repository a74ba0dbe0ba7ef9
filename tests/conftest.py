"""Shared test fixtures. Frameworks run in worker processes (as in real runs), shared across the session."""
from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
FAULTS = str(FIXTURES / "plugins" / "faults.py")


@pytest.fixture(scope="session")
def registry():
    from adcompare import plugins

    return plugins.load()


@pytest.fixture(scope="session")
def fault_registry():
    from adcompare import plugins

    return plugins.load((FAULTS,))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`slow` tests (a compiler unrolling ADBench's 1,023-step LSTM, float64 twins of eager TensorFlow cells) run
    only when asked for with `-m slow` (or any -m expression): the README's test command stays within CI's time."""
    if config.getoption("-m"):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)
