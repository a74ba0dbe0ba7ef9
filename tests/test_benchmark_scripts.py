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
