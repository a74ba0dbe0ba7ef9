"""Every `adcompare_*` hook. Plugins implement them with `@adcompare.hookimpl`."""
from __future__ import annotations

from collections.abc import Iterable

import pluggy

PROJECT = "adcompare"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def adcompare_adapters() -> Iterable["adcompare.Adapter"]:  # noqa: F821
    """Return adapter instances. Called once when the plugin manager is built, in the parent and in workers."""


@hookspec
def adcompare_problems() -> Iterable["adcompare.model.problem.Problem"]:  # noqa: F821
    """Return problems (or `@problem` definitions). Called once when the plugin manager is built."""


@hookspec
def adcompare_report_sections(results) -> Iterable[tuple[str, str]]:
    """Return extra report sections as (title, body) pairs; `results` is the loaded `Results`.

    A plain string body is escaped; pass `markupsafe.Markup` for trusted HTML (escape what you interpolate).
    """
