"""A real one-node SLURM cluster on localhost for the tests: munged, slurmctld and slurmd started from a generated
configuration under a temporary directory, and stopped by the pids this module started.

Everything the cluster writes (state, spool, logs, pid files, munge socket) lives under the temporary directory,
and it listens on free ports, so it neither needs nor touches a system-wide SLURM or munge. The facts it relies on
were checked on Debian 12 with `slurm-wlm` 22.05 (issue 16): root may run the SLURM daemons with SlurmUser=root;
munged must run as user `munge` with a key of mode 400 owned by munge.
"""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

MUNGE_KEY = Path("/etc/munge/munge.key")
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "srun")


def missing() -> str | None:
    """Why a cluster cannot start here, or None."""
    absent = [d for d in DAEMONS if shutil.which(d) is None and not Path(f"/usr/sbin/{d}").exists()]
    if absent:
        return f"SLURM/munge not installed ({', '.join(absent)} missing; run .ci/install-slurm)"
    if os.geteuid() != 0:
        return "starting slurmd needs root"
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "no 'munge' user (install the munge package)"
    if not MUNGE_KEY.exists():
        return f"{MUNGE_KEY} is missing (install the munge package)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _binary(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _memory_mb() -> int:
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return max(1024, int(pages / 2**20 * 0.9))


@dataclass
class Cluster:
    root: Path
    node: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment SLURM's client commands (and submitit) need to reach this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def write_config(self) -> None:
        munge_dir = self.root / "munge"
        for sub in ("state", "spool", "log", "run", "munge"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        munge = pwd.getpwnam("munge")
        os.chown(munge_dir, munge.pw_uid, munge.pw_gid)
        munge_dir.chmod(0o755)  # munged insists that everyone may traverse its socket's directory
        self.root.chmod(0o755)
        r = self.root
        self.conf.write_text(f"""\
ClusterName=adcompare-test
SlurmctldHost={self.node}
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_dir / 'munge.socket'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
StateSaveLocation={r / 'state'}
SlurmdSpoolDir={r / 'spool'}
SlurmctldPidFile={r / 'run' / 'slurmctld.pid'}
SlurmdPidFile={r / 'run' / 'slurmd.pid'}
SlurmctldLogFile={r / 'log' / 'slurmctld.log'}
SlurmdLogFile={r / 'log' / 'slurmd.log'}
NodeName={self.node} CPUs={os.cpu_count()} RealMemory={_memory_mb()} State=UNKNOWN
PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
""")

    def start(self, timeout: float = 60.0) -> None:
        self.write_config()
        munge_dir = self.root / "munge"
        self._spawn([_binary("munged"), "--foreground",
                     f"--socket={munge_dir / 'munge.socket'}", f"--pid-file={munge_dir / 'munged.pid'}",
                     f"--log-file={munge_dir / 'munged.log'}", f"--seed-file={munge_dir / 'munged.seed'}",
                     f"--key-file={MUNGE_KEY}"], "munged", user="munge")
        self._wait(lambda: (munge_dir / "munge.socket").exists(), timeout, "munged did not create its socket")
        self._spawn([_binary("slurmctld"), "-D", "-i", "-f", str(self.conf)], "slurmctld")
        self._spawn([_binary("slurmd"), "-D", "-f", str(self.conf)], "slurmd")
        self._wait(self._node_idle, timeout, "the node did not become idle")

    def _spawn(self, cmd: list[str], name: str, user: str | None = None) -> None:
        log = (self.root / "log" / f"{name}.out").open("wb")
        as_user = dict(user=user, group=user, extra_groups=[]) if user else {}
        self.processes.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                               start_new_session=True, **as_user))

    def _node_idle(self) -> bool:
        out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=self.env)
        return out.returncode == 0 and out.stdout.strip() in ("idle", "mix", "alloc")

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.processes:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited with {p.returncode}; " + self.logs())
            if ready():
                return
            time.sleep(0.5)
        raise RuntimeError(f"{what} within {timeout:g} s; " + self.logs())

    def logs(self) -> str:
        tails = []
        for path in sorted((self.root / "log").glob("*")) + sorted((self.root / "munge").glob("*.log")):
            text = path.read_text(errors="replace").strip().splitlines()[-5:]
            tails.append(f"{path.name}: " + " | ".join(text))
        return "; ".join(tails)

    def stop(self) -> None:
        """Stop the daemons this cluster started (by pid, in reverse order) and the jobs' process groups."""
        for p in reversed(self.processes):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        self.processes.clear()
