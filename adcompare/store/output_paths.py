"""Where results files go, and the rule that no run destroys results it did not create.

With no `-o`, every run writes a new timestamped file under `results/` (as pytest-benchmark's autosave and asv's
results folders do) and says where; an explicit `-o` that exists is refused unless `--resume` (append the missing
cells) or `--overwrite` (replace it) is given. The lock that keeps two runs from writing one file at once lives in
results.ResultsWriter.
"""
from __future__ import annotations

import datetime
import os
from pathlib import Path

from adcompare.model.errors import UsageError

RESULTS_DIR = Path("results")


def new_results_path(folder: Path = RESULTS_DIR, now: datetime.datetime | None = None) -> Path:
    """results/<YYYYmmdd-HHMMSS>.jsonl, created empty on the spot (exclusively), with -2, -3, … on a collision."""
    stamp = (now or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
    ensure_folder(folder)
    for n in range(1, 1000):
        path = folder / (f"{stamp}.jsonl" if n == 1 else f"{stamp}-{n}.jsonl")
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return path
        except FileExistsError:
            continue
        except OSError as exc:
            raise UsageError(f"cannot create a results file in {str(folder)!r}: {exc.strerror}; pass -o PATH") from exc
    raise UsageError(f"{str(folder)!r} has 999 results files stamped {stamp}; pass -o PATH")


def latest_results(folder: Path = RESULTS_DIR) -> Path:
    """The newest results file that `adcompare run` wrote with no -o."""
    found = sorted(folder.glob("*.jsonl"), key=lambda p: (p.stat().st_mtime, p.name)) if folder.is_dir() else []
    found = [p for p in found if p.stat().st_size > 0]
    if not found:
        raise UsageError(f"no results file in {str(folder)!r} for --latest; run `adcompare run` first or name files")
    return found[-1]


def ensure_folder(folder: Path) -> None:
    """Create a missing folder (and parents); one line naming it when that is not possible."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create folder {str(folder)!r}: {exc.strerror}; choose another path") from exc
    if not os.access(folder, os.W_OK):
        raise UsageError(f"folder {str(folder)!r} is not writable; choose another path")


def refuse_existing(path: Path, *, resume: bool, overwrite: bool) -> None:
    if path.exists() and not (resume or overwrite):
        raise UsageError(f"results file {str(path)!r} already exists; add --resume to run only its missing cells, "
                         f"--overwrite to replace it, or choose another -o")
