"""One test class per built-in adapter, made from a base class that reads `self.adapter_name`.

pytest-xdist's `--dist loadscope` (the README's test command) keeps a class in one process: a class per adapter
lets a module's adapters run their workers in different processes, where parametrizing one function would keep
them all in one.
"""
from __future__ import annotations

BUILT_IN_ADAPTERS = ("jax", "torch", "tensorflow", "autograd")


def one_class_per_adapter(base: type, adapters: tuple[str, ...] = BUILT_IN_ADAPTERS) -> dict[str, type]:
    """`Test<Adapter><Base>` subclasses of `base`, each with its `adapter_name`, keyed by name for `globals()`."""
    names = {name: f"Test{name.capitalize()}{base.__name__}" for name in adapters}
    return {cls: type(cls, (base,), {"adapter_name": name, "__module__": base.__module__})
            for name, cls in names.items()}
