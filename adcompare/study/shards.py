"""Shards: deterministic, cost-balanced slices of a plan, so a study can be spread over jobs or machines.

A shard is a set of *units*; a unit is the cells of one worker (`Estimate.worker`: a `Cell.worker_group`, torch's
CPU device counts together) — or, where a worker's cells alone cost more than half a shard, a run of them (sizes
kept in order), each of which pays its own worker start-up. Units go
largest first to the least loaded shard (LPT scheduling), ties broken by name, so every call with the same plan and
estimate gives the same split. With every unit at most half the mean, no shard exceeds 1.5× the mean: balance wins
over keeping a group whole, since a shard's wall time is what a job waits for. Cells decided without running
(unsupported, too large) go to a shard chosen from their key's hash, so the union of all N shards is exactly the
plan, with no cell twice.
"""
from __future__ import annotations

import re
import zlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from adcompare.model.cell import Cell
from adcompare.model.errors import UsageError
from adcompare.study.estimate import Estimate


@dataclass(frozen=True)
class ShardSpec:
    index: int  # 1-based, as typed: --shard 2/4
    count: int

    @classmethod
    def parse(cls, text: str) -> "ShardSpec":
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
        if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
            raise UsageError(f"--shard {text!r} is not K/N with 1 ≤ K ≤ N; write e.g. --shard 2/4")
        return cls(int(m.group(1)), int(m.group(2)))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class Unit:
    """Cells that run in one worker, one after another, and their estimated cost (start-up included)."""

    name: str
    cells: tuple[Cell, ...]
    seconds: float


def units(cells: Sequence[Cell], estimate: Estimate, n: int) -> list[Unit]:
    """Worker groups, split into runs of cells where a group costs more than half a shard."""
    groups: dict[tuple[str, ...], list[Cell]] = defaultdict(list)
    for c in cells:
        groups[estimate.worker(c)].append(c)
    total = sum(estimate.group_seconds(g) for g in groups.values())
    cap = total / n / 2 if n > 1 else float("inf")
    out: list[Unit] = []
    for key, group in sorted(groups.items()):
        name = "/".join(key)
        startup = estimate.startups.get(key, 0.0)
        run: list[Cell] = []
        seconds = startup
        for c in group:
            cost = estimate.cells[c.key]
            if run and seconds + cost > cap:
                out.append(Unit(f"{name}#{len(out)}", tuple(run), seconds))
                run, seconds = [], startup
            run.append(c)
            seconds += cost
        if run:
            out.append(Unit(f"{name}#{len(out)}", tuple(run), seconds))
    return out


def assign(cells: Sequence[Cell], estimate: Estimate, n: int) -> list[list[Unit]]:
    """The n shards' units (LPT: largest unit first onto the least loaded shard)."""
    shards: list[list[Unit]] = [[] for _ in range(n)]
    loads = [0.0] * n
    for unit in sorted(units(cells, estimate, n), key=lambda u: (-u.seconds, u.name)):
        i = min(range(n), key=lambda k: (loads[k], k))
        shards[i].append(unit)
        loads[i] += unit.seconds
    return shards


def shard_cells(cells: Sequence[Cell], estimate: Estimate, spec: ShardSpec) -> tuple[Cell, ...]:
    """The planned cells of shard `spec`, in the plan's order."""
    mine = {c.key for u in assign(cells, estimate, spec.count)[spec.index - 1] for c in u.cells}
    return tuple(c for c in cells if c.key in mine)


def owns_decided(key: str, spec: ShardSpec) -> bool:
    """Whether shard `spec` records a cell decided without running (stable across runs and machines)."""
    return zlib.crc32(key.encode()) % spec.count == spec.index - 1


def shard_seconds(cells: Sequence[Cell], estimate: Estimate, n: int) -> list[float]:
    """Estimated seconds of each of the n shards."""
    return [sum(u.seconds for u in shard) for shard in assign(cells, estimate, n)]
