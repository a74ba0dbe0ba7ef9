"""Across devices: time per step against the device count D for the data-parallel operators, and the
parallel efficiency T(1) ÷ (D · T(D)) with its interval.

A series is one cell followed across device counts: each data-parallel cell is grouped with its one-device twin
(`Measurement.twin_key(devices=1)`), so problem, size, operator, adapter · variant, device kind, dtype, machine and
environment are held fixed by the key, never by a tuple written here. The efficiency's interval is bootstrap.py's
interval of the ratio of medians T(1) ÷ T(D) over the two cells' per-block samples, divided by D.

Devices of kind `cpu` are host devices: with D > 1 they are emulated on one processor (JAX's
--xla_force_host_platform_device_count, TensorFlow's logical devices, gloo processes) and share its cores, so
their figures measure the mechanism's overhead and check its correctness; they cannot show a speed-up. What the
worker set up is quoted from the cell's recorded `device_setup`.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from adcompare.analysis.bootstrap import Bootstrap, Ratio
from adcompare.analysis.sizes import sort_key
from adcompare.analysis.summary import operator_order, sample_key, timed
from adcompare.model.measurement import Measurement
from adcompare.model.operators import data_parallel
from adcompare.store.provenance import Provenance

FORMULA = "T(1) ÷ (D · T(D)): 1 is a perfect split of the batch, 1/D no gain over one device"
HOST_DEVICES = "cpu"  # the device kind whose D > 1 devices are emulated on one machine's cores


@dataclass(frozen=True)
class Step:
    """One device count of a series: its cell and, beside the one-device cell, its efficiency."""

    devices: int
    measurement: Measurement
    speedup: Ratio | None  # T(1) ÷ T(D) with its bootstrap interval; None when either is untimed or too few samples

    @property
    def efficiency(self) -> tuple[float, float, float] | None:
        """T(1) ÷ (D · T(D)) and its interval's bounds."""
        if self.speedup is None:
            return None
        d = self.devices
        return self.speedup.ratio / d, self.speedup.low / d, self.speedup.high / d


@dataclass(frozen=True)
class DeviceSeries:
    """One cell across device counts (steps sorted by D, the one-device cell first when it was run)."""

    steps: tuple[Step, ...]
    cores: int | None  # the machine's CPU cores, from its provenance

    @property
    def first(self) -> Measurement:
        return self.steps[0].measurement

    @property
    def most(self) -> Step:
        return self.steps[-1]

    @property
    def emulated(self) -> bool:
        """Host devices: several of them on one machine are emulated and share its cores."""
        return self.first.cell.device == HOST_DEVICES and self.most.devices > 1

    @property
    def setup(self) -> str:
        """What the worker of the largest device count set up, as it recorded it."""
        return str(self.most.measurement.details.get("device_setup") or "")

    @property
    def caveat(self) -> str:
        """The plain statement a reader needs before reading these figures as speed-ups, or ""."""
        if not self.emulated:
            return ""
        cores = f"this machine's {self.cores} core{'s' if self.cores != 1 else ''}" if self.cores \
            else "this machine's cores"
        return (f"{self.most.devices} emulated CPU devices share {cores}: these figures are overhead and "
                f"correctness, not speed-up")


def series(measurements: Sequence[Measurement], cores: Mapping[str, int] | None = None,
           boot: Bootstrap | None = None) -> list[DeviceSeries]:
    """Every data-parallel cell grouped with its one-device twin; series with a single device count are left out
    (nothing to scale). `cores`: CPU cores per machine fingerprint."""
    boot = boot or Bootstrap()
    cores = cores or {}
    groups: dict[tuple[str, str], list[Measurement]] = defaultdict(list)
    for m in measurements:
        if data_parallel(m.cell.operator):
            groups[m.twin_key(devices=1)].append(m)
    out = []
    for key, members in groups.items():
        if len({m.cell.devices for m in members}) < 2:
            continue
        one = next((m for m in members if m.cell.devices == 1), None)
        steps = []
        for m in sorted(members, key=lambda m: m.cell.devices):
            speedup = None
            if one is not None and m is not one and timed(one) and timed(m):
                speedup = boot.ratio(sample_key(m), m.measured, sample_key(one), one.measured)  # T(1) ÷ T(D)
            steps.append(Step(m.cell.devices, m, speedup))
        out.append(DeviceSeries(tuple(steps), cores.get(members[0].machine)))
    return sorted(out, key=_order)


def _order(s: DeviceSeries) -> tuple:
    c = s.first.cell
    return (c.problem, operator_order(c.operator), sort_key(c.size), c.device, c.dtype, s.first.machine,
            c.environment, c.adapter, c.variant)


def cores_by_machine(provenance: Sequence[Provenance]) -> dict[str, int]:
    """CPU cores per machine fingerprint, from the results files' headers."""
    out = {}
    for prov in provenance:
        if prov.cpu_count:
            out[prov.machine.id] = prov.cpu_count
    return out
