"""The plugin manager: hookspecs, then the `adcompare` entry-point group, then `--plugin` files or modules.

Built-in adapters and problems are entry points of this package in the same group a third party uses. A plugin
that fails to import, whose hook raises, or that returns a name already taken is recorded as broken with the
reason; everything else keeps loading.
"""
from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

import pluggy

from adcompare.model.cell import CURRENT, Cell
from adcompare.model.errors import PluginError, ProblemDefinitionError, unknown
from adcompare.model.problem import Problem, ProblemDefinition, problems_in
from adcompare.plugin import hookspecs
from adcompare.plugin.adapter import Adapter, contract_breach

ENTRY_POINT_GROUP = "adcompare"


@dataclass(frozen=True)
class BrokenPlugin:
    name: str
    reason: str


@dataclass(frozen=True)
class Registry:
    """Everything the loaded plugins provide; `plugins` are the `--plugin` specs workers must load again, and so
    are `inputs` and `seed` (`--inputs` files and `--seed`, applied by `input_sources.with_inputs`)."""

    adapters: Mapping[str, Adapter]
    problems: Mapping[str, Problem]
    broken: tuple[BrokenPlugin, ...]
    plugins: tuple[str, ...]
    manager: pluggy.PluginManager
    inputs: tuple[str, ...] = ()
    seed: int = 0

    def adapter(self, name: str) -> Adapter:
        if name not in self.adapters:
            raise unknown("adapter", name, self.adapters)
        return self.adapters[name]

    def problem(self, name: str) -> Problem:
        if name not in self.problems:
            raise unknown("problem", name, self.problems)
        return self.problems[name]

    def worker_key(self, cell: Cell) -> tuple[str, ...]:
        """The worker process that runs `cell`: its `Cell.worker_group`'s, except that an adapter that sets its host
        devices up per cell (`Adapter.host_devices_per_cell`: torch's gloo group) runs the cells of every CPU device
        count in the worker of its 1-device cells; in the report a worker started for torch's one 4-device cell
        spent ~1 s starting up for it. Only in this interpreter's environment: another's worker (`--env`, the A/B
        gate's older checkout) may be an adcompare that sets devices up only at start."""
        adapter = self.adapters.get(cell.adapter)
        if (cell.devices != 1 and cell.device == "cpu" and cell.environment == CURRENT and adapter is not None
                and adapter.host_devices_per_cell):
            return replace(cell, devices=1).worker_group
        return cell.worker_group


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip().splitlines()[0]


def import_plugin(spec: str) -> ModuleType:
    """Import a `--plugin` argument: a path to a .py file, or a dotted module name."""
    path = Path(spec)
    if spec.endswith(".py") or path.exists():
        if not path.is_file():
            raise PluginError(f"--plugin {spec!r}: no such file; give a path to a .py file or a module name")
        module_name = f"adcompare_plugin_{abs(hash(str(path.resolve())))}"
        if module_name in sys.modules:
            return sys.modules[module_name]
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise PluginError(f"--plugin {spec!r}: Python cannot load it as a module; give a .py file")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except ProblemDefinitionError:
            raise
        except Exception as exc:
            del sys.modules[module_name]
            raise PluginError(f"--plugin {spec!r} failed to import: {_describe(exc)}") from exc
        return module
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as exc:
        raise PluginError(f"--plugin {spec!r}: no such file or module ({exc}); check the path or PYTHONPATH") from exc


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    """adcompare's own entry points first, then third parties by name: the first holder of a name keeps it, so a
    plugin cannot take a built-in adapter's name by sorting before it."""
    def builtin_first(ep: importlib.metadata.EntryPoint) -> tuple[bool, str]:
        dist = getattr(ep, "dist", None)
        return (getattr(dist, "name", None) != "adcompare", ep.name)

    return sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=builtin_first)


@functools.lru_cache(maxsize=None)
def load(plugins: tuple[str, ...] = ()) -> Registry:
    """Build the registry from entry points and `plugins`; cached per plugin list."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    broken: list[BrokenPlugin] = []
    extra_problems: dict[str, list[Problem]] = {}

    for ep in _entry_points():
        try:
            module = ep.load()
            pm.register(module, name=ep.name)
        except Exception as exc:  # a third party's import error must not take the rest down
            broken.append(BrokenPlugin(ep.name, f"import failed: {_describe(exc)}"))
    for spec in plugins:
        module = import_plugin(spec)
        if pm.is_registered(module):
            continue
        pm.register(module, name=spec)
        extra_problems[spec] = problems_in(module)

    adapters: dict[str, Adapter] = {}
    problems: dict[str, Problem] = {}

    def add(kind: str, table: dict, item, owner: str) -> None:
        key = item.name
        if key in table:
            if table[key] is item or (kind == "problem" and table[key].function is item.function):
                return
            broken.append(BrokenPlugin(owner, f"{kind} name {key!r} is already taken; rename it"))
            return
        table[key] = item

    for hook_name, kind, table in (("adcompare_adapters", "adapter", adapters),
                                   ("adcompare_problems", "problem", problems)):
        for impl in getattr(pm.hook, hook_name).get_hookimpls():  # registration order: first name wins
            owner = impl.plugin_name
            try:
                items = list(impl.function() or ())
                if kind == "problem":
                    items = [i.build() if isinstance(i, ProblemDefinition) else i for i in items]
                bad = [i for i in items if not isinstance(i, Adapter if kind == "adapter" else Problem)]
                if bad:
                    raise TypeError(f"{hook_name} returned {bad[0]!r}, not an {kind.capitalize()}")
            except ProblemDefinitionError as exc:
                if owner in plugins:
                    raise
                broken.append(BrokenPlugin(owner, str(exc)))
                continue
            except Exception as exc:
                if owner in plugins:
                    raise PluginError(f"--plugin {owner!r}: {hook_name} raised {_describe(exc)}") from exc
                broken.append(BrokenPlugin(owner, f"{hook_name} raised {_describe(exc)}"))
                continue
            breach = next(filter(None, map(contract_breach, items)), None) if kind == "adapter" else None
            if breach and owner in plugins:
                raise PluginError(f"--plugin {owner!r}: {breach}")
            if breach:
                broken.append(BrokenPlugin(owner, breach))
                continue
            for item in items:
                add(kind, table, item, owner)
    for owner, found in extra_problems.items():
        for item in found:
            add("problem", problems, item, owner)
    return Registry(adapters, problems, tuple(broken), tuple(plugins), pm)
