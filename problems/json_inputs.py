"""GradBench's inputs as JSON files (the `input` of its evaluate messages, one object a file), plain or compressed
(`.json.gz`, `.json.xz`: told by their magic bytes, not their names): how the problems that read them (ba,
gmm_posterior, kmeans, lstm, ht, saddle, particle, lse, llsq, det, ode) tell one from upstream text and open it,
so that every reader refuses a file in the same one line, `PATH: not WHAT`, which `--inputs` shows per problem."""
from __future__ import annotations

import gzip
import json
import lzma
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

import numpy as np

GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"
RUNS_KEYS = frozenset({"min_runs", "min_seconds"})  # GradBench's `Runs` fields: how to time, not what to compute


def open_text(path: str | Path) -> IO[str]:
    """`path` as UTF-8 text, decompressed on the fly when it starts with gzip's or xz's magic bytes (GradBench's
    inputs are large JSON files, often kept compressed)."""
    with open(path, "rb") as f:
        head = f.read(6)
    if head.startswith(GZIP_MAGIC):
        return gzip.open(path, "rt", encoding="utf-8")
    if head.startswith(XZ_MAGIC):
        return lzma.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def is_json(path: str | Path) -> bool:
    """Whether `path` holds JSON rather than ADBench's text: its first non-blank character opens an object (the
    text formats start with numbers). A compressed file is looked at decompressed; one that fails to decompress
    or decode is not JSON (its reader says what it is not)."""
    try:
        with open_text(path) as f:
            return f.read(64).lstrip().startswith("{")
    except (OSError, EOFError, UnicodeDecodeError, lzma.LZMAError):
        return False


def read_json_object(path: str | Path, what: str, keys: Iterable[str] = (),
                     valid: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any]:
    """The JSON object in `path`, holding `keys` and passing `valid`; otherwise ValueError `PATH: not WHAT`, where
    `what` names the input and what it holds (e.g. "GradBench's kmeans input (a JSON object with points and
    centroids, lists of rows)"), followed by the parser's reason for an object that is not valid JSON. A file that
    does not start as an object is refused unread (upstream text files run to gigabytes)."""
    if not is_json(path):
        raise ValueError(f"{path}: not {what}")
    with open_text(path) as f:
        try:
            data = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError, EOFError, OSError, lzma.LZMAError) as exc:
            raise ValueError(f"{path}: not {what}; invalid JSON ({exc})") from None
    if not isinstance(data, dict) or not set(keys) <= set(data) or valid is not None and not valid(data):
        raise ValueError(f"{path}: not {what}")
    return data


def exact_keys(keys: Iterable[str]) -> Callable[[dict[str, Any]], bool]:
    """A `valid` for `read_json_object`: the object holds `keys` and nothing else but GradBench's `Runs` fields, so
    that evals whose inputs share a name (lse's x, llsq's x and n, ode's x and s) never read each other's file."""
    wanted = frozenset(keys)
    return lambda data: wanted <= set(data) <= wanted | RUNS_KEYS


def numbers_and_count(path: str | Path, eval_name: str, data: dict[str, Any], length: str, count: str = "",
                      least: int = 1) -> tuple[np.ndarray, Any]:
    """GradBench's `x`, a list of ≥ 1 numbers (`length` names its size as the eval does), and where the eval has one,
    the integer `count` ≥ `least` beside it (llsq's n, ode's s): or one line saying what the input needs (lse, llsq
    and ode read their inputs alike)."""
    x = np.asarray(data["x"], dtype=np.float64)
    number = data[count] if count else None
    if x.ndim != 1 or not len(x) or count and (not isinstance(number, int) or number < least):
        needs = f"x, a list of {length} ≥ 1 numbers" + (f", and {count}, an integer ≥ {least}" if count else "")
        found = f"x of shape {x.shape} and {count} = {number!r}" if count else f"shape {x.shape}"
        raise ValueError(f"{path}: GradBench's {eval_name} input needs {needs}; found {found}")
    return x, number
