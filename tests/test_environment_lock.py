"""The lock of a cached environment (`run --env`): real processes contending for one lock file, a reinstall that
waits for another run to finish with the environment, and the CLI's hold for the whole run. No PyPI needed: the
cached environments here are made by hand (a manifest and a `bin/python`), the way `_make` leaves them."""
from __future__ import annotations

import fcntl
import json
import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from adcompare.plugin.registry import load
from adcompare.run import session
from adcompare.study import environment_specs, environments
from adcompare.study.environment_lock import lock_path
from adcompare.study.environment_specs import EnvironmentSpec

SAFETY_S = 300  # a safety net for a line that never comes: far above the seconds the slowest step here takes
SPEC = EnvironmentSpec("old", ("autograd==1.8.0",))

HOLDER = """
import pathlib, sys
from adcompare.study.environment_lock import EnvironmentLock
lock_file, mode, released, other_released = sys.argv[1:]
lock = EnvironmentLock(pathlib.Path(lock_file))
getattr(lock, mode)(lambda: print("waiting", flush=True))
print(f"held, other released: {pathlib.Path(other_released).exists()}", flush=True)
sys.stdin.readline()  # until the test lets go
pathlib.Path(released).write_text("")  # written while still holding: whoever waited must see it
lock.close()
"""


def _line(proc: subprocess.Popen) -> str:
    """The process's next stdout line; fails (not hangs) if none comes within the safety net."""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(SAFETY_S), f"no line from the process in {SAFETY_S} s"
    return proc.stdout.readline().strip()


def _holder(lock_file: Path, mode: str, released: Path, other_released: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(lock_file), mode, str(released), str(other_released)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")


def _let_go(proc: subprocess.Popen) -> None:
    proc.stdin.write("\n")
    proc.stdin.close()
    assert proc.wait(SAFETY_S) == 0


@pytest.mark.parametrize("first, second, waits", [("shared", "exclusive", True), ("exclusive", "shared", True),
                                                  ("exclusive", "exclusive", True), ("shared", "shared", False)])
def test_a_second_process_waits_exactly_when_the_modes_conflict(tmp_path, first, second, waits):
    lock_file = tmp_path / "0123456789abcdef.lock"
    a = _holder(lock_file, first, tmp_path / "a-released", tmp_path / "b-released")
    assert _line(a) == "held, other released: False"
    b = _holder(lock_file, second, tmp_path / "b-released", tmp_path / "a-released")
    if waits:
        assert _line(b) == "waiting"  # its non-blocking try failed: a holds the lock
        _let_go(a)
        assert _line(b) == "held, other released: True"  # granted only after a let go
        _let_go(b)
    else:
        assert _line(b) == "held, other released: False"  # granted while a still holds it
        _let_go(b)
        _let_go(a)


def test_a_killed_holder_releases_its_lock(tmp_path):
    lock_file = tmp_path / "0123456789abcdef.lock"
    a = _holder(lock_file, "exclusive", tmp_path / "a-released", tmp_path / "b-released")
    assert _line(a) == "held, other released: False"
    b = _holder(lock_file, "exclusive", tmp_path / "b-released", tmp_path / "a-released")
    assert _line(b) == "waiting"
    a.kill()  # SIGKILL: no cleanup runs; the kernel closes the file and drops the lock
    a.wait(SAFETY_S)
    assert _line(b) == "held, other released: False"
    _let_go(b)


def _cached(root: Path, spec: EnvironmentSpec, digest: str, python: str = "") -> Path:
    """A cached environment as a build leaves it, holding the adcompare source `digest`; its `bin/python` runs
    `python` (by default, one that fails: nothing here may install into a real interpreter)."""
    path = root / environments.environment_key(spec)
    (path / "bin").mkdir(parents=True)
    if python:
        (path / "bin" / "python").symlink_to(python)
    else:
        (path / "bin" / "python").write_text("#!/bin/sh\nexit 1\n")
        (path / "bin" / "python").chmod(0o755)
    manifest = {"requirements": list(spec.requirements), "adcompare_source": digest, "installed": {"autograd": "1.8.0"}}
    (path / environments.MANIFEST).write_text(json.dumps(manifest))
    return path


def _held_by_someone(lock_file: Path, exclusive: bool) -> bool:
    """Whether another open file holds `lock_file` against the given mode (flock probes across open files)."""
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


REINSTALL = """
import pathlib, sys
from adcompare.study import environments
from adcompare.study.environment_specs import EnvironmentSpec
from adcompare.study.environments import Installer

class Recording(Installer):  # a real command in place of pip: it records when the reinstall ran
    def install(self, python, args):
        return [sys.executable, "-c", "import pathlib; pathlib.Path(%r).write_text(str(pathlib.Path(%r).exists()))"
                % (sys.argv[2], sys.argv[3])]

spec = EnvironmentSpec("old", ("autograd==1.8.0",))
with environments.in_use([spec], root=pathlib.Path(sys.argv[1]), installer=Recording(None),
                         say=lambda line: print(line, flush=True)) as built:
    print("ready", built["old"].installed.get("adcompare", "?"), flush=True)
"""


def test_a_reinstall_waits_for_the_run_that_uses_the_environment(tmp_path):
    root = tmp_path / "envs"
    path = _cached(root, SPEC, "another-checkout", python=sys.executable)
    user = _holder(lock_path(path), "shared", tmp_path / "user-released", tmp_path / "unused")  # another run
    assert _line(user) == "held, other released: False"
    installed_after_release = tmp_path / "reinstalled"
    run = subprocess.Popen([sys.executable, "-c", REINSTALL, str(root), str(installed_after_release),
                            str(tmp_path / "user-released")], stdout=subprocess.PIPE, text=True, cwd="/")
    said = _line(run)
    assert said == (f"waiting for another adcompare run that uses environment 'old' ({path}) to finish before "
                    f"reinstalling adcompare into it")
    assert not installed_after_release.exists()
    _let_go(user)
    assert _line(run).startswith("ready ")
    assert run.wait(SAFETY_S) == 0
    assert installed_after_release.read_text() == "True"  # the reinstall ran after the user let go
    digest = environments.source_digest(environments.adcompare_source())
    assert json.loads((path / environments.MANIFEST).read_text())["adcompare_source"] == digest
    assert not _held_by_someone(lock_path(path), exclusive=True)  # released when the run ended


def test_a_run_holds_its_environments_shared_until_it_ends(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    digest = environments.source_digest(environments.adcompare_source())
    path = _cached(environments.cache_root(), SPEC, digest)
    twin = EnvironmentSpec("twin", SPEC.requirements)  # same requirements: one environment, locked once
    specs = environment_specs.parse_options(["old=autograd==1.8.0", "twin=autograd==1.8.0"])
    with session.environments_in_use(load(()), specs) as built:
        assert _held_by_someone(lock_path(path), exclusive=True)  # no reinstall while the run lasts
        assert not _held_by_someone(lock_path(path), exclusive=False)  # other runs may use it too
        assert built["old"].path == built["twin"].path == str(path) and built[twin.name].name == "twin"
        assert set(session.environments_header(load(()), specs, built)) == {"old", "twin"}
    assert not _held_by_someone(lock_path(path), exclusive=True)
    said: list[str] = []
    assert environments.build(SPEC, say=said.append).installed == {"autograd": "1.8.0"}  # cached: nothing done
    assert said == [] and not _held_by_someone(lock_path(path), exclusive=True)  # build() lets go on return


def _as_from_a_terminal() -> None:
    """Ctrl-C reaches the command as it does one typed at a terminal: a shell's background job (CI started with
    `&`, nohup) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _adcompare(args: list[str], cache: Path) -> subprocess.Popen:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "COLUMNS": "400"}  # wide: the waiting line stays one line
    return subprocess.Popen([sys.executable, "-m", "adcompare", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd="/", preexec_fn=_as_from_a_terminal)


SELECT = ["--adapter", "autograd", "--problem", "exp_dot_loss", "--size", "n10", "--operator", "grad",
          "--variant", "eager", "--dtype", "float64", "--no-progress", "--env", "old=autograd==1.8.0"]


def test_a_waiting_run_says_why_and_ctrl_c_ends_it_with_exit_130(tmp_path):
    path = _cached(tmp_path / "adcompare" / "envs", SPEC, "another-checkout")
    user = _holder(lock_path(path), "shared", tmp_path / "user-released", tmp_path / "unused")
    assert _line(user) == "held, other released: False"
    dry = _adcompare(["run", *SELECT, "--dry-run"], tmp_path)  # --dry-run takes no lock: it does not wait
    said = dry.communicate(timeout=SAFETY_S)[0]
    assert dry.returncode == 0 and f"(cached: {path})" in " ".join(said.split())
    check = _adcompare(["check", *SELECT], tmp_path)
    assert _line(check) == (f"waiting for another adcompare run that uses environment 'old' ({path}) to finish "
                            f"before reinstalling adcompare into it")
    check.send_signal(signal.SIGINT)
    said = check.communicate(timeout=SAFETY_S)[0]
    assert check.returncode == 130 and "Traceback" not in said
    assert said.strip().endswith("adcompare: interrupted")  # check writes no results file, so claims none
    _let_go(user)


USE = """
import pathlib, sys
from adcompare.study import environments
from adcompare.study.environment_specs import EnvironmentSpec

specs = [EnvironmentSpec.parse(text) for text in sys.argv[2:]]
with environments.in_use(specs, root=pathlib.Path(sys.argv[1]), say=lambda line: print(line, flush=True)):
    print("ready", flush=True)
"""


def test_a_run_locks_its_environments_in_one_order_whatever_the_order_of_its_options(tmp_path):
    """Two runs never wait on each other across environments: each locks in key order, so none holds a later
    environment while it waits for an earlier one (here: the later one stays free while the run waits)."""
    root = tmp_path / "envs"
    digest = environments.source_digest(environments.adcompare_source())
    specs = sorted([EnvironmentSpec("a", ("autograd==1.8.0",)), EnvironmentSpec("b", ("autograd==1.9.1",))],
                   key=environments.environment_key)
    first, later = (_cached(root, spec, digest) for spec in specs)
    builder = _holder(lock_path(first), "exclusive", tmp_path / "builder-released", tmp_path / "unused")
    assert _line(builder) == "held, other released: False"
    options = [f"{spec.name}={spec.requirements[0]}" for spec in reversed(specs)]  # the later one named first
    run = subprocess.Popen([sys.executable, "-c", USE, str(root), *options], stdout=subprocess.PIPE, text=True,
                           cwd="/")
    assert _line(run) == (f"waiting for another adcompare run to finish building environment {specs[0].name!r} "
                          f"({first}) or reinstalling adcompare into it")
    assert not _held_by_someone(lock_path(later), exclusive=True)  # not taken before the first one
    _let_go(builder)
    assert _line(run) == "ready"
    assert run.wait(SAFETY_S) == 0
