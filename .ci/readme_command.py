"""Print the README's test command: the first line of the fenced block after `<!-- test-command -->`, so .ci/run
runs exactly what a newcomer types and the two cannot drift."""
import re
import sys
from pathlib import Path

text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
match = re.search(r"<!-- test-command -->\s*```\w*\n(.+?)\n```", text, re.S)
if not match or "\n" in match.group(1).strip():
    sys.exit("README.md has no one-line fenced block after <!-- test-command -->")
print(match.group(1).strip())
