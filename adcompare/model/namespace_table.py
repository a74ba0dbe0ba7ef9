"""What each adapter registers for the array namespace its problems run with (a loop, a branch, a derivative),
looked up by the namespace's identity from inside a problem — so also while torch.compile traces it.

The lookup compares namespaces with `is` over the few registered pairs. It used `id(xp)` as a dict key, which
torch 2.11's Dynamo cannot trace ("id() with unsupported args", a graph break: GradBench's ode under
torch.compile failed on an H100 with torch 2.11 while 2.13 traced it)."""
from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class NamespaceTable(Generic[T]):
    """One entry per namespace, the latest registration winning."""

    def __init__(self) -> None:
        self._pairs: list[tuple[object, T]] = []

    def register(self, namespace: object, entry: T) -> None:
        self._pairs = [(n, e) for n, e in self._pairs if n is not namespace] + [(namespace, entry)]

    def get(self, namespace: object) -> T | None:
        for registered, entry in self._pairs:
            if registered is namespace:
                return entry
        return None
