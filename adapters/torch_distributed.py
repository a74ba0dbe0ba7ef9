"""torch's data-parallel route (issue 26): a torch.distributed gloo process group of D processes on this host.

The worker that prepares the cell is rank 0; `prepare` starts D − 1 helper processes (torch.multiprocessing's
spawn context, not fork: torch holds threads) as ranks 1 … D−1. Rank 0 being the worker keeps the result where
`run()` returns it, with no extra copy through a pipe per call, and the timed call includes a rank's compute like
every other rank's. Each rank holds the parameters and its contiguous slice of B/D examples; one step is
torch.func.grad of the slice's mean loss (or the slice's per-example values) then `all_reduce(SUM)` / D (or
`all_gather`), so rank 0 holds the whole batch's mean-loss gradient (or its values).

Commands reach the helpers over a pipe each ("step", "stop"), not a gloo broadcast: a collective times out after
the group's timeout, and a helper may wait longer than that between calls (the float64 reference check sits
between the first call and the timing). A helper blocks on its pipe and ends on "stop", on the pipe's end-of-file,
or (Linux) with SIGKILL when the worker dies (PR_SET_PDEATHSIG). `close()` (Prepared.close, called by
execution.run_cell when the cell is done) stops and joins them and destroys the process group; a finalizer does
the same if a prepared cell is dropped unclosed. Rendezvous and collectives time out after `TIMEOUT_SECONDS`.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import importlib
import importlib.util
import os
import signal
import socket
import sys
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from types import ModuleType
from typing import Any

import numpy as np

from adcompare.model.errors import UnsupportedOperation
from adcompare.model.operators import devices_unfit
from adcompare.model.problem import Problem
from adcompare.plugin.adapter import Bound, Prepared

from .torch_namespace import fixed_namespace

TIMEOUT_SECONDS = 60  # init_process_group's timeout: rendezvous and every collective
JOIN_SECONDS = 10  # how long close() waits for a helper to leave before it is killed
STEP, STOP = b"step", b"stop"
PR_SET_PDEATHSIG = 1  # prctl(2)


@dataclass(frozen=True)
class FunctionReference:
    """Where a spawned helper finds the problem's function: its module (by name, or by file for a --plugin file,
    whose module name is not importable) and qualified name. Problem functions are replaced by the `@problem`
    decorator's object, so pickle cannot send them by reference itself."""

    module: str
    file: str | None
    qualname: str

    @classmethod
    def of(cls, function: Any) -> "FunctionReference":
        module = sys.modules.get(function.__module__)
        return cls(function.__module__, getattr(module, "__file__", None), function.__qualname__)

    def resolve(self) -> Any:
        if self.module in sys.modules:
            module = sys.modules[self.module]
        elif importlib.util.find_spec(self.module.split(".")[0]) is not None or not self.file:
            module = importlib.import_module(self.module)
        else:
            spec = importlib.util.spec_from_file_location(self.module, self.file)
            if spec is None or spec.loader is None:
                raise ImportError(f"{self.file}: cannot be loaded as module {self.module!r}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[self.module] = module
            spec.loader.exec_module(module)
        found: Any = module
        for part in self.qualname.split("."):
            found = getattr(found, part)
        return getattr(found, "function", found)  # the @problem object holds the plain function


@dataclass(frozen=True)
class RankSpec:
    """Everything one rank needs, picklable: the problem's function and arguments, its slice, the group."""

    function: FunctionReference
    wrt: str
    batch: str
    constants: Mapping[str, np.ndarray]
    w: np.ndarray
    examples: np.ndarray  # this rank's slice of the batch
    operator: str  # pmap_grad or pmap_value
    rank: int
    world_size: int
    init_method: str
    threads: int


def free_port() -> int:
    """A port nobody listens on now, chosen by the kernel (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _loopback_only() -> None:
    # gloo picks its interface from the host name; on Linux pin it to loopback so the group stays on this host.
    if sys.platform.startswith("linux"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")


def step_function(torch: ModuleType, xp: ModuleType, spec: RankSpec) -> Any:
    """The rank's step: slice mean-loss gradient + all_reduce(SUM)/D, or slice values + all_gather."""
    dist = torch.distributed
    problem = Problem(name="", function=spec.function.resolve(), wrt=spec.wrt, batch=spec.batch, sizes=(),
                      generator=lambda rng: {})
    constants = {k: torch.tensor(np.asarray(v)) for k, v in spec.constants.items()}
    f = problem.bind(xp, constants)
    w, examples = torch.tensor(np.asarray(spec.w)), torch.tensor(np.asarray(spec.examples))
    values = torch.func.vmap(f, in_dims=(None, 0))

    if spec.operator == "pmap_grad":
        slice_grad = torch.func.grad(lambda w, xs: torch.mean(values(w, xs)))

        def step() -> Any:
            g = slice_grad(w, examples)
            dist.all_reduce(g, op=dist.ReduceOp.SUM)
            return g / spec.world_size
    else:
        def step() -> Any:
            mine = values(w, examples).contiguous()
            gathered = [torch.empty_like(mine) for _ in range(spec.world_size)]
            dist.all_gather(gathered, mine)
            return torch.cat(gathered)
    return step


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the worker died before the request took effect
        os._exit(1)


def helper_main(spec: RankSpec, connection: Any, parent: int) -> None:
    """A helper rank (1 … D−1): join the group, then one step per "step" until "stop" or the pipe closes."""
    _die_with_parent(parent)
    import torch

    torch.set_num_threads(spec.threads)
    _loopback_only()
    dist = torch.distributed
    try:
        dist.init_process_group("gloo", init_method=spec.init_method, rank=spec.rank, world_size=spec.world_size,
                                timeout=timedelta(seconds=TIMEOUT_SECONDS))
        step = step_function(torch, fixed_namespace(), spec)
        connection.send_bytes(b"ready")
        while connection.recv_bytes() == STEP:
            step()
    except EOFError:  # the worker closed its end: nothing more will come
        pass
    except Exception as exc:  # say why before leaving: rank 0's collective then fails on the closed peer
        try:
            connection.send_bytes(f"rank {spec.rank}: {type(exc).__name__}: {exc}".encode())
        except OSError:
            pass
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    # Leave without multiprocessing's and the interpreter's teardown of torch (what the helper had to say went over
    # its pipe): 3 helpers tearing torch down side by side on 2 cores were most of a cell's ~1.6 s release.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class ProcessGroup:
    """Rank 0's side: the helpers, their pipes, the group; `step()` is one timed call, `close()` ends it all."""

    _live: "ProcessGroup | None" = None  # the one default group this worker holds (torch allows one)

    def __init__(self, torch: ModuleType, xp: ModuleType, spec0: RankSpec, helper_specs: list[RankSpec]):
        if ProcessGroup._live is not None:  # a prepared cell dropped without close(): its group goes first
            ProcessGroup._live.close()
        self.torch = torch
        context = torch.multiprocessing.get_context("spawn")
        self.helpers: list[Any] = []
        self.pipes: list[Any] = []
        self._finalizer = weakref.finalize(self, _stop, self.helpers, self.pipes, torch)
        ProcessGroup._live = self
        _loopback_only()
        for spec in helper_specs:
            mine, theirs = context.Pipe()
            process = context.Process(target=helper_main, args=(spec, theirs, os.getpid()), daemon=True,
                                      name=f"adcompare-torch-rank{spec.rank}")
            process.start()
            theirs.close()
            self.helpers.append(process)
            self.pipes.append(mine)
        try:
            torch.distributed.init_process_group("gloo", init_method=spec0.init_method, rank=0,
                                                 world_size=spec0.world_size,
                                                 timeout=timedelta(seconds=TIMEOUT_SECONDS))
            for rank, pipe in enumerate(self.pipes, start=1):
                if not pipe.poll(TIMEOUT_SECONDS):
                    raise RuntimeError(f"torch.distributed rank {rank} did not get ready in {TIMEOUT_SECONDS} s")
                said = pipe.recv_bytes()
                if said != b"ready":
                    raise RuntimeError(said.decode())
            self._step = step_function(torch, xp, spec0)
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.helpers]

    def step(self) -> Any:
        for pipe in self.pipes:
            pipe.send_bytes(STEP)
        try:
            return self._step()
        except Exception as exc:
            why = [pipe.recv_bytes().decode() for pipe in self.pipes if pipe.poll(0)]
            raise RuntimeError(f"torch.distributed step failed: {exc}" + (f" ({'; '.join(why)})" if why else "")
                               ) from exc

    def close(self) -> None:
        self._finalizer()
        if ProcessGroup._live is self:
            ProcessGroup._live = None


def _stop(helpers: list[Any], pipes: list[Any], torch: ModuleType) -> None:
    """Stop and join every helper (killed if it does not leave in JOIN_SECONDS), destroy rank 0's group."""
    for pipe in pipes:
        try:
            pipe.send_bytes(STOP)
        except OSError:  # the helper already left
            pass
    for process in helpers:
        process.join(JOIN_SECONDS)
        if process.is_alive():
            process.kill()
            process.join(JOIN_SECONDS)
    for pipe in pipes:
        pipe.close()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def prepare(torch: ModuleType, bound: Bound, details: dict[str, Any]) -> Prepared:
    """pmap_value / pmap_grad of `bound` through a gloo process group of the request's D processes."""
    request, batch = bound.request, bound.args[1]
    problem, inputs, world = request.problem, request.inputs, request.devices
    batch_name, examples = problem.batch, inputs.batch
    if batch_name is None or examples is None:  # never planned: the problems with a batch argument are the ones
        raise UnsupportedOperation(f"adapter 'torch': {request.operator} needs a batch argument, and problem "
                                   f"{problem.name!r} has none")
    unfit = devices_unfit(request.operator, world, batch.shape[0])
    if unfit:  # the planner never makes such a cell; a direct caller gets the reason, not a silent remainder
        raise UnsupportedOperation(f"adapter 'torch': {unfit}")
    per_rank = batch.shape[0] // world
    address = f"tcp://127.0.0.1:{free_port()}"
    threads = torch.get_num_threads()
    constants = {k: np.asarray(v) for k, v in inputs.constants.items()}
    specs = [RankSpec(FunctionReference.of(problem.function), problem.wrt, batch_name, constants,
                      np.asarray(inputs.wrt), np.asarray(examples[r * per_rank:(r + 1) * per_rank]),
                      request.operator, r, world, address, threads) for r in range(world)]
    group = ProcessGroup(torch, fixed_namespace(), specs[0], specs[1:])
    details.update(backend="gloo", world_size=world, init_method=address, rank0_pid=os.getpid(),
                   helper_pids=group.pids, threads_per_rank=threads, examples_per_rank=per_rank)
    return Prepared(group.step, details=details, close=group.close)
