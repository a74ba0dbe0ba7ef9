"""Every `adcompare_*` hook. Plugins implement them with `@adcompare.hookimpl`."""
# mypy: disable-error-code="empty-body"
# (a hookspec is a signature: pluggy never calls its body)
from __future__ import annotations

from collections.abc import Iterable

import pluggy

from adcompare.model.problem import Problem
from adcompare.plugin.adapter import Adapter
from adcompare.plugin.report_section import Section

PROJECT = "adcompare"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def adcompare_adapters() -> Iterable[Adapter]:
    """Return adapter instances. Called once when the plugin manager is built, in the parent and in workers."""


@hookspec
def adcompare_problems() -> Iterable[Problem]:
    """Return problems (or `@problem` definitions). Called once when the plugin manager is built."""


@hookspec
def adcompare_report_sections(results) -> Iterable[Section | tuple[str, str]]:
    """Return report sections; `results` is the loaded `Results`. The built-in sections come through this hook too
    (adcompare.analysis.report_sections).

    A `Section` (title, anchor, order, template and its data, or a body) is drawn at its `order`; a (title, body)
    pair, the older form, is drawn after the built-in sections with the anchor `extra-N`. A plain string body is
    escaped; pass `markupsafe.Markup` for trusted HTML (escape what you interpolate).
    """
