"""GradBench's inputs as JSON files (the `input` of its evaluate messages, one object a file): how the problems that
read them (ba, gmm_posterior, kmeans, lstm, ht, saddle, particle) tell one from upstream text and open it, so that
every reader refuses a file in the same one line, `PATH: not WHAT`, which `--inputs` shows per problem."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def is_json(path: str | Path) -> bool:
    """Whether `path` holds JSON rather than ADBench's text: its first non-blank character opens an object (the
    text formats start with numbers)."""
    with open(path, encoding="utf-8") as f:
        return f.read(64).lstrip().startswith("{")


def read_json_object(path: str | Path, what: str, keys: Iterable[str] = (),
                     valid: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any]:
    """The JSON object in `path`, holding `keys` and passing `valid`; otherwise ValueError `PATH: not WHAT`, where
    `what` names the input and what it holds (e.g. "GradBench's kmeans input (a JSON object with points and
    centroids, lists of rows)"), followed by the parser's reason for an object that is not valid JSON. A file that
    does not start as an object is refused unread (upstream text files run to gigabytes)."""
    if not is_json(path):
        raise ValueError(f"{path}: not {what}")
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not {what}; invalid JSON ({exc})") from None
    if not isinstance(data, dict) or not set(keys) <= set(data) or valid is not None and not valid(data):
        raise ValueError(f"{path}: not {what}")
    return data
