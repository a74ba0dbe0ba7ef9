"""CI runs the README's test command, extracted from the README, in a fresh venv: the two cannot drift. The
scopes that the command starts first exist."""
from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

from .conftest import LONGEST_FIRST

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readmes_test_command_in_a_fresh_venv():
    command = subprocess.run([sys.executable, str(ROOT / ".ci" / "readme_command.py")], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert command.startswith("pip install") and "pytest" in command
    assert command.index("ruff check .") < command.index("mypy") < command.index("pytest")  # checks before tests
    assert f"```bash\n{command}\n```" in (ROOT / "README.md").read_text()
    script = (ROOT / ".ci" / "run").read_text()
    assert "python3 .ci/readme_command.py" in script and "python3 -m venv" in script and 'eval "$command"' in script


def test_every_scope_that_starts_first_exists():
    """tests/conftest.py's LONGEST_FIRST names scopes by path (and class): a renamed module or class would
    silently lose its early start, and the README's command its level ends."""
    missing = []
    for scope in LONGEST_FIRST:
        path, _, cls = scope.partition("::")
        if not (ROOT / path).is_file():
            missing.append(scope)
        elif cls:  # the module is collected anyway: importing it here costs nothing more
            module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
            if not cls.startswith("Test") or not isinstance(getattr(module, cls, None), type):
                missing.append(scope)
    assert missing == []
