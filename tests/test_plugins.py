"""Plugin loading: entry points and --plugin files load the same way; broken plugins are reported, not fatal."""
from __future__ import annotations

import importlib.metadata as md
import sys
import types

import pytest

from adcompare import hookimpl
from adcompare.adapters.jax import JaxAdapter
from adcompare.model.errors import PluginError, UsageError
from adcompare.plugin import registry as plugins
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

