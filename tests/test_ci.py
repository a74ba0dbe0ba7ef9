"""CI runs the README's test command, extracted from the README, in a fresh venv: the two cannot drift."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readmes_test_command_in_a_fresh_venv():
    command = subprocess.run([sys.executable, str(ROOT / ".ci" / "readme_command.py")], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert command.startswith("pip install") and "pytest" in command
    assert command.index("ruff check .") < command.index("mypy") < command.index("pytest")  # checks before tests
    assert f"```bash\n{command}\n```" in (ROOT / "README.md").read_text()
    script = (ROOT / ".ci" / "run").read_text()
    assert "python3 .ci/readme_command.py" in script and "python3 -m venv" in script and 'eval "$command"' in script
