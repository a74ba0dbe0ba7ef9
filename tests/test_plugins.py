"""Plugin loading: entry points and --plugin files load the same way; broken plugins are reported, not fatal."""
from __future__ import annotations

import importlib.metadata as md
import sys
import types

import numpy as np
import pytest

from adcompare import Adapter, Capability, Support, hookimpl
from adcompare.adapters.jax import JaxAdapter
from adcompare.model.errors import CellFailure, PluginError, UsageError
from adcompare.plugin import registry as plugins
from adcompare.plugin.adapter import contract_breach
from adcompare.run.in_process import run_once
from tests.conftest import FIXTURES

PLUGINS = FIXTURES / "plugins"


def test_builtin_adapters_come_through_the_entry_point_group():
    names = {ep.name for ep in md.entry_points(group=plugins.ENTRY_POINT_GROUP)}
    assert {"jax", "torch", "tensorflow", "autograd", "builtin-problems"} <= names


def test_plugin_file_adds_its_problems():
    registry = plugins.load((str(PLUGINS / "extra_problem.py"),))
    assert "cubic_sum" in registry.problems and "exp_dot_loss" in registry.problems


def test_plugin_that_fails_to_import_is_a_plugin_error_naming_it():
    with pytest.raises(PluginError, match="broken_import.py.*failed to import: ModuleNotFoundError") as raised:
        plugins.load((str(PLUGINS / "broken_import.py"),))
    assert isinstance(raised.value, UsageError) and raised.value.exit_code == 2


def test_missing_plugin_path_or_module_is_a_plugin_error():
    with pytest.raises(PluginError, match="no such file"):
        plugins.load(("does/not/exist.py",))
    with pytest.raises(PluginError, match="no such file or module"):
        plugins.load(("adcompare_no_such_plugin_module",))


def _plugin_module(monkeypatch, name: str, **hooks):
    """A throwaway module implementing `hooks`, importable by name for this test only."""
    module = types.ModuleType(name)
    for hook, function in hooks.items():
        setattr(module, hook, hookimpl(function))
    monkeypatch.setitem(sys.modules, name, module)
    return module


def _fresh_registry() -> plugins.Registry:
    """plugins.load() past its cache, and the cache cleared again so other tests see the real entry points."""
    plugins.load.cache_clear()
    try:
        return plugins.load()
    finally:
        plugins.load.cache_clear()


def test_broken_entry_point_plugins_are_recorded_and_the_rest_load(monkeypatch):
    """An entry point whose import fails, one whose hook raises, and one that reuses a name."""
    raising = _plugin_module(monkeypatch, "adcompare_test_raising",
                             adcompare_problems=lambda: (_ for _ in ()).throw(RuntimeError("hook exploded")))
    duplicate = _plugin_module(monkeypatch, "adcompare_test_duplicate", adcompare_adapters=lambda: [JaxAdapter()])
    real = plugins._entry_points()
    extra = [md.EntryPoint("zz-missing", "adcompare_no_such_module", "adcompare"),
             md.EntryPoint("zz-raising", raising.__name__, "adcompare"),
             md.EntryPoint("zz-duplicate", duplicate.__name__, "adcompare")]
    monkeypatch.setattr(plugins, "_entry_points", lambda: real + extra)
    registry = _fresh_registry()
    reasons = {b.name: b.reason for b in registry.broken}
    assert reasons["zz-missing"].startswith("import failed: ModuleNotFoundError")
    assert "adcompare_problems raised RuntimeError: hook exploded" in reasons["zz-raising"]
    assert "adapter name 'jax' is already taken" in reasons["zz-duplicate"]
    assert "jax" in registry.adapters and "exp_dot_loss" in registry.problems


def test_unknown_names_suggest_the_closest(registry):
    with pytest.raises(UsageError, match="unknown problem 'exp_dot_los' \\(did you mean 'exp_dot_loss'\\?\\)"):
        registry.problem("exp_dot_los")


def test_a_third_party_cannot_take_a_builtin_name_by_sorting_first(monkeypatch):
    """Entry points load built-ins first: 'a-impostor' returning an adapter named 'jax' is the broken one."""
    impostor = _plugin_module(monkeypatch, "adcompare_test_impostor", adcompare_adapters=lambda: [JaxAdapter()])
    real = list(md.entry_points(group=plugins.ENTRY_POINT_GROUP))
    fake = md.EntryPoint("a-impostor", impostor.__name__, "adcompare")
    monkeypatch.setattr(md, "entry_points", lambda group: [fake, *real])
    reasons = {b.name: b.reason for b in _fresh_registry().broken}
    assert "adapter name 'jax' is already taken" in reasons["a-impostor"]
    assert "jax" not in reasons



def test_an_adapter_missing_a_required_method_is_refused_when_registered(monkeypatch):
    """At registration, not at the first cell: one line naming the class and what to add."""
    class NoTable(Adapter):
        name, distribution, module = "no-table", "numpy", "numpy"
        transforms = {"value": lambda np_, f: f}

        def namespace(self):
            return np

        def to_numpy(self, out):
            return np.asarray(out)

    class NoTransformForGrad(NoTable):
        name = "no-transform-for-grad"
        algorithms = {"value": "NumPy evaluation", "grad": "by hand"}

    modules = {cls.__name__: _plugin_module(monkeypatch, f"adcompare_test_{cls.__name__}",
                                            adcompare_adapters=lambda cls=cls: [cls()])
               for cls in (NoTable, NoTransformForGrad)}
    real = plugins._entry_points()
    monkeypatch.setattr(plugins, "_entry_points", lambda: real + [
        md.EntryPoint(f"zz-{name}", module.__name__, "adcompare") for name, module in modules.items()])
    registry = _fresh_registry()
    reasons = {b.name: b.reason for b in registry.broken}
    assert reasons["zz-NoTable"] == "adapter class NoTable lacks algorithms or capability; define it on the class"
    assert reasons["zz-NoTransformForGrad"] == ("adapter class NoTransformForGrad declares grad supported but has no "
                                                "transform for it; add it to `transforms` or override build")
    assert not {"no-table", "no-transform-for-grad"} & set(registry.adapters) and "jax" in registry.adapters
    with pytest.raises(PluginError) as raised:  # asked for by --plugin: the command stops, naming the fix
        plugins.load((str(PLUGINS / "incomplete_adapter.py"),))
    assert str(raised.value) == (f"--plugin {str(PLUGINS / 'incomplete_adapter.py')!r}: adapter class Incomplete "
                                 f"lacks transforms or build or prepare; define it on the class")


class Declared(Adapter):
    """An adapter that is only data: its capability, build and error explanation come from the tables."""

    name, distribution, module = "data-only", "numpy", "numpy"
    variants = {"eager": "NumPy"}
    algorithms = {"value": "NumPy evaluation", "jvp": Capability.emulated("by hand", "no forward mode")}
    transforms = {"value": lambda np_, f: f, "jvp": lambda np_, f: lambda w, v: np_.zeros(())}

    def namespace(self):
        return np

    def to_numpy(self, out):
        return np.asarray(out)

    def explain(self, exc):
        return "the problem read a missing name; pass it as a constant" if isinstance(exc, NameError) else None


def test_an_adapter_declared_as_data(registry):
    adapter = Declared()
    assert adapter.capability("value", "eager") == Capability(Support.NATIVE, "NumPy evaluation")
    assert adapter.capability("jvp", "eager").support is Support.EMULATED
    assert adapter.capability("grad", "eager").reason == "adapter 'data-only' declares no algorithm for grad"
    assert "declares no data-parallel" in adapter.capability("pmap_grad", "eager").reason
    assert "use variant 'eager'" in adapter.capability("value", "compiled").reason
    assert adapter.framework is np and contract_breach(adapter) is None
    problem = registry.problem("exp_dot_loss")
    _, value, inputs, size = run_once(adapter, problem, "value", "float64")
    np.testing.assert_allclose(value, problem.function(inputs.wrt, **inputs.constants, xp=np))


def test_explain_turns_a_recognised_error_into_a_cell_failure_naming_the_fix(registry):
    class Failing(Declared):
        transforms = {"value": lambda np_, f: lambda w: undefined_name}  # noqa: F821

    with pytest.raises(CellFailure, match="^the problem read a missing name; pass it as a constant$") as raised:
        run_once(Failing(), registry.problem("exp_dot_loss"), "value", "float64")
    assert isinstance(raised.value.__cause__, NameError)
