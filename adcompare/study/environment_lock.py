"""One lock per cached environment, so that no run measures code another run installed.

The cache under `$XDG_CACHE_HOME/adcompare/envs/` is shared by every adcompare run on the machine (two CI jobs on
one runner, two SLURM shards on one node, two checkouts of one developer), and its key leaves out adcompare's own
source, which each run reinstalls into the environment when it differs. The lock is the file `<key>.lock` beside
the environment's directory, held with flock(2):

- a run holds it SHARED from the moment it has checked the environment until the run ends, since its workers start
  from the environment's interpreter throughout the run; any number of runs share it;
- building the environment or reinstalling adcompare into it needs it EXCLUSIVE, so it waits until no run uses it.

A lock is never converted in place: two runs that both hold it shared and both ask for exclusive would wait on each
other where conversion is atomic, and where it is not (Linux) another run may slip in between. So `shared` and
`exclusive` first release whatever this holder holds, and the caller checks the environment again once granted.

flock locks belong to the open file: the kernel releases them when the holder's process ends, however it ends, so
a killed run never leaves an environment locked. The file is opened non-inheritable (Python's default), so workers
do not hold it. The lock file is never deleted (deleting it would let two runs lock two different files).

On a platform without `fcntl` (Windows) the lock does nothing: runs that share an environment there must not
overlap a build or a reinstall.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

try:
    import fcntl
except ImportError:  # Windows: no flock; see the module docstring
    fcntl = None  # type: ignore[assignment]


def lock_path(environment: Path) -> Path:
    """The lock file of the environment at `environment`: `<key>.lock` beside it."""
    return environment.with_name(environment.name + ".lock")


class EnvironmentLock:
    """The lock of one environment, held by this process in one mode at a time (a context manager: leaving it
    releases the lock and closes the file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.mode = ""  # "", "shared" or "exclusive": what this holder holds now
        self._fd: int | None = None

    def shared(self, waiting: Callable[[], None] = lambda: None) -> None:
        """Hold the lock shared, first releasing what this holder holds; `waiting()` is called once, before
        blocking, when a build or reinstall by another run holds it."""
        self._hold("shared", waiting)

    def exclusive(self, waiting: Callable[[], None] = lambda: None) -> None:
        """Hold the lock alone, first releasing what this holder holds; `waiting()` is called once, before
        blocking, when another run holds it."""
        self._hold("exclusive", waiting)

    def _hold(self, mode: str, waiting: Callable[[], None]) -> None:
        self.release()
        if fcntl is None:
            self.mode = mode
            return
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        operation = fcntl.LOCK_SH if mode == "shared" else fcntl.LOCK_EX
        try:
            fcntl.flock(self._fd, operation | fcntl.LOCK_NB)
        except BlockingIOError:
            waiting()
            fcntl.flock(self._fd, operation)  # no timeout: the user's Ctrl-C interrupts it (KeyboardInterrupt)
        self.mode = mode

    def release(self) -> None:
        if self.mode and self._fd is not None and fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self.mode = ""

    def close(self) -> None:
        """Release the lock and close its file."""
        self.release()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> EnvironmentLock:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
