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
