"""Where and how a run happened: versions, CPU/GPU, thread policy, commit, date. Written in the results header.

`Provenance` is the header's typed value: made once (`collect`), written by the results writer (`to_json`), read
back by `load` (`from_json`, which also reads schema-1 headers and pytest-benchmark's machine info), and read by
attribute everywhere else. Keys a newer adcompare writes, or another producer's, are kept in `extra` for the
report's machine table and for round trips. A `run --resume` appends its own `Resumption` (a "resume" record):
a file written in chunks names each chunk's commit and date, not only the first one's.
"""
from __future__ import annotations

import datetime
import importlib.util
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from adcompare import __version__
from adcompare.model.fingerprint import Machine

# What points git at another repository, work tree or index (`git rev-parse --local-env-vars`, less the configuration
# ones: CI may set safe.directory through GIT_CONFIG_COUNT). A git hook that runs adcompare sets GIT_DIR and
# GIT_INDEX_FILE to its own repository's.
REPOSITORY_VARIABLES = frozenset({
    "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_PREFIX", "GIT_GRAFT_FILE", "GIT_SHALLOW_FILE",
    "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_INTERNAL_SUPER_PREFIX"})


def _git(folder: Path, *args: str) -> str | None:
    """A git command's output in `folder`, or None where git or the checkout is missing. Never the repository that
    a git hook's variables name (REPOSITORY_VARIABLES), and no optional locks (`git status` would otherwise take
    index.lock while the user commits in the same checkout)."""
    env = {key: value for key, value in os.environ.items() if key not in REPOSITORY_VARIABLES}
    try:
        out = subprocess.run(["git", "--no-optional-locks", "-C", str(folder), *args], capture_output=True,
                             text=True, timeout=5, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def tree_commit(checkout: Path, discovered: Path | None = None) -> str | None:
    """The short commit of a git checkout, marked "+dirty" where tracked files differ from it (git describe's
    --dirty) or an untracked module lies in `discovered` (the problems folder, which imports every module it
    holds), "+unknown" where git could not say, or None where `checkout` is no git checkout."""
    commit = _git(checkout, "rev-parse", "--short", "HEAD")
    if not commit:
        return None
    changed = _git(checkout, "status", "--porcelain", "--untracked-files=no")
    untracked = _git(discovered, "ls-files", "-z", "--others", "--exclude-standard") if discovered else ""
    if changed is None or untracked is None:
        return f"{commit}+unknown"
    modules = [name for name in untracked.split("\0") if name.endswith(".py")]
    return f"{commit}+dirty" if changed or modules else commit


# The packages an editable install maps to the checkout it was made in (pyproject's package_dir), past PYTHONPATH:
# another checkout's `adcompare` on PYTHONPATH still imports these from the installed one.
MAPPED_PACKAGES = ("adcompare.problems", "adcompare.adapters")
DISCOVERING = "adcompare.problems"  # the one that imports every module in its folder


@dataclass(frozen=True)
class PackageSource:
    """Where a package is imported from: its folder, and the git checkout that tracks it (None: none does)."""

    folder: Path
    checkout: Path | None


def describe_code(package: Path, checkout: Path | None, mapped: Mapping[str, PackageSource | None]) -> str | None:
    """The code a run imports, for the header's git_commit: the commit of adcompare's checkout (`checkout`, the one
    tracking its `package` folder; tree_commit), then each mapped package imported from elsewhere — another
    checkout, with its commit, or a folder no checkout tracks that is not beside or inside `package` (an installed
    release has them inside). None where adcompare is in no checkout and nothing comes from elsewhere."""
    def discovered(tree: Path | None) -> Path | None:
        source = mapped.get(DISCOVERING)
        return source.folder if source is not None and source.checkout == tree else None

    elsewhere: dict[str, list[str]] = {}
    for name, source in mapped.items():
        if source is None:
            continue
        if source.checkout is not None and source.checkout != checkout:
            where = f"{source.checkout} at {tree_commit(source.checkout, discovered(source.checkout))}"
        elif source.checkout is None and source.folder.parent not in (package, package.parent):
            where = f"{source.folder} (not a git checkout)"
        else:
            continue
        elsewhere.setdefault(where, []).append(name)
    commit = tree_commit(checkout, discovered(checkout)) if checkout else None
    if commit is None and not elsewhere:
        return None
    return "; ".join([commit or "no commit",
                      *(f"{' and '.join(names)} from {where}" for where, names in elsewhere.items())])


def _checkout_of(folder: Path) -> Path | None:
    """The git checkout that tracks files in `folder`: not one it merely lies in (a virtual environment inside a
    checkout, its adcompare installed from a wheel, is no part of it)."""
    top = _git(folder, "rev-parse", "--show-toplevel")
    if not top or not _git(folder, "ls-files", "--", "."):
        return None
    return Path(top).resolve()


def git_commit() -> str | None:
    """The commit of the adcompare source tree when it is a git checkout ("+dirty" where it changed), and where
    the problems and adapters come from when that is another checkout or folder (describe_code)."""
    package = Path(__file__).resolve().parent.parent  # adcompare/
    mapped: dict[str, PackageSource | None] = {}
    for name in MAPPED_PACKAGES:
        spec = importlib.util.find_spec(name)  # where it would be imported from, without importing it
        folders = list(spec.submodule_search_locations or []) if spec else []
        folder = Path(folders[0]).resolve() if folders else None
        mapped[name] = PackageSource(folder, _checkout_of(folder)) if folder else None
    return describe_code(package, _checkout_of(package), mapped)


@dataclass(frozen=True)
class EnvironmentRecord:
    """One `run --env` environment as the header names it: its requirements, interpreter, where it lives, what it
    had installed, and the fingerprint its cells carry."""

    requirements: tuple[str, ...] = ()
    python: str = ""
    path: str = ""
    installed: Mapping[str, str] = field(default_factory=dict)
    machine: Machine | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"python": self.python, "requirements": list(self.requirements), "path": self.path,
                               "installed": dict(self.installed)}
        return {**out, "machine": self.machine.to_json()} if self.machine else out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EnvironmentRecord:
        machine = data.get("machine")
        return cls(requirements=tuple(data.get("requirements") or ()), python=str(data.get("python") or ""),
                   path=str(data.get("path") or ""), installed=dict(data.get("installed") or {}),
                   machine=Machine.from_json(machine) if isinstance(machine, Mapping) else None)


@dataclass(frozen=True)
class Provenance:
    """A results file's header: the machine every record of its run carries, and how the run was made."""

    adcompare: str = ""
    git_commit: str | None = None
    date: str = ""
    host: str = ""
    platform: str = ""
    python: str = ""
    numpy: str = ""
    cpu: str = ""
    gpu: str = ""
    machine: Machine = field(default_factory=lambda: Machine(host="", cpu=""))
    cpu_count: int | None = None
    threads: int | None = None
    thread_policy: str = ""
    timing_policy: str = ""  # TimingPolicy.describe() of the run's cells ("" in files written before it)
    source: str = ""  # a producer other than `adcompare run` (pytest-benchmark's JSON)
    environments: Mapping[str, EnvironmentRecord] = field(default_factory=dict)  # run --env, in the order named
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys this adcompare does not know

    def to_json(self) -> dict[str, Any]:
        """The header's "provenance", keys in the order adcompare has always written them; an absent `source`,
        `environments` or extra key is left out, as before."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "machine":
                out["machine"] = value.to_json()
            elif f.name == "environments":
                if value:
                    out["environments"] = {name: env.to_json() for name, env in value.items()}
            elif f.name == "extra":
                out.update(value)
            elif f.name not in ("source", "timing_policy") or value:
                out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], workers: Iterable[Mapping[str, Any]] = ()) -> Provenance:
        """A header's provenance; a schema-1 header has no machine, rebuilt from its host, CPU and GPU and the
        framework versions its workers loaded (`workers`)."""
        known = {f.name for f in fields(cls)}
        if isinstance(data.get("machine"), Mapping):
            machine = Machine.from_json(data["machine"])
        else:
            versions = {k: v for w in workers for k, v in (w.get("versions") or {}).items()}
            machine = Machine.from_json({**data, "frameworks": versions})
        count, threads = data.get("cpu_count"), data.get("threads")
        return cls(
            machine=machine, adcompare=str(data.get("adcompare") or ""), git_commit=data.get("git_commit"),
            date=str(data.get("date") or ""), host=str(data.get("host") or ""),
            platform=str(data.get("platform") or ""), python=str(data.get("python") or ""),
            numpy=str(data.get("numpy") or ""), cpu=str(data.get("cpu") or ""), gpu=str(data.get("gpu") or ""),
            cpu_count=int(count) if isinstance(count, (int, float)) else None,
            threads=int(threads) if isinstance(threads, (int, float)) else None,
            thread_policy=str(data.get("thread_policy") or ""),
            timing_policy=str(data.get("timing_policy") or ""), source=str(data.get("source") or ""),
            environments={str(name): EnvironmentRecord.from_json(env)
                          for name, env in (data.get("environments") or {}).items() if isinstance(env, Mapping)},
            extra={k: v for k, v in data.items() if k not in known})


@dataclass(frozen=True)
class Resumption:
    """A `run --resume` that appended to a results file: when, by which adcompare and commit, on which machine
    (fingerprint). The header names the run that started the file; each resumption, a later chunk's code."""

    date: str
    adcompare: str
    git_commit: str | None
    machine: str
    source: str = ""  # the file it was read from (not written)

    @classmethod
    def of(cls, provenance: Provenance) -> Resumption:
        return cls(provenance.date, provenance.adcompare, provenance.git_commit, provenance.machine.id)

    def to_json(self) -> dict[str, Any]:
        return {"date": self.date, "adcompare": self.adcompare, "git_commit": self.git_commit,
                "machine": self.machine}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "") -> Resumption:
        commit = data.get("git_commit")
        return cls(str(data.get("date") or ""), str(data.get("adcompare") or ""),
                   str(commit) if commit else None, str(data.get("machine") or ""), source)

    def describe(self) -> str:
        return f"{self.date} on commit {self.git_commit or 'unknown'} (adcompare {self.adcompare})"


def collect(threads: int, machine: Machine, timing_policy: str = "") -> Provenance:
    """The results header's provenance; `machine` is the fingerprint every record of this run carries,
    `timing_policy` how its cells are timed (TimingPolicy.describe)."""
    return Provenance(
        machine=machine,
        adcompare=__version__,
        git_commit=git_commit(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        host=machine.host,
        platform=platform.platform(),
        python=sys.version.split()[0],
        numpy=np.__version__,
        cpu=machine.cpu,
        gpu=machine.gpu,
        cpu_count=os.cpu_count(),
        threads=threads,
        thread_policy=f"{threads} thread(s) per framework: OMP/MKL/OpenBLAS env vars at worker start, "
                      f"plus each framework's own setting",
        timing_policy=timing_policy,
    )
