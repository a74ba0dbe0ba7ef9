"""Environments: one run over several framework releases (`adcompare run --env NAME=REQUIREMENTS`).

An environment is a virtual environment built once from a list of pip requirements and cached under the user's
cache directory (`$XDG_CACHE_HOME/adcompare/envs/<hash>`, default `~/.cache/adcompare/envs/<hash>`), the hash taken
over the requirements, the Python interpreter and adcompare's version. It is isolated from the parent's
site-packages (no `--system-site-packages`), holds adcompare's core dependencies and the same adcompare source the
parent runs (reinstalled, without dependencies, whenever that source changes), and is built with the standard
library's `venv` + pip, or with `uv` when it is on PATH (told never to download an interpreter). The cache is shared
by every adcompare run on the machine: a run holds each environment it uses locked shared for its whole length
(`in_use`), and a build or a reinstall waits until it has the environment alone (environment_lock).

The workers of the adapters whose frameworks an environment pins start from its interpreter; the interpreter
adcompare runs in is the environment `current`, the default for every adapter no `--env` pins (`--env current`
adds it for the pinned ones too, to compare the installed release with others).

`--env NAME=@PYTHON` takes an existing interpreter as it is (nothing built or installed; it must import a
protocol-compatible adcompare, e.g. the base branch's checkout in its own venv) and runs every adapter, like
`current`: the A/B form of the regression gate, `--env base=@../base/.venv/bin/python --env current`.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from adcompare import __version__
from adcompare.model.cell import CURRENT
from adcompare.model.errors import EnvironmentSetupError
from adcompare.model.fingerprint import Machine
from adcompare.model.measurement import Measurement
from adcompare.study.environment_lock import EnvironmentLock, lock_path
from adcompare.study.environment_specs import EnvironmentSpec, normalize

PACKAGE = Path(__file__).resolve().parents[1]  # the adcompare package this process runs (this is adcompare/study/)
MANIFEST = "adcompare-environment.json"
@dataclass(frozen=True)
class Environment:
    """A built environment: its interpreter and the distributions installed in it (name → version)."""

    name: str
    python: str
    requirements: tuple[str, ...] = ()
    installed: dict[str, str] = field(default_factory=dict)
    path: str = ""

    def machine(self, host: Machine, distributions: Iterable[str]) -> Machine:
        """The fingerprint of cells run here: the host's hardware with this environment's framework versions."""
        wanted = {normalize(d) for d in distributions}
        versions = {d: v for d, v in self.installed.items() if normalize(d) in wanted}
        return replace(host, frameworks=tuple(sorted(versions.items())))

    def to_json(self) -> dict[str, Any]:
        return {"python": self.python, "requirements": list(self.requirements), "path": self.path,
                "installed": self.installed}


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "adcompare" / "envs"


def _base_interpreter() -> str:
    """The interpreter behind this one (a venv's `python` is a link to it): what each environment is built from."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def environment_key(spec: EnvironmentSpec) -> str:
    canonical = json.dumps([list(spec.requirements), _base_interpreter(), sys.version, __version__])
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def adcompare_source() -> Path:
    """The adcompare source tree this process runs (a checkout, installed editable or not)."""
    here = PACKAGE.parent
    candidates = [here]
    try:
        direct = importlib.metadata.distribution("adcompare").read_text("direct_url.json")
        url = json.loads(direct or "{}").get("url", "")
        if url.startswith("file://"):
            candidates.append(Path(url[len("file://"):]))
    except importlib.metadata.PackageNotFoundError:
        pass
    for root in candidates:
        pyproject = root / "pyproject.toml"
        if pyproject.is_file() and re.search(r'^name\s*=\s*"adcompare"', pyproject.read_text(), re.M):
            return root
    raise EnvironmentSetupError(f"--env installs adcompare's own source into each environment, but none was found "
                                f"next to {PACKAGE}; install adcompare from a source checkout "
                                f"(pip install -e PATH) to use --env")


def source_digest(root: Path) -> str:
    """A hash of the adcompare source files, so an environment reinstalls adcompare when they change."""
    h = hashlib.sha256()
    files = [root / "pyproject.toml", *sorted(p for d in ("adcompare", "adapters", "problems")
                                              for p in (root / d).rglob("*") if p.is_file()
                                              and "__pycache__" not in p.parts)]
    for path in files:
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def core_requirements() -> tuple[str, ...]:
    """adcompare's own dependencies (numpy, pluggy, rich, jinja2), as its metadata declares them."""
    try:
        declared = importlib.metadata.requires("adcompare") or []
    except importlib.metadata.PackageNotFoundError:
        declared = []
    return tuple(r.split(";")[0].strip() for r in declared if "extra ==" not in r.replace("'", '"'))


@dataclass(frozen=True)
class Installer:
    """`uv` when on PATH (much faster), else the standard library's venv + pip. Neither downloads a Python."""

    uv: str | None

    @classmethod
    def find(cls) -> "Installer":
        return cls(shutil.which("uv"))

    def create(self, path: Path) -> list[str]:
        if self.uv:
            return [self.uv, "venv", "--quiet", "--python", _base_interpreter(), str(path)]
        return [_base_interpreter(), "-m", "venv", str(path)]

    def install(self, python: Path, args: Sequence[str]) -> list[str]:
        if self.uv:
            return [self.uv, "pip", "install", "--quiet", "--python", str(python), *args]
        return [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args]

    @property
    def environ(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # the parent's path must not leak into the environment being built
        env.pop("VIRTUAL_ENV", None)
        env["UV_PYTHON_DOWNLOADS"] = "never"
        return env


def _python(path: Path) -> Path:
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _first_error(output: str) -> str:
    """pip's first `ERROR:` line, or uv's `× …` line with the reason under it, as one line."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    at = next((i for i, ln in enumerate(lines) if ln.lower().startswith(("error:", "×"))), 0)
    text = " ".join(lines[at:at + 2]) if lines[at:at + 2] and lines[at].endswith(":") else (lines or [""])[at]
    return re.sub(r"^(ERROR:|error:|×)\s*|╰─▶\s*", "", text).strip()[:400] or "(no output)"


_INSTALLED = ("import importlib.metadata as m, json; "
              "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions() if d.metadata['Name']}))")


def build(spec: EnvironmentSpec, *, root: Path | None = None, installer: Installer | None = None,
          say: Callable[[str], None] = lambda line: None) -> Environment:
    """The environment for `spec`, built once and reused; raises EnvironmentSetupError (exit 2) when it cannot be.
    Its lock is released on return: a run that starts workers from it holds it with `in_use`."""
    with in_use([spec], root=root, installer=installer, say=say) as built:
        return built[spec.name]


@contextmanager
def in_use(specs: Sequence[EnvironmentSpec], *, root: Path | None = None, installer: Installer | None = None,
           say: Callable[[str], None] = lambda line: None) -> Iterator[dict[str, Environment]]:
    """Every environment of a run (`current` always among them: adapters no `--env` pins run there), each cached
    one built or brought up to this process's adcompare source under its exclusive lock, then held shared until
    the block ends, so no other run reinstalls adcompare into it while this run's workers start from it
    (environment_lock). A run that must wait says so in one line through `say`. The cached environments are
    locked in one order (by key), so two runs never wait on each other across environments."""
    root = root or cache_root()
    installer = installer or Installer.find()
    cached = sorted((s for s in specs if s.name != CURRENT and not s.python), key=environment_key)
    with ExitStack() as held:
        ready: dict[str, Environment] = {}
        by_key: dict[str, Environment] = {}  # two names with the same requirements are one environment
        for spec in cached:
            key = environment_key(spec)
            if key not in by_key:
                lock = held.enter_context(EnvironmentLock(lock_path(root / key)))
                by_key[key] = _ready(spec, root / key, lock, installer, say)
            ready[spec.name] = replace(by_key[key], name=spec.name)
        built = {CURRENT: current()}
        for spec in specs:
            built[spec.name] = ready.get(spec.name) or (built[CURRENT] if spec.name == CURRENT else existing(spec))
        yield built


def _ready(spec: EnvironmentSpec, path: Path, lock: EnvironmentLock, installer: Installer,
           say: Callable[[str], None]) -> Environment:
    """The environment at `path` holding this source, `lock` held shared on return. A lock is never upgraded:
    the shared lock is given up before the exclusive one is asked for, and the environment is checked again under
    the shared lock after every build or reinstall (another run's may have come in between)."""
    source = adcompare_source()
    digest = source_digest(source)
    while True:
        lock.shared(lambda: say(f"waiting for another adcompare run to finish building environment {spec.name!r} "
                                f"({path}) or reinstalling adcompare into it"))
        if (env := _up_to_date(spec, path, digest)) is not None:
            return env
        step = "reinstalling adcompare into it" if path.is_dir() else "building it"
        lock.exclusive(lambda: say(f"waiting for another adcompare run that uses environment {spec.name!r} "
                                   f"({path}) to finish before {step}"))
        if _up_to_date(spec, path, digest) is None:
            _make(spec, path, installer, source, digest, say)


def _up_to_date(spec: EnvironmentSpec, path: Path, digest: str) -> Environment | None:
    """The environment at `path` when it is complete and holds the adcompare source `digest`, else None."""
    try:
        data = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if data.get("adcompare_source") != digest:
        return None
    return Environment(spec.name, str(_python(path)), spec.requirements, dict(data["installed"]), str(path))


def _make(spec: EnvironmentSpec, path: Path, installer: Installer, source: Path, digest: str,
          say: Callable[[str], None]) -> None:
    """Build the environment at `path` when absent, and install the adcompare `source` into it; the caller holds
    its exclusive lock."""
    root, manifest = path.parent, path / MANIFEST
    if not path.is_dir():
        say(f"environment {spec.name!r}: building {' '.join(spec.requirements)} in {path}")
        root.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f"{path.name}.partial-", dir=root))
        try:
            _run(spec, installer.create(partial), installer, what="create a virtual environment")
            _run(spec, installer.install(_python(partial), [*spec.requirements, *core_requirements()]), installer,
                 what=f"install {' '.join(spec.requirements)}", fix="fix the requirement")
            if not path.is_dir():  # a run of an adcompare without locks may have built it meanwhile: keep the first
                partial.rename(path)  # complete or absent: a build killed half-way is never reused
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    python = _python(path)
    manifest.unlink(missing_ok=True)  # a reinstall killed half-way must not pass for any run's source
    _run(spec, installer.install(python, ["--no-deps", "--force-reinstall", str(source)]), installer,
         what=f"install adcompare from {source}")
    installed = json.loads(_run(spec, [str(python), "-c", _INSTALLED], installer, what="list its packages"))
    data = {"requirements": list(spec.requirements), "adcompare_source": digest, "installed": installed}
    written = manifest.with_name(MANIFEST + ".partial")
    written.write_text(json.dumps(data, indent=1, sort_keys=True))
    written.replace(manifest)  # whole or absent, even when killed while writing


def describe(spec: EnvironmentSpec) -> str:
    """For --dry-run: where the environment lives and whether a run would build it first."""
    if spec.name == CURRENT:
        return f"this interpreter, {sys.executable}"
    if spec.python:
        return f"the existing interpreter {spec.python} (used as it is)"
    path = cache_root() / environment_key(spec)
    state = "cached" if path.is_dir() else "to build"
    return f"{' '.join(spec.requirements)} ({state}: {path})"


def _run(spec: EnvironmentSpec, cmd: list[str], installer: Installer, *, what: str,
         fix: str = "") -> str:
    try:
        # An empty directory: `python -m pip` and `-c` import from their working directory first, so a source
        # tree's packages, or any stray re.py in the shared /tmp, would shadow the environment's own modules
        with tempfile.TemporaryDirectory(prefix="adcompare-env-") as empty:
            done = subprocess.run(cmd, capture_output=True, text=True, env=installer.environ, timeout=3600, cwd=empty)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentSetupError(f"--env {spec.name!r}: cannot {what}: {exc}") from exc
    if done.returncode != 0:
        raise EnvironmentSetupError(f"--env {spec.name!r}: cannot {what}: {_first_error(done.stderr + done.stdout)}"
                                    + (f"; {fix}" if fix else ""))
    return done.stdout


def current() -> Environment:
    """The interpreter adcompare runs in."""
    installed = {d.metadata["Name"]: d.version for d in importlib.metadata.distributions() if d.metadata["Name"]}
    return Environment(CURRENT, sys.executable, (), installed, sys.prefix)


def existing(spec: EnvironmentSpec) -> Environment:
    """`--env NAME=@PYTHON`: the interpreter as it is, with the distributions it has installed."""
    installed = json.loads(_run(spec, [spec.python, "-c", _INSTALLED], Installer(None),
                                what=f"run {spec.python}", fix="name a Python interpreter after @"))
    return Environment(spec.name, spec.python, (), installed, "")


def stamp(m: Measurement, machines: dict[str, Machine]) -> Measurement:
    """A cell run in a named environment carries that environment's fingerprint (its framework versions)."""
    env = m.cell.environment
    if env == CURRENT or env not in machines or m.machine:
        return m
    return replace(m, machine=machines[env].id)
